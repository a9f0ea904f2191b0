// Package layers holds no code: its tests check, with `go list`, that the
// packages of bitdecode import only downward, as docs/architecture.md draws
// them, that no two packages share a name, and that no library package
// reads the environment itself (settings are data handed down from the
// command's edge).
package layers

// Package layers holds no code: its test checks, with `go list`, that the
// packages of bitdecode import only downward, as docs/architecture.md draws
// them, and that no two packages share a name.
package layers

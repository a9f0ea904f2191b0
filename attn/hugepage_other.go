// Elsewhere than Linux a cache's blocks keep the system's page size.

//go:build !linux

package attn

// adviseHuge does nothing here and reports false.
func adviseHuge([]byte) bool { return false }

// adviseHugeLater does nothing here and reports false.
func adviseHugeLater([]byte) bool { return false }

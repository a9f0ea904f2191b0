//go:build !linux

package hugepage

// Advise has no huge pages to give here and reports false.
func Advise([]byte) bool { return false }

// Collapse has no huge pages to give here and reports false.
func Collapse([]byte) bool { return false }

// Map has no huge pages to give here and reports false.
func Map(int) (mapping, aligned []byte, ok bool) { return nil, nil, false }

// Unmap is never called without Map's memory.
func Unmap([]byte) {}

//go:build !linux

package cpu

// mapHuge has no huge pages to give on this system: weights stay where
// they are loaded (hugepages.go).
func mapHuge(int) (mapping, aligned []byte, ok bool) { return nil, nil, false }

// unmapHuge is never called without mapHuge's memory.
func unmapHuge([]byte) {}

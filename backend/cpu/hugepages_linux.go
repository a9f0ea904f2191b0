package cpu

import (
	"syscall"
	"unsafe"
)

// madvHugePage is MADV_HUGEPAGE (linux/mman.h).
const madvHugePage = 14

// mapHuge maps n bytes (a multiple of hugePage) of anonymous memory at a
// hugePage boundary, advised for transparent huge pages: the mapping to
// unmap, its aligned n bytes, and whether it could be had. A kernel that
// refuses the advice (transparent huge pages off) still gives the memory,
// in small pages.
func mapHuge(n int) (mapping, aligned []byte, ok bool) {
	m, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))&(hugePage-1))) & (hugePage - 1)
	aligned = m[off : off+n : off+n]
	_ = syscall.Madvise(aligned, madvHugePage)
	return m, aligned, true
}

// unmapHuge returns a mapping of mapHuge's.
func unmapHuge(m []byte) { _ = syscall.Munmap(m) }

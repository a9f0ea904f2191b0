package cpu

import (
	"bytes"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// madvHugePage is MADV_HUGEPAGE (linux/mman.h).
const madvHugePage = 14

// mapHuge maps n bytes (a multiple of hugePage) of anonymous memory at a
// hugePage boundary, advised for transparent huge pages: the mapping to
// unmap, its aligned n bytes, and whether it could be had. Where the kernel
// gives no transparent huge pages (off, or the advice refused) there is
// nothing to gain from a copy, and it reports false.
func mapHuge(n int) (mapping, aligned []byte, ok bool) {
	if !thpAvailable() {
		return nil, nil, false
	}
	m, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))&(hugePage-1))) & (hugePage - 1)
	aligned = m[off : off+n : off+n]
	if syscall.Madvise(aligned, madvHugePage) != nil {
		_ = syscall.Munmap(m)
		return nil, nil, false
	}
	return m, aligned, true
}

// thpEnabled is the file whose bracketed word says when the kernel backs
// anonymous memory with transparent huge pages: [always], [madvise] (on
// MADV_HUGEPAGE, as here) or [never].
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// thpAvailable reports whether the kernel gives transparent huge pages to
// advised memory (read once).
var thpAvailable = sync.OnceValue(func() bool {
	b, err := os.ReadFile(thpEnabled)
	return err == nil && !bytes.Contains(b, []byte("[never]"))
})

// unmapHuge returns a mapping of mapHuge's.
func unmapHuge(m []byte) { _ = syscall.Munmap(m) }

package hugepage

import (
	"bytes"
	"os"
	"sync"
	"syscall"
)

// The madvise advices (linux/mman.h); the syscall package names the first
// only on some architectures and not the second.
const (
	madvHugePage = 14 // MADV_HUGEPAGE
	madvCollapse = 25 // MADV_COLLAPSE (Linux 6.1)
)

// Advise asks the kernel to back b (whole pages: Range) with huge pages at
// its first touch and reports whether it took the advice.
func Advise(b []byte) bool {
	return len(b) > 0 && syscall.Madvise(b, madvHugePage) == nil
}

// Collapse asks the kernel to back b's pages, already touched, with huge
// pages now and reports whether it did.
func Collapse(b []byte) bool {
	return len(b) > 0 && syscall.Madvise(b, madvCollapse) == nil
}

// Map maps n bytes (a multiple of Size) of anonymous memory at a Size
// boundary, advised for huge pages: the mapping to Unmap, its aligned n
// bytes, and whether it could be had. Where the kernel gives no transparent
// huge pages (off in thpEnabled, or the advice refused) it reports false.
func Map(n int) (mapping, aligned []byte, ok bool) {
	if !available() {
		return nil, nil, false
	}
	m, err := syscall.Mmap(-1, 0, n+Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	lo, _ := Range(m)
	aligned = m[lo : lo+n : lo+n]
	if !Advise(aligned) {
		_ = syscall.Munmap(m)
		return nil, nil, false
	}
	return m, aligned, true
}

// Unmap returns a mapping of Map's.
func Unmap(m []byte) { _ = syscall.Munmap(m) }

// thpEnabled is the file whose bracketed word says when the kernel backs
// anonymous memory with transparent huge pages: [always], [madvise] (on
// MADV_HUGEPAGE, as Map asks) or [never].
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// available reports whether the kernel gives transparent huge pages to
// advised memory (read once).
var available = sync.OnceValue(func() bool {
	b, err := os.ReadFile(thpEnabled)
	return err == nil && !bytes.Contains(b, []byte("[never]"))
})

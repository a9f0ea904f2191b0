// Transparent huge pages for a cache's packed blocks (Linux): the 2 MiB
// pages inside a chunk of blocks are advised (MADV_HUGEPAGE) and collapsed
// at once (MADV_COLLAPSE), so the decode's streaming reads take one TLB
// entry per 2 MiB instead of one per 4 KiB (docs/perf/cpu-attention.md v44).

package attn

import (
	"syscall"
	"unsafe"
)

// The madvise advices (linux/mman.h); the syscall package names the first
// only on some architectures and not the second.
const (
	madvHugePage = 14 // MADV_HUGEPAGE
	madvCollapse = 25 // MADV_COLLAPSE (Linux 6.1)
)

// adviseHuge asks the kernel to back the whole 2 MiB pages of b with huge
// pages now, and reports whether it did. The contents stay as they are; a
// kernel without transparent huge pages (or with them off) refuses, and b
// keeps its small pages: only the speed differs.
func adviseHuge(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(&b[0]))
	lo := int((base+hugePageBytes-1)&^(hugePageBytes-1) - base)
	hi := int((base+uintptr(len(b)))&^(hugePageBytes-1) - base)
	if hi <= lo {
		return false
	}
	r := b[lo:hi]
	if syscall.Madvise(r, madvHugePage) != nil {
		return false
	}
	// The chunk may reuse memory the heap already touched in small pages;
	// the advice alone applies to future faults, the collapse to these.
	return syscall.Madvise(r, madvCollapse) == nil
}

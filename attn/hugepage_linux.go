// Transparent huge pages for a cache's packed blocks (Linux): the 2 MiB
// pages inside a chunk of blocks are advised (MADV_HUGEPAGE) and collapsed
// at once (MADV_COLLAPSE), so the decode's streaming reads take one TLB
// entry per 2 MiB instead of one per 4 KiB (docs/perf/cpu-attention.md v44).

package attn

import "syscall"

// The madvise advices (linux/mman.h); the syscall package names the first
// only on some architectures and not the second.
const (
	madvHugePage = 14 // MADV_HUGEPAGE
	madvCollapse = 25 // MADV_COLLAPSE (Linux 6.1)
)

// adviseHuge asks the kernel to back b, whole 2 MiB pages (hugeRange),
// with huge pages now, and reports whether it did. The contents stay as
// they are; a kernel without transparent huge pages (or with them off)
// refuses, and b keeps its small pages: only the speed differs.
func adviseHuge(b []byte) bool {
	if len(b) == 0 || syscall.Madvise(b, madvHugePage) != nil {
		return false
	}
	// The chunk may reuse memory the heap already touched in small pages;
	// the advice alone applies to future faults, the collapse to these.
	return syscall.Madvise(b, madvCollapse) == nil
}

// adviseHugeLater asks for huge pages behind b (whole 2 MiB pages) at its
// first touch (MADV_HUGEPAGE alone: memory not yet faulted in needs no
// collapse) and reports whether the kernel took the advice.
func adviseHugeLater(b []byte) bool {
	return len(b) > 0 && syscall.Madvise(b, madvHugePage) == nil
}

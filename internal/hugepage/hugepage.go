// Package hugepage backs memory with 2 MiB transparent huge pages (Linux):
// the whole pages inside a slice advised (MADV_HUGEPAGE) and collapsed
// (MADV_COLLAPSE), or anonymous memory mapped at a page boundary and
// advised. Streaming reads then take one TLB entry per 2 MiB instead of one
// per 4 KiB, and the prefetchers are not stopped at every 4 KiB page's end:
// the CPU attention's block chunks (attn, docs/perf/cpu-attention.md v44)
// and the CPU backend's weights (backend/cpu, docs/perf/cpu-linear.md
// v2.16). The contents never change, only where they live; elsewhere, or
// where the kernel refuses, every call reports false and memory keeps the
// system's pages.
package hugepage

import "unsafe"

// Size is a transparent huge page's size.
const Size = 2 << 20

// Range returns the bounds [lo, hi) of the whole Size pages inside b
// (lo == hi when there is none).
func Range(b []byte) (lo, hi int) {
	if len(b) == 0 {
		return 0, 0
	}
	base := uintptr(unsafe.Pointer(&b[0]))
	lo = int((base+Size-1)&^(Size-1) - base)
	hi = int((base+uintptr(len(b)))&^(Size-1) - base)
	if hi <= lo {
		return 0, 0
	}
	return lo, hi
}

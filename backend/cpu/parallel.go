package cpu

import "github.com/bitdecode/bitdecode/internal/team"

// minRowWork is the number of elements below which a row-wise op runs on the
// calling goroutine: fanning out costs a few microseconds, about what 16K
// elements of a cheap op take.
const minRowWork = 1 << 14

// parallel runs fn(i) for every i in [0, items) on up to b.threads goroutines
// (the caller's included), the persistent spinning team of internal/team
// (v3 in docs/perf/cpu-linear.md). Items are handed out in order from an
// atomic counter; which goroutine runs an item never changes what the item
// computes, so results do not depend on the thread count.
func (b *Backend) parallel(items int, fn func(item int)) {
	team.Run(b.threads, items, fn)
}

// parallelRows runs fn over [0, rows) cut into contiguous chunks of rows,
// each of at least minRowWork elements (cols per row); a single chunk runs on
// the calling goroutine.
func (b *Backend) parallelRows(rows, cols int, fn func(r0, r1 int)) {
	per := max(1, minRowWork/max(cols, 1))
	chunks := (rows + per - 1) / per
	if chunks <= 1 || b.threads <= 1 {
		fn(0, rows)
		return
	}
	b.parallel(chunks, func(c int) {
		fn(c*per, min(rows, (c+1)*per))
	})
}

package attn

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/bitdecode/bitdecode/internal/team"
	"github.com/bitdecode/bitdecode/kv"
)

// SplitTokens is the number of cached tokens one parallel task reads (rounded
// up to whole blocks); LongSplitTokens replaces it for a sequence that still
// gives at least longSplitMinTasks tasks with it (its KV heads times its
// splits): fewer tasks, so fewer first blocks read without the previous
// block's prefetch (docs/perf/cpu-attention.md v13). A sequence's split is
// a function of its own length and the shape alone, so its results are the
// same bits whatever the number of threads and whatever else is in the
// batch.
const (
	SplitTokens       = 2048
	LongSplitTokens   = 4096
	longSplitMinTasks = 16
)

// seqSplit returns the tokens per task of a sequence of L tokens with hkv
// KV heads, a whole number of blocks of nr tokens.
func seqSplit(L, hkv, nr int) int {
	split := LongSplitTokens
	if hkv*((L+split-1)/split) < longSplitMinTasks {
		split = SplitTokens
	}
	return (split + nr - 1) / nr * nr
}

// windowFrom returns the first token Decode reads of a sequence of L
// tokens: 0 without a window; under p.Window, the start of the block (of nr
// tokens) that holds the first query row's first visible token. Whole
// blocks before it are skipped; the tokens of that block before each row's
// window are masked in softmax.
func windowFrom(L, nr int, p Params) int {
	return p.FirstVisible(L-p.Tq) / nr * nr
}

// Decode computes decode attention for every sequence on the CPU, writing
// out [B][Tq][Hq][D] from q [B][Tq][Hq][D]. Sequences may have different
// lengths. Under a sliding window (p.Window) it reads only the blocks
// from the one holding the first query token's first visible token on,
// and splits those as it would a sequence of their length.
func Decode(out, q []float32, seqs []*Seq, p Params) error {
	if err := p.check(out, q, seqs); err != nil {
		return err
	}
	if p.Format.Planes.On {
		return fmt.Errorf("attn: format %s is a bit-plane format; use DecodePlanes", p.Format.Spec.String())
	}
	if p.Format.K.Order != kv.Linear || p.Format.V.Order != kv.Linear {
		return fmt.Errorf("attn: the CPU decode reads blocks in linear order; format %s is in the GPU's mma order", p.Format.Spec.String())
	}
	nr := p.Format.Residual
	// The call's bookkeeping comes from scratchPool; every element read is
	// written below first.
	cs, _ := scratchPool.Get().(*callScratch)
	if cs == nil {
		cs = new(callScratch)
	}
	defer scratchPool.Put(cs)
	tasks := cs.tasks[:0]
	first := resize(cs.first, len(seqs))       // index of (b, 0, 0) in tasks
	splits := resize(cs.splits, len(seqs))     // tasks per KV head of sequence b
	splitLen := resize(cs.splitLen, len(seqs)) // tokens per task of sequence b
	from := resize(cs.from, len(seqs))         // first token read of sequence b
	for b, s := range seqs {
		first[b] = len(tasks)
		from[b] = windowFrom(s.Len(nr), nr, p)
		n := s.Len(nr) - from[b]
		splitLen[b] = seqSplit(n, p.Shape.Hkv, nr)
		splits[b] = max(1, (n+splitLen[b]-1)/splitLen[b])
		for h := 0; h < p.Shape.Hkv; h++ {
			for k := 0; k < splits[b]; k++ {
				tasks = append(tasks, decodeTask{b, h, k})
			}
		}
	}
	states := resize(cs.states, len(tasks))
	kern := activeKernels()
	wp, _ := padParams(p, kern) // the workers' Params: p, or p at a padded head dim (v82)
	vgroups := 0
	if wp.Format.V.Elem.IsInt() {
		vgroups = wp.Format.D / wp.Format.V.Group
	}
	cs.slab = newStates(states, wp.Shape.Group()*wp.Tq, wp.Shape.D, vgroups, cs.slab)
	// left[b·Hkv+h] counts the tasks of sequence b's KV head h still to
	// run: the task that brings it to 0 merges the head's splits (v45).
	left := resize(cs.left, len(seqs)*p.Shape.Hkv)
	for b := range seqs {
		for h := 0; h < p.Shape.Hkv; h++ {
			left[b*p.Shape.Hkv+h].Store(int32(splits[b]))
		}
	}
	// One region of the persistent team (internal/team): the tasks start
	// within a microsecond on every core instead of after a thread's
	// wake-up; each task takes a pooled worker (its scratch).
	threads := runtime.GOMAXPROCS(0)
	if work := decodeWork(seqs, p); work < inlineWork {
		threads = 1
	}
	// The tasks run split by split, a sequence's KV heads side by side
	// (order), so the two cores' tasks read neighbouring heads of the same
	// blocks at the same time; which states they fill, and so the bits,
	// do not depend on the order (docs/perf/cpu-attention.md v33).
	order := cs.order[:0]
	for b := range seqs {
		for k := 0; k < splits[b]; k++ {
			for h := 0; h < p.Shape.Hkv; h++ {
				order = append(order, first[b]+h*splits[b]+k)
			}
		}
	}
	span := func(i int) (s *Seq, lo, hi int) {
		tk := tasks[i]
		s = seqs[tk.b]
		lo = from[tk.b] + tk.k*splitLen[tk.b]
		return s, lo, min(lo+splitLen[tk.b], s.Len(nr))
	}
	team.Run(threads, len(tasks), func(j int) {
		w := getWorker(p, wp, kern)
		defer workerPool.Put(w)
		i := order[j]
		tk := tasks[i]
		s, lo, hi := span(i)
		// The first block of the task this core most likely takes next
		// (the cores take the items in turn) is prefetched by this task's
		// last block, as the next block of the same task is (v34). A wrong
		// guess only costs the other core's cache the lines.
		w.follow = nil
		if j+threads < len(order) {
			ni := order[j+threads]
			ns, nlo, _ := span(ni)
			if blk := nlo / nr; blk < len(ns.Blocks) {
				w.follow = ns.Blocks[blk][tasks[ni].h*p.Format.BlockBytes():]
			}
		}
		states[i].reset()
		w.run(&states[i], q, tk.b, tk.h, s, lo, hi)
		// The head's last task to finish merges its splits in split
		// order, whichever core ran them: the same operations in the same
		// order as a merge after the region, so the same bits, but on both
		// cores and while the other one still computes (v45).
		if left[tk.b*p.Shape.Hkv+tk.h].Add(-1) == 0 {
			base := first[tk.b] + tk.h*splits[tk.b]
			mergeHead(out, states[base:base+splits[tk.b]], w.out, tk.b, tk.h, p, kern)
		}
	})
	cs.tasks, cs.first, cs.splits, cs.splitLen, cs.states, cs.order, cs.left, cs.from = tasks, first, splits, splitLen, states, order, left, from
	return nil
}

// mergeHead folds the states of one (sequence b, KV head h)'s splits into
// the first, in split order, and writes its rows' outputs (finished, rotated
// back for a rotating format) to out, o a scratch row of D.
func mergeHead(out []float32, st []state, o []float32, b, h int, p Params, kern *kernels) {
	sh := p.Shape
	tot := &st[0]
	for k := 1; k < len(st); k++ {
		tot.merge(&st[k])
	}
	for row := 0; row < sh.Group()*p.Tq; row++ {
		i, j := row/sh.Group(), row%sh.Group()
		tot.finish(o, row)
		if p.Format.Rotate {
			kern.rotate(o)
		}
		off := ((b*p.Tq+i)*sh.Hq + h*sh.Group() + j) * sh.D
		copy(out[off:off+sh.D], o)
	}
}

// inlineWork is the decode work (cached tokens times query rows times head
// dim, over every KV head, decodeWork) below which a call runs its tasks on
// the calling goroutine: a team region's wake-ups and the second core's
// cold caches cost more than the few microseconds of work they would share
// (docs/perf/cpu-attention.md v26). The split into tasks and their merge
// are the same either way, so are the bits.
const inlineWork = 1 << 16

// decodeWork returns Σ over sequences of (tokens read)·Hkv·R·D.
func decodeWork(seqs []*Seq, p Params) int {
	n := 0
	for _, s := range seqs {
		l := s.Len(p.Format.Residual)
		n += l - windowFrom(l, p.Format.Residual, p)
	}
	return n * p.Shape.Hkv * p.Shape.Group() * p.Tq * p.Shape.D
}

// state is the online-softmax state of R query rows over part of a sequence:
// running max m, denominator l, the probability-weighted sum of V codes (or
// values) acc [R][D] and, for integer V, the weighted sum of zeros zacc
// [R][D/G].
type state struct {
	m, l      []float32
	acc, zacc []float32
	vgroups   int
	d         int
	order     accOrder // the accumulators' order (int4 pvU8's lane order, v66)
}

// accOrder is the order of a state's accumulators within each row.
type accOrder uint8

const (
	accZero     accOrder = iota // all zero (reset): either order
	accChannels                 // channel order
	accLanes                    // int4 pvU8's lane order (kernels.unlaneU8)
)

// decodeTask is one parallel task of Decode: sequence b's KV head h, split
// (run of tokens) k.
type decodeTask struct{ b, h, k int }

// callScratch is one Decode call's bookkeeping, kept in scratchPool between
// calls: the states' slab (33 KB for int2 at L 8192, Hkv 8, R 4: a large
// allocation the runtime zeroed each call and the GC collected; a pooled
// one is only cleared, docs/perf/cpu-attention.md v42) and the task lists
// and states (small allocations, v43).
type callScratch struct {
	slab                           []float32
	states                         []state
	tasks                          []decodeTask
	first, splits, splitLen, order []int
	from                           []int
	left                           []atomic.Int32
}

// scratchPool keeps *callScratch between Decode calls.
var scratchPool sync.Pool

// resize returns s with length n, reallocated only when its capacity is
// short; the caller writes every element it reads.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// newStates lays out the states of R rows for every task in one slab (a
// new one where slab is too small) and returns the slab used. Each task
// empties its own state (reset) when it starts: on its own core, in the
// region, not a clear of the whole slab before it (v45).
func newStates(states []state, r, d, vgroups int, slab []float32) []float32 {
	per := 2*r + rows4(r)*d + r*vgroups
	n := len(states) * per
	if cap(slab) < n {
		slab = make([]float32, n)
	}
	slab = slab[:n]
	for i := range states {
		b := slab[i*per : (i+1)*per : (i+1)*per]
		m, l := b[:r], b[r:2*r]
		b = b[2*r:]
		acc, zacc := b[:r*d:rows4(r)*d], b[rows4(r)*d:]
		states[i] = state{m: m, l: l, acc: acc, zacc: zacc, vgroups: vgroups, d: d}
	}
	return slab
}

// reset empties s: m = -Inf, the sums 0 (the accumulators' padding rows
// included).
func (s *state) reset() {
	for j := range s.m {
		s.m[j] = float32(math.Inf(-1))
	}
	clear(s.l)
	clear(s.acc[:cap(s.acc)])
	clear(s.zacc)
	s.order = accZero
}

// rows4 rounds a row count up to the 4 rows of the integer PV kernel; the
// accumulators have room for the padding rows (whose weights are 0).
func rows4(r int) int { return (r + 3) &^ 3 }

// merge folds o into s (log-sum-exp).
func (s *state) merge(o *state) {
	for r := range s.m {
		m := max(s.m[r], o.m[r])
		if math.IsInf(float64(m), -1) {
			continue
		}
		a, b := exp32(s.m[r]-m), exp32(o.m[r]-m)
		s.m[r], s.l[r] = m, s.l[r]*a+o.l[r]*b
		sa, oa := s.acc[r*s.d:(r+1)*s.d], o.acc[r*s.d:(r+1)*s.d]
		for c := range sa {
			sa[c] = sa[c]*a + oa[c]*b
		}
		sz, oz := s.zacc[r*s.vgroups:(r+1)*s.vgroups], o.zacc[r*s.vgroups:(r+1)*s.vgroups]
		for c := range sz {
			sz[c] = sz[c]*a + oz[c]*b
		}
	}
}

// finish writes row r's output (acc plus zeros, over l) to o, a value
// group at a time (D/vgroups channels share one zero sum): the same
// (acc + z)·inv per channel, without a division per channel
// (docs/perf/cpu-attention.md v41).
func (s *state) finish(o []float32, r int) {
	inv := 1 / s.l[r]
	acc := s.acc[r*s.d : (r+1)*s.d]
	o = o[:len(acc)]
	if s.vgroups == 0 {
		for c, x := range acc {
			o[c] = x * inv
		}
		return
	}
	g := s.d / s.vgroups
	for j, z := range s.zacc[r*s.vgroups : (r+1)*s.vgroups] {
		og, ag := o[j*g:(j+1)*g], acc[j*g:(j+1)*g]
		for c, x := range ag {
			og[c] = (x + z) * inv
		}
	}
}

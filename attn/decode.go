package attn

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// SplitTokens is the number of cached tokens one parallel task reads (rounded
// up to whole blocks). The split count is a function of the shape alone, so
// results are the same bits whatever the number of threads.
const SplitTokens = 2048

// codeLUT[b] holds the codes of byte b as float32 for 2-, 4- and 8-bit
// elements: int2 uses all four entries, int4 the first two, int8 the first.
var codeLUT [3][256][4]float32

func init() {
	for b := 0; b < 256; b++ {
		for i := 0; i < 4; i++ {
			codeLUT[0][b][i] = float32(b >> (2 * i) & 3)
		}
		codeLUT[1][b][0], codeLUT[1][b][1] = float32(b&15), float32(b>>4)
		codeLUT[2][b][0] = float32(b)
	}
}

// Decode computes decode attention for every sequence on the CPU, writing
// out [B][Tq][Hq][D] from q [B][Tq][Hq][D]. Sequences may have different
// lengths.
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
	split := (SplitTokens + nr - 1) / nr * nr
	type task struct{ b, h, split int }
	var tasks []task
	first := make([]int, len(seqs)) // index of (b, 0, 0) in tasks
	splits := make([]int, len(seqs))
	for b, s := range seqs {
		first[b] = len(tasks)
		splits[b] = max(1, (s.Len(nr)+split-1)/split)
		for h := 0; h < p.Shape.Hkv; h++ {
			for k := 0; k < splits[b]; k++ {
				tasks = append(tasks, task{b, h, k})
			}
		}
	}
	states := make([]state, len(tasks))
	workers := min(runtime.GOMAXPROCS(0), len(tasks))
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker(p)
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(tasks) {
					return
				}
				tk := tasks[i]
				s := seqs[tk.b]
				lo := tk.split * split
				hi := min(lo+split, s.Len(nr))
				w.run(&states[i], q, tk.b, tk.h, s, lo, hi)
			}
		}()
	}
	wg.Wait()
	// Merge the splits of each (sequence, KV head) in split order.
	sh := p.Shape
	r := sh.Group() * p.Tq
	o := make([]float32, sh.D)
	for b := range seqs {
		for h := 0; h < sh.Hkv; h++ {
			base := first[b] + h*splits[b]
			tot := &states[base]
			for k := 1; k < splits[b]; k++ {
				tot.merge(&states[base+k])
			}
			for row := 0; row < r; row++ {
				i, j := row/sh.Group(), row%sh.Group()
				tot.finish(o, row, p.Format)
				if p.Format.Rotate {
					kv.Rotate(o)
				}
				off := ((b*p.Tq+i)*sh.Hq + h*sh.Group() + j) * sh.D
				copy(out[off:off+sh.D], o)
			}
		}
	}
	return nil
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
}

func newState(r, d, vgroups int) state {
	s := state{m: make([]float32, r), l: make([]float32, r), acc: make([]float32, r*d), zacc: make([]float32, r*vgroups), vgroups: vgroups, d: d}
	for i := range s.m {
		s.m[i] = float32(math.Inf(-1))
	}
	return s
}

// merge folds o into s (log-sum-exp).
func (s *state) merge(o *state) {
	for r := range s.m {
		m := max(s.m[r], o.m[r])
		if math.IsInf(float64(m), -1) {
			continue
		}
		a := float32(math.Exp(float64(s.m[r] - m)))
		b := float32(math.Exp(float64(o.m[r] - m)))
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

// finish writes row r's output (acc plus zeros, over l) to o.
func (s *state) finish(o []float32, r int, f kv.Format) {
	inv := 1 / s.l[r]
	acc := s.acc[r*s.d : (r+1)*s.d]
	for c := range o {
		x := acc[c]
		if s.vgroups > 0 {
			x += s.zacc[r*s.vgroups+c/f.V.Group]
		}
		o[c] = x * inv
	}
}

// worker holds one goroutine's scratch buffers.
type worker struct {
	p      Params
	r      int       // query rows per KV head: Group*Tq
	q      []float32 // [R][D] scaled (and rotated) queries of the current head
	qs     []float32 // [R][D] queries times key scales (KC)
	bias   []float32 // [R] queries · key zeros (KC)
	scores []float32 // [R][Nr]
	row    []float32 // [D] one decoded row
	limits []int     // [R] last visible token of each row
	blk    state     // one block's weighted sums, added to the split's state after the block
}

func newWorker(p Params) *worker {
	r := p.Shape.Group() * p.Tq
	d := p.Shape.D
	return &worker{p: p, r: r, q: make([]float32, r*d), qs: make([]float32, r*d), bias: make([]float32, r),
		scores: make([]float32, r*p.Format.Residual), row: make([]float32, d), limits: make([]int, r)}
}

// loadQueries fills w.q with the scaled (rotated) queries of sequence b's
// KV head h.
func (w *worker) loadQueries(q []float32, b, h int) {
	sh, d := w.p.Shape, w.p.Shape.D
	scale := w.p.scale()
	for row := 0; row < w.r; row++ {
		i, j := row/sh.Group(), row%sh.Group()
		off := ((b*w.p.Tq+i)*sh.Hq + h*sh.Group() + j) * d
		dst := w.q[row*d : (row+1)*d]
		copy(dst, q[off:off+d])
		if w.p.Format.Rotate {
			kv.Rotate(dst)
		}
		for c := range dst {
			dst[c] *= scale
		}
	}
}

// run computes the state of tokens [lo, hi) of sequence s, KV head h.
func (w *worker) run(st *state, q []float32, b, h int, s *Seq, lo, hi int) {
	f := w.p.Format
	vgroups := 0
	if f.V.Elem.IsInt() {
		vgroups = f.D / f.V.Group
	}
	*st = newState(w.r, f.D, vgroups)
	if len(w.blk.acc) != len(st.acc) || len(w.blk.zacc) != len(st.zacc) {
		w.blk = newState(w.r, f.D, vgroups)
	}
	w.loadQueries(q, b, h)
	l := s.Len(f.Residual)
	for row := range w.limits {
		w.limits[row] = l - w.p.Tq + row/w.p.Shape.Group()
	}
	nr := f.Residual
	for t := lo; t < hi; {
		if blk := t / nr; blk < len(s.Blocks) {
			base := s.Blocks[blk][h*f.BlockBytes():]
			w.blockScores(base[:f.K.Bytes], nr)
			w.softmax(st, t, nr)
			w.blockValues(&w.blk, base[f.K.Bytes:f.K.Bytes+f.V.Bytes], nr)
			w.flush(st)
			t += nr
			continue
		}
		n := hi - t // residual tokens
		off := h * nr * f.D
		w.halfScores(s.ResK[off:], n)
		w.softmax(st, t, n)
		w.halfValues(&w.blk, s.ResV[off:], n)
		w.flush(st)
		t += n
	}
}

// blockScores writes the scores of the n tokens of a packed K half to w.scores.
func (w *worker) blockScores(k []byte, n int) {
	lay, d := w.p.Format.K, w.p.Format.D
	switch {
	case !lay.Elem.IsInt():
		for t := 0; t < n; t++ {
			decodeFloatRow(w.row, lay, k, t)
			for r := 0; r < w.r; r++ {
				w.scores[r*n+t] = dot(w.q[r*d:(r+1)*d], w.row)
			}
		}
	case lay.Scaling == kv.PerChannel:
		for t0 := 0; t0 < n; t0 += lay.Group {
			// Fold the group's scales into Q and its zeros into one bias per row.
			for r := 0; r < w.r; r++ {
				qr, qs := w.q[r*d:(r+1)*d], w.qs[r*d:(r+1)*d]
				var bias float32
				for c := range qr {
					s, z := lay.Param(k, lay.ParamIndex(t0, c))
					qs[c] = qr[c] * half.ToFloat32(s)
					bias += qr[c] * half.ToFloat32(z)
				}
				w.bias[r] = bias
			}
			for t := t0; t < t0+lay.Group; t++ {
				decodeCodes(w.row, lay, k, t)
				for r := 0; r < w.r; r++ {
					w.scores[r*n+t] = w.bias[r] + dot(w.qs[r*d:(r+1)*d], w.row)
				}
			}
		}
	default: // per token, groups of G channels: s·(Q·codes) + z·ΣQ per group
		g := lay.Group
		for t := 0; t < n; t++ {
			decodeCodes(w.row, lay, k, t)
			for r := 0; r < w.r; r++ {
				qr := w.q[r*d : (r+1)*d]
				var sc float32
				for c0 := 0; c0 < d; c0 += g {
					s, z := lay.Param(k, lay.ParamIndex(t, c0))
					sc += half.ToFloat32(s)*dot(qr[c0:c0+g], w.row[c0:c0+g]) + half.ToFloat32(z)*sum(qr[c0:c0+g])
				}
				w.scores[r*n+t] = sc
			}
		}
	}
}

// halfScores writes the scores of n fp16 residual keys to w.scores.
func (w *worker) halfScores(k []uint16, n int) {
	d := w.p.Format.D
	for t := 0; t < n; t++ {
		for c := range w.row {
			w.row[c] = half.ToFloat32(k[t*d+c])
		}
		for r := 0; r < w.r; r++ {
			w.scores[r*n+t] = dot(w.q[r*d:(r+1)*d], w.row)
		}
	}
}

// softmax masks the scores of tokens [t0, t0+n), updates the running max
// and denominator, rescales the accumulators, and turns w.scores into the
// unnormalized probabilities exp(score - m).
func (w *worker) softmax(st *state, t0, n int) {
	d := st.d
	for r := 0; r < w.r; r++ {
		sc := w.scores[r*n : (r+1)*n]
		m := st.m[r]
		for t := range sc {
			if t0+t > w.limits[r] {
				sc[t] = float32(math.Inf(-1))
			}
			m = max(m, sc[t])
		}
		if math.IsInf(float64(m), -1) {
			clear(sc)
			continue
		}
		if m != st.m[r] {
			a := float32(math.Exp(float64(st.m[r] - m)))
			st.l[r] *= a
			for c := range st.acc[r*d : (r+1)*d] {
				st.acc[r*d+c] *= a
			}
			for c := range st.zacc[r*st.vgroups : (r+1)*st.vgroups] {
				st.zacc[r*st.vgroups+c] *= a
			}
			st.m[r] = m
		}
		var l float32
		for t, s := range sc {
			e := float32(math.Exp(float64(s - m)))
			sc[t] = e
			l += e
		}
		st.l[r] += l
	}
}

// flush adds the block sums of w.blk to st and clears them. Summing each
// block apart keeps the float32 rounding error of a long sequence near
// (Nr + blocks)·eps instead of L·eps.
func (w *worker) flush(st *state) {
	for i, x := range w.blk.acc {
		st.acc[i] += x
	}
	for i, x := range w.blk.zacc {
		st.zacc[i] += x
	}
	clear(w.blk.acc)
	clear(w.blk.zacc)
}

// blockValues accumulates the packed V half of a block weighted by w.scores.
func (w *worker) blockValues(st *state, v []byte, n int) {
	lay, d := w.p.Format.V, w.p.Format.D
	if !lay.Elem.IsInt() {
		for t := 0; t < n; t++ {
			decodeFloatRow(w.row, lay, v, t)
			w.axpyRows(st, t, n)
		}
		return
	}
	g := lay.Group
	for t := 0; t < n; t++ {
		decodeCodes(w.row, lay, v, t)
		for c0 := 0; c0 < d; c0 += g {
			s, z := lay.Param(v, lay.ParamIndex(t, c0))
			sf, zf := half.ToFloat32(s), half.ToFloat32(z)
			for r := 0; r < w.r; r++ {
				p := w.scores[r*n+t]
				if p == 0 {
					continue
				}
				axpy(st.acc[r*d+c0:r*d+c0+g], p*sf, w.row[c0:c0+g])
				st.zacc[r*st.vgroups+c0/g] += p * zf
			}
		}
	}
}

// halfValues accumulates n fp16 residual values weighted by w.scores.
func (w *worker) halfValues(st *state, v []uint16, n int) {
	d := w.p.Format.D
	for t := 0; t < n; t++ {
		for c := range w.row {
			w.row[c] = half.ToFloat32(v[t*d+c])
		}
		w.axpyRows(st, t, n)
	}
}

// axpyRows adds w.row times each row's probability of token t to acc.
func (w *worker) axpyRows(st *state, t, n int) {
	d := st.d
	for r := 0; r < w.r; r++ {
		if p := w.scores[r*n+t]; p != 0 {
			axpy(st.acc[r*d:(r+1)*d], p, w.row)
		}
	}
}

// decodeCodes writes the integer codes of token t of a packed half as float32.
func decodeCodes(dst []float32, lay kv.TensorLayout, src []byte, t int) {
	row := src[t*lay.RowBytes : (t+1)*lay.RowBytes]
	switch lay.Elem {
	case kv.Int4:
		for i, b := range row {
			e := &codeLUT[1][b]
			dst[2*i], dst[2*i+1] = e[0], e[1]
		}
	case kv.Int2:
		for i, b := range row {
			e := &codeLUT[0][b]
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = e[0], e[1], e[2], e[3]
		}
	case kv.Int8:
		for i, b := range row {
			dst[i] = codeLUT[2][b][0]
		}
	}
}

// decodeFloatRow converts token t of a float-typed packed half to float32.
func decodeFloatRow(dst []float32, lay kv.TensorLayout, src []byte, t int) {
	row := src[t*lay.RowBytes : (t+1)*lay.RowBytes]
	switch lay.Elem {
	case kv.FP16:
		for c := range dst {
			dst[c] = half.ToFloat32(binary.LittleEndian.Uint16(row[2*c:]))
		}
	case kv.BF16:
		for c := range dst {
			dst[c] = half.BF16ToFloat32(binary.LittleEndian.Uint16(row[2*c:]))
		}
	default:
		f8 := lay.FP8()
		for c := range dst {
			dst[c] = f8.ToFloat32(row[c])
		}
	}
}

// dot returns Σ a[i]·b[i] with four accumulators (a fixed order).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func sum(a []float32) float32 {
	var s float32
	for _, x := range a {
		s += x
	}
	return s
}

// axpy adds alpha·x to y.
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}

package attn

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// This file is decode attention over the bit-plane format (kv "bw"): every
// cached token of every KV head has a tier, and a read fetches only the
// planes that tier needs (kv.PlaneLayout.ReadRow), rebuilds the elements
// with the format's fill and filter, and attends over them. Evicted tokens
// are left out. Beside the output it returns, per KV head, each token's
// attention probability summed over the query heads of the group (and the
// Tq query tokens): the mass the engine's H2O policy ranks tokens by.

// PlaneSeq is one sequence's bw cache for one layer.
type PlaneSeq struct {
	// Blocks hold the tokens in order; block i holds tokens [i*Nr, (i+1)*Nr)
	// (the last one may be partly filled). Each is [Hkv][PlaneLayout.BlockBytes].
	Blocks [][]byte
	// Len is the number of cached tokens.
	Len int
	// Tiers is [Hkv][>= Len]: the tier of every cached token per KV head.
	Tiers [][]kv.Tier
}

// TierIndex returns the order in which a decode reads the tokens of one KV
// head: the positions of the High tokens ascending, then the Medium ones,
// then the Low ones; Evicted tokens are left out. counts[t] is the number
// of tokens of tier t (Evicted included). A GPU kernel reads the same index
// so that each warp's run of tokens needs the same planes.
func TierIndex(tiers []kv.Tier, index []int32) ([]int32, [kv.NumTiers]int) {
	var counts [kv.NumTiers]int
	for _, t := range tiers {
		if t < kv.NumTiers {
			counts[t]++
		}
	}
	index = index[:0]
	for tier := kv.High; tier < kv.Evicted; tier++ {
		for pos, t := range tiers {
			if t == tier {
				index = append(index, int32(pos))
			}
		}
	}
	return index, counts
}

// PlaneCache is a sequence's bw cache for one layer that owns its memory:
// Append splits new tokens into the planes of the current block (no
// residual block: every token is in the planes as soon as it is written)
// and marks them High.
type PlaneCache struct {
	PlaneSeq
	Format kv.Format
	Shape  Shape
	// NewBlock returns zeroed memory for one block of Hkv*BlockBytes bytes;
	// nil allocates with make.
	NewBlock func() ([]byte, error)
	row      []uint16
}

// NewPlaneCache returns an empty cache of bw format f for shape s.
func NewPlaneCache(f kv.Format, s Shape) (*PlaneCache, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !f.Planes.On {
		return nil, fmt.Errorf("attn: format %s is not a bit-plane (bw) format", f.Spec.String())
	}
	if f.D != s.D {
		return nil, fmt.Errorf("attn: format resolved for head dim %d, shape has %d", f.D, s.D)
	}
	c := &PlaneCache{Format: f, Shape: s, row: make([]uint16, s.D)}
	c.Tiers = make([][]kv.Tier, s.Hkv)
	return c, nil
}

// Append adds T new tokens, k and v laid out [T][Hkv][D] float32, rounded
// to the format's element type (fp16 or bf16, nearest even) and split into
// the planes. New tokens are High.
func (c *PlaneCache) Append(k, v []float32) error {
	hkv, d := c.Shape.Hkv, c.Shape.D
	if len(k) != len(v) || len(k)%(hkv*d) != 0 {
		return fmt.Errorf("attn: Append: k has %d and v %d values; want equal multiples of Hkv*D=%d", len(k), len(v), hkv*d)
	}
	lay := c.Format.PlaneLayout()
	nr := lay.Tokens
	for t := 0; t < len(k)/(hkv*d); t++ {
		if c.Len == len(c.Blocks)*nr {
			var blk []byte
			if c.NewBlock != nil {
				var err error
				if blk, err = c.NewBlock(); err != nil {
					return fmt.Errorf("attn: allocating a KV block: %w", err)
				}
			} else {
				blk = make([]byte, hkv*lay.BlockBytes)
			}
			c.Blocks = append(c.Blocks, blk)
		}
		blk := c.Blocks[c.Len/nr]
		for h := 0; h < hkv; h++ {
			base := blk[h*lay.BlockBytes : (h+1)*lay.BlockBytes]
			src := (t*hkv + h) * d
			c.round(k[src:src+d], c.row)
			lay.Split(base, 0, c.Len%nr, c.row)
			c.round(v[src:src+d], c.row)
			lay.Split(base, 1, c.Len%nr, c.row)
			c.Tiers[h] = append(c.Tiers[h], kv.High)
		}
		c.Len++
	}
	return nil
}

func (c *PlaneCache) round(src []float32, dst []uint16) {
	for i, x := range src {
		if c.Format.K.Elem == kv.BF16 {
			dst[i] = half.BF16FromFloat32(x)
		} else {
			dst[i] = half.FromFloat32(x)
		}
	}
}

// fp16LUT maps every fp16 bit pattern to its float32 value.
var (
	fp16LUT     []float32
	fp16LUTOnce sync.Once
)

func toFloatRow(dst []float32, src []uint16, e kv.Elem) {
	if e == kv.BF16 {
		for i, h := range src {
			dst[i] = half.BF16ToFloat32(h)
		}
		return
	}
	fp16LUTOnce.Do(func() {
		fp16LUT = make([]float32, 1<<16)
		for h := range fp16LUT {
			fp16LUT[h] = half.ToFloat32(uint16(h))
		}
	})
	for i, h := range src {
		dst[i] = fp16LUT[h]
	}
}

// checkPlanes validates a bw decode call. mass, when not nil, holds one
// [Hkv][>= L] slice per sequence.
func (p Params) checkPlanes(out, q []float32, seqs []*PlaneSeq, mass [][][]float32) error {
	if err := p.Shape.Validate(); err != nil {
		return err
	}
	if !p.Format.Planes.On {
		return fmt.Errorf("attn: format %s is not a bit-plane (bw) format", p.Format.Spec.String())
	}
	if p.Format.D != p.Shape.D {
		return fmt.Errorf("attn: format resolved for head dim %d, shape has %d", p.Format.D, p.Shape.D)
	}
	if p.Tq < 1 {
		return fmt.Errorf("attn: Tq=%d, want >= 1", p.Tq)
	}
	if p.Window != 0 {
		return fmt.Errorf("attn: the bit-plane decode has no sliding window (window %d)", p.Window)
	}
	if p.Softcap != 0 {
		return fmt.Errorf("attn: the bit-plane decode has no attention logit soft-capping (cap %g)", p.Softcap)
	}
	n := len(seqs) * p.Tq * p.Shape.Hq * p.Shape.D
	if len(q) != n || len(out) != n {
		return fmt.Errorf("attn: q has %d and out %d values; want B*Tq*Hq*D = %d", len(q), len(out), n)
	}
	if mass != nil && len(mass) != len(seqs) {
		return fmt.Errorf("attn: mass for %d sequences, want %d", len(mass), len(seqs))
	}
	lay := p.Format.PlaneLayout()
	for b, s := range seqs {
		if s.Len < p.Tq {
			return fmt.Errorf("attn: sequence %d holds %d tokens, fewer than Tq=%d", b, s.Len, p.Tq)
		}
		if len(s.Blocks)*lay.Tokens < s.Len {
			return fmt.Errorf("attn: sequence %d: %d tokens in %d blocks of %d", b, s.Len, len(s.Blocks), lay.Tokens)
		}
		for i, blk := range s.Blocks {
			if len(blk) < p.Shape.Hkv*lay.BlockBytes {
				return fmt.Errorf("attn: sequence %d block %d has %d bytes, want %d", b, i, len(blk), p.Shape.Hkv*lay.BlockBytes)
			}
		}
		if len(s.Tiers) != p.Shape.Hkv {
			return fmt.Errorf("attn: sequence %d has tier maps for %d KV heads, want %d", b, len(s.Tiers), p.Shape.Hkv)
		}
		for h, tm := range s.Tiers {
			if len(tm) < s.Len {
				return fmt.Errorf("attn: sequence %d KV head %d: tier map of %d tokens, want %d", b, h, len(tm), s.Len)
			}
			for _, t := range tm[:s.Len] {
				if t >= kv.NumTiers {
					return fmt.Errorf("attn: sequence %d KV head %d: tier %d out of range", b, h, t)
				}
			}
		}
		if mass != nil {
			if len(mass[b]) != p.Shape.Hkv {
				return fmt.Errorf("attn: sequence %d: mass for %d KV heads, want %d", b, len(mass[b]), p.Shape.Hkv)
			}
			for h, m := range mass[b] {
				if len(m) < s.Len {
					return fmt.Errorf("attn: sequence %d KV head %d: mass of %d tokens, want %d", b, h, len(m), s.Len)
				}
			}
		}
	}
	return nil
}

// ErrAllEvicted is returned when a query row would attend to no token: every
// token it may see is Evicted.
var ErrAllEvicted = errors.New("attn: every token a query may see is evicted")

// PlaneAccumBlock is the number of tokens whose weighted values are summed
// apart before they are added to the row's total (keeps float32 rounding
// near (PlaneAccumBlock + L/PlaneAccumBlock)·eps instead of L·eps).
const PlaneAccumBlock = 64

// DecodePlanes computes decode attention over bw caches, writing out
// [B][Tq][Hq][D] from q [B][Tq][Hq][D], reading each token at its tier. If
// mass is not nil, mass[b][h][t] is increased by token t's attention
// probability summed over the query rows (group heads and query tokens) of
// KV head h. It runs in parallel over (sequence, KV head); the result does
// not depend on the number of threads.
func DecodePlanes(out, q []float32, seqs []*PlaneSeq, p Params, mass [][][]float32) error {
	if err := p.checkPlanes(out, q, seqs, mass); err != nil {
		return err
	}
	type task struct{ b, h int }
	var tasks []task
	for b := range seqs {
		for h := 0; h < p.Shape.Hkv; h++ {
			tasks = append(tasks, task{b, h})
		}
	}
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	kern := activeKernels()
	for range min(runtime.GOMAXPROCS(0), len(tasks)) {
		wg.Go(func() {
			w := newPlaneWorker(p, kern)
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(tasks) {
					return
				}
				tk := tasks[i]
				var m []float32
				if mass != nil {
					m = mass[tk.b][tk.h]
				}
				errs[i] = w.run(out, q, tk.b, tk.h, seqs[tk.b], m)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("sequence %d KV head %d: %w", tasks[i].b, tasks[i].h, err)
		}
	}
	return nil
}

// planeWorker holds one goroutine's scratch buffers.
type planeWorker struct {
	p      Params
	k      *kernels
	lay    kv.PlaneLayout
	rec    kv.Recon
	r      int       // query rows per KV head: Group*Tq
	q      []float32 // [R][D] scaled queries
	bits   []uint16  // [D] one rebuilt row
	row    []float32 // [D]
	index  []int32
	scores []float32 // [R][n rounded up to 16]
	acc    []float32 // [R][D]
	part   []float32 // [R][D] partial sums of PlaneAccumBlock tokens
	// med[b] and low[n] are the float32 values of a Medium read whose top
	// byte (planes 0 and 1) is b and of a Low read whose top nibble is n:
	// a partial read is a function of the bits it fetches, so a table of
	// kv.Recon.Read replaces the per-element fill and filter.
	med [256]float32
	low [16]float32
}

func newPlaneWorker(p Params, k *kernels) *planeWorker {
	d := p.Shape.D
	r := p.Shape.Group() * p.Tq
	w := &planeWorker{p: p, k: k, lay: p.Format.PlaneLayout(), rec: p.Format.Planes.Recon(p.Format.K.Elem), r: r,
		q: make([]float32, r*d), bits: make([]uint16, d), row: make([]float32, d),
		acc: make([]float32, r*d), part: make([]float32, r*d)}
	one := []uint16{0}
	val := make([]float32, 1)
	for b := range 256 {
		one[0] = w.rec.Read(uint16(b)<<8, kv.Medium)
		toFloatRow(val, one, p.Format.K.Elem)
		w.med[b] = val[0]
	}
	for n := range 16 {
		one[0] = w.rec.Read(uint16(n)<<12, kv.Low)
		toFloatRow(val, one, p.Format.K.Elem)
		w.low[n] = val[0]
	}
	return w
}

// readRow rebuilds token t (K: half 0, V: half 1) of KV head h at its tier
// into w.row, reading only the planes the tier needs.
func (w *planeWorker) readRow(s *PlaneSeq, h, half, t int, tier kv.Tier) {
	nr, d := w.lay.Tokens, w.lay.D
	blk := s.Blocks[t/nr][h*w.lay.BlockBytes : (h+1)*w.lay.BlockBytes]
	a, _ := w.lay.Slice(half, kv.PlaneTop, t%nr)
	top := blk[a : a+d/2]
	row := w.row[:d]
	switch tier {
	case kv.Medium:
		b, _ := w.lay.Slice(half, kv.PlaneMid, t%nr)
		mid := blk[b : b+d/2]
		for i := range top {
			tb, mb := top[i], mid[i]
			row[2*i] = w.med[tb<<4|mb&0xF]
			row[2*i+1] = w.med[tb&0xF0|mb>>4]
		}
	case kv.Low:
		for i, tb := range top {
			row[2*i] = w.low[tb&0xF]
			row[2*i+1] = w.low[tb>>4]
		}
	default:
		w.lay.ReadRow(w.bits, blk, half, t%nr, tier, w.rec)
		toFloatRow(w.row, w.bits, w.p.Format.K.Elem)
	}
}

func (w *planeWorker) run(out, q []float32, b, h int, s *PlaneSeq, mass []float32) error {
	sh, d, tq := w.p.Shape, w.p.Shape.D, w.p.Tq
	g := sh.Group()
	scale := w.p.scale()
	for row := 0; row < w.r; row++ {
		i, j := row/g, row%g
		off := ((b*tq+i)*sh.Hq + h*g + j) * d
		for c := 0; c < d; c++ {
			w.q[row*d+c] = q[off+c] * scale
		}
	}
	tiers := s.Tiers[h][:s.Len]
	w.index, _ = TierIndex(tiers, w.index)
	n := len(w.index)
	ns := (n + TileTokens - 1) / TileTokens * TileTokens // row stride: whole vectors for the exp kernel
	if cap(w.scores) < w.r*ns {
		w.scores = make([]float32, w.r*ns)
	}
	sc := w.scores[:w.r*ns]
	// Pass 1: scores from the K planes each token's tier needs.
	for j, t := range w.index {
		w.readRow(s, h, 0, int(t), tiers[t])
		for row := 0; row < w.r; row++ {
			if int(t) > s.Len-tq+row/g {
				sc[row*ns+j] = float32(math.Inf(-1))
				continue
			}
			sc[row*ns+j] = dot(w.q[row*d:(row+1)*d], w.row)
		}
	}
	// Softmax per row: exp(s - max) / Σ, by the vector kernels.
	inv := make([]float32, w.r)
	for row := 0; row < w.r; row++ {
		rs := sc[row*ns : (row+1)*ns]
		for j := n; j < ns; j++ {
			rs[j] = float32(math.Inf(-1))
		}
		if n == 0 {
			return ErrAllEvicted
		}
		m := w.k.maxF32(rs)
		if math.IsInf(float64(m), -1) {
			return ErrAllEvicted
		}
		inv[row] = 1 / w.k.expSub(rs, m)
	}
	// Each row's weight in the mass: 1/Σ, or 0 where its query token's
	// mass is not sampled (kv.MassSampled).
	minv := inv
	if mass != nil && w.p.MassEvery > 1 {
		minv = make([]float32, w.r)
		for row := 0; row < w.r; row++ {
			if kv.MassSampled(s.Len-tq+row/g, w.p.MassEvery) {
				minv[row] = inv[row]
			}
		}
	}
	// Pass 2: values from the V planes, in blocks of PlaneAccumBlock tokens.
	clear(w.acc)
	clear(w.part)
	for j, t := range w.index {
		w.readRow(s, h, 1, int(t), tiers[t])
		var pm float32
		for row := 0; row < w.r; row++ {
			if pr := sc[row*ns+j]; pr != 0 {
				axpy(w.part[row*d:(row+1)*d], pr, w.row)
				pm += pr * minv[row]
			}
		}
		if mass != nil {
			mass[t] += pm
		}
		if (j+1)%PlaneAccumBlock == 0 || j == n-1 {
			for i, x := range w.part {
				w.acc[i] += x
			}
			clear(w.part)
		}
	}
	for row := 0; row < w.r; row++ {
		i, j := row/g, row%g
		off := ((b*tq+i)*sh.Hq + h*g + j) * d
		for c := 0; c < d; c++ {
			out[off+c] = w.acc[row*d+c] * inv[row]
		}
	}
	return nil
}

// PlaneRefStats are by-products of ReferencePlanes that tests turn into
// tolerances.
type PlaneRefStats struct {
	// MaxAbsV is the largest |V| read; MaxL the longest sequence.
	MaxAbsV float64
	MaxL    int
	// ScoreMag holds, per output row in out's order, the largest over the
	// tokens read of Σ_c |q_c|·|k_c|.
	ScoreMag []float64
	// Mass is the reference attention mass, [B][Hkv][L].
	Mass [][][]float64
}

// ReferencePlanes computes what DecodePlanes computes in float64, on the
// values the scalar definition kv.Recon.Read gives for each stored element
// at its token's tier (the stored bits are read back whole and then cut,
// independently of the plane reader). It is slow and simple on purpose.
func ReferencePlanes(out, q []float32, seqs []*PlaneSeq, p Params) (PlaneRefStats, error) {
	var st PlaneRefStats
	if err := p.checkPlanes(out, q, seqs, nil); err != nil {
		return st, err
	}
	sh, d, g := p.Shape, p.Shape.D, p.Shape.Group()
	lay := p.Format.PlaneLayout()
	rec := p.Format.Planes.Recon(p.Format.K.Elem)
	toF := func(h uint16) float64 {
		if p.Format.K.Elem == kv.BF16 {
			return float64(half.BF16ToFloat32(h))
		}
		return float64(half.ToFloat32(h))
	}
	scale := float64(p.scale())
	st.ScoreMag = make([]float64, len(out)/d)
	st.Mass = make([][][]float64, len(seqs))
	bits := make([]uint16, d)
	for b, s := range seqs {
		st.MaxL = max(st.MaxL, s.Len)
		st.Mass[b] = make([][]float64, sh.Hkv)
		for h := 0; h < sh.Hkv; h++ {
			st.Mass[b][h] = make([]float64, s.Len)
			keys, vals := make([]float64, s.Len*d), make([]float64, s.Len*d)
			for t := 0; t < s.Len; t++ {
				blk := s.Blocks[t/lay.Tokens][h*lay.BlockBytes:]
				tier := s.Tiers[h][t]
				for half, dst := range [][]float64{keys, vals} {
					lay.ReadRow(bits, blk, half, t%lay.Tokens, kv.High, rec) // the stored bits, whole
					for c, x := range bits {
						dst[t*d+c] = toF(rec.Read(x, tier))
						if half == 1 && tier != kv.Evicted {
							st.MaxAbsV = max(st.MaxAbsV, math.Abs(dst[t*d+c]))
						}
					}
				}
			}
			for i := 0; i < p.Tq; i++ {
				limit := s.Len - p.Tq + i
				for j := 0; j < g; j++ {
					off := ((b*p.Tq+i)*sh.Hq + h*g + j) * d
					scores := make([]float64, limit+1)
					m := math.Inf(-1)
					for t := range scores {
						if s.Tiers[h][t] == kv.Evicted {
							scores[t] = math.Inf(-1)
							continue
						}
						var sum, mag float64
						for c := 0; c < d; c++ {
							sum += float64(q[off+c]) * keys[t*d+c]
							mag += math.Abs(float64(q[off+c]) * keys[t*d+c])
						}
						scores[t] = sum * scale
						m = max(m, scores[t])
						st.ScoreMag[off/d] = max(st.ScoreMag[off/d], mag)
					}
					if math.IsInf(m, -1) {
						return st, ErrAllEvicted
					}
					var den float64
					o := make([]float64, d)
					for t, x := range scores {
						e := math.Exp(x - m)
						scores[t] = e
						den += e
						for c := 0; c < d; c++ {
							o[c] += e * vals[t*d+c]
						}
					}
					for t, e := range scores {
						if kv.MassSampled(limit, p.MassEvery) {
							st.Mass[b][h][t] += e / den
						}
					}
					for c := range o {
						out[off+c] = float32(o[c] / den)
					}
				}
			}
		}
	}
	return st, nil
}

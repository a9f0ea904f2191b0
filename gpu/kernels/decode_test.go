package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
)

var (
	devOnce sync.Once
	dev     *cuda.Device
	devErr  error
)

// device opens GPU 0 once, or skips the test with the reason.
func device(t *testing.T) *cuda.Device {
	t.Helper()
	devOnce.Do(func() { dev, devErr = cuda.Open(0) })
	if devErr != nil {
		t.Skipf("no CUDA device: %v", devErr)
	}
	return dev
}

// gpuCase is one decode call: caches built on the CPU with package attn,
// uploaded to a pool in shuffled block order (paged), run on the GPU and
// checked against attn.Reference.
type gpuCase struct {
	kernel kernels.DecodeKernel
	spec   string
	sh     attn.Shape
	lens   []int
	tq     int
	// tune, when set, replaces the environment's decode tuning, and
	// splitLen fixes the split length (0: the planner's).
	tune     *kernels.DecodeTuning
	splitLen int
	// splitCap and splitMax, with splitLen, split each sequence by its own
	// length (DecodeShape.SplitCap; 0: a fixed split).
	splitCap, splitMax int
	// window is the sliding window (0: none), given to the kernels in the
	// plan's shape over the whole block table (no view: whole splits before
	// a window are masked too).
	window int
	// softcap is the attention soft-cap (DecodeShape.Softcap, attn's
	// Params.Softcap; 0: none). With a cap, runCase also computes the
	// reference without it and stores in moved (where not nil) the largest
	// over rows of how many of the row's tolerances the cap moves it.
	softcap float32
	moved   *float64
	// prefill runs prefill.cu (kernels.PlanPrefill) instead of the decode
	// kernel (kernel is then only the blocks' order: DecodeMMA's); with
	// dequant, by its dequantizing route (PrefillPlan.LaunchDequant: one
	// sequence, a low-bit layout).
	prefill, dequant bool
}

// caseLauncher is what runCase needs of a plan: a DecodePlan or a
// PrefillPlan.
type caseLauncher interface {
	Launch(c *cuda.Ctx, st cuda.Stream, b kernels.DecodeBuffers, scale float32) error
	Out32() bool
	Close() error
}

// dequantLauncher runs a PrefillPlan's launches by its dequantizing route
// over sc (PrefillPlan.LaunchDequant) at shape.
type dequantLauncher struct {
	*kernels.PrefillPlan
	shape kernels.DecodeShape
	sc    kernels.PrefillScratch
}

func (l dequantLauncher) Launch(c *cuda.Ctx, st cuda.Stream, b kernels.DecodeBuffers, scale float32) error {
	return l.LaunchDequant(c, st, b, l.shape, scale, l.sc)
}

func (c gpuCase) String() string {
	k := c.kernel.String()
	if c.prefill {
		k = "prefill"
	}
	if c.dequant {
		k = "prefill via fp16"
	}
	s := fmt.Sprintf("%v %s Hq=%d Hkv=%d D=%d lens=%v Tq=%d window=%d", k, c.spec, c.sh.Hq, c.sh.Hkv, c.sh.D, c.lens, c.tq, c.window)
	if c.softcap != 0 {
		s += fmt.Sprintf(" softcap=%g", c.softcap)
	}
	if c.tune != nil && c.tune.PrefillMT != 0 {
		s += fmt.Sprintf(" MT=%d", c.tune.PrefillMT)
	}
	return s
}

// runCase runs c and returns the first run's output (the later runs must
// equal it bit for bit).
func runCase(t *testing.T, r *rand.Rand, c gpuCase) []uint16 {
	d := device(t)
	f, err := kv.MustParseSpec(c.spec).Resolve(c.sh.D)
	if err != nil {
		t.Fatal(err)
	}
	f = f.WithOrder(c.kernel.Order())
	lay, err := kernels.LayoutFor(f)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []*attn.Seq
	maxL, maxBlocks, nBlocks := 0, 1, 0
	for _, l := range c.lens {
		cache, err := attn.NewCache(f, c.sh)
		if err != nil {
			t.Fatal(err)
		}
		k, v := kvtest.KeysValues(r, l, c.sh.Hkv, c.sh.D)
		if err := cache.Append(k, v); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, &cache.Seq)
		maxL = max(maxL, l)
		maxBlocks = max(maxBlocks, len(cache.Blocks))
		nBlocks += len(cache.Blocks)
	}
	// Paged pool: blocks in a shuffled order, plus one unused poisoned block.
	blockBytes := c.sh.Hkv * f.BlockBytes()
	pool := make([]byte, (nBlocks+1)*blockBytes)
	for i := range pool {
		pool[i] = 0xff // NaN fp16 everywhere nothing is written
	}
	perm := r.Perm(nBlocks + 1)
	table := make([]int32, len(seqs)*maxBlocks)
	resK := make([]uint16, len(seqs)*c.sh.Hkv*f.Residual*c.sh.D)
	resV := make([]uint16, len(resK))
	lens := make([]int32, len(seqs))
	next := 0
	for b, s := range seqs {
		for i, blk := range s.Blocks {
			slot := perm[next]
			next++
			copy(pool[slot*blockBytes:], blk)
			table[b*maxBlocks+i] = int32(slot)
		}
		n := c.sh.Hkv * f.Residual * c.sh.D
		copy(resK[b*n:], kernels.ResidualOrder(c.kernel, f, s.ResK[:n], false))
		copy(resV[b*n:], kernels.ResidualOrder(c.kernel, f, s.ResV[:n], true))
		lens[b] = int32(s.Len(f.Residual))
	}
	nq := len(seqs) * c.tq * c.sh.Hq * c.sh.D
	q := make([]float32, nq)
	qh := make([]uint16, nq)
	for i := range q {
		qh[i] = half.FromFloat32(float32(r.NormFloat64()))
		q[i] = half.ToFloat32(qh[i]) // the reference sees the fp16 query the GPU sees
	}
	want := make([]float32, nq)
	st, err := attn.Reference(want, q, seqs, attn.Params{Format: f, Shape: c.sh, Tq: c.tq, Window: c.window, Softcap: c.softcap})
	if err != nil {
		t.Fatal(err)
	}
	if c.softcap != 0 && c.moved != nil {
		*c.moved = max(*c.moved, softcapMoved(t, c, f, st, q, seqs, want))
	}

	tune := tuning.Decode
	if c.tune != nil {
		tune = *c.tune
	}
	shape := kernels.DecodeShape{B: len(seqs), Hq: c.sh.Hq, Hkv: c.sh.Hkv, Tq: c.tq, MaxBlocks: maxBlocks, MaxL: maxL, SplitLen: c.splitLen,
		SplitCap: c.splitCap, SplitMax: c.splitMax, Window: c.window, Softcap: c.softcap}
	var plan caseLauncher
	var dplan *kernels.DecodePlan
	if c.prefill {
		plan, err = kernels.PlanPrefill(d, lay, shape, tune)
	} else {
		dplan, err = kernels.PlanDecodeWith(d, c.kernel, lay, shape, tune)
		plan = dplan
	}
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	var bufs kernels.DecodeBuffers
	var allocs []cuda.DevicePtr
	up := func(dst *cuda.DevicePtr, src []byte) {
		p, err := d.Alloc(max(len(src), 16))
		if err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, p)
		if err := d.HtoD(p, src); err != nil {
			t.Fatal(err)
		}
		*dst = p
	}
	defer func() {
		for _, p := range allocs {
			d.Free(p)
		}
	}()
	up(&bufs.Pool, pool)
	up(&bufs.BlockTable, cuda.Bytes(table))
	if c.dequant {
		pp := plan.(*kernels.PrefillPlan)
		if !pp.Dequantizes() || len(seqs) != 1 {
			t.Fatalf("%v: no dequantizing route for %d sequences", c, len(seqs))
		}
		var sc kernels.PrefillScratch
		scratch := make([]byte, pp.ScratchBytes(maxBlocks, c.sh.Hkv))
		for i := range scratch {
			scratch[i] = 0xff // NaN fp16 wherever dequant_blocks writes nothing
		}
		up(&sc.Pool, scratch)
		ident := make([]int32, maxBlocks)
		for i := range ident {
			ident[i] = int32(i)
		}
		up(&sc.Table, cuda.Bytes(ident))
		plan = dequantLauncher{pp, shape, sc}
	}
	up(&bufs.ResK, cuda.Bytes(resK))
	up(&bufs.ResV, cuda.Bytes(resV))
	up(&bufs.Lens, cuda.Bytes(lens))
	up(&bufs.Q, cuda.Bytes(qh))
	poison := make([]uint16, nq)
	for i := range poison {
		poison[i] = 0x7e00 // fp16 NaN
	}
	up(&bufs.Out, cuda.Bytes(poison))
	// The later runs also ask for the float32 output (DecodeBuffers.Out32):
	// the fp16 output's exact widening, and the fp16 output unchanged.
	var out32 cuda.DevicePtr
	poison32 := make([]float32, nq)
	for i := range poison32 {
		poison32[i] = float32(math.NaN())
	}
	up(&out32, cuda.Bytes(poison32))

	var q8, pv8 []float64
	if dplan != nil && dplan.QK8() {
		q8 = q8ScoreTerm(f, c.sh, seqs, q, c.tq)
	}
	if dplan != nil && dplan.PV8() {
		pv8 = pv8ValueTerm(f, c.sh, seqs, c.tq)
	}
	var first []uint16
	for run := 0; run < 3; run++ {
		if err := d.HtoD(bufs.Out, cuda.Bytes(poison)); err != nil {
			t.Fatal(err)
		}
		b := bufs
		if run > 0 && plan.Out32() {
			if err := d.HtoD(out32, cuda.Bytes(poison32)); err != nil {
				t.Fatal(err)
			}
			b.Out32 = out32
		}
		err := d.Do(func(cx *cuda.Ctx) error {
			if err := plan.Launch(cx, d.Stream(), b, 0); err != nil {
				return err
			}
			return cx.SyncStream(d.Stream())
		})
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		got := make([]uint16, nq)
		if err := d.DtoH(cuda.Bytes(got), bufs.Out); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = got
			checkOut(t, c, f, st, got, want, q8, pv8)
			continue
		}
		for i := range got {
			if got[i] != first[i] {
				t.Fatalf("%v: run %d element %d: %#04x, first run %#04x: not deterministic", c, run, i, got[i], first[i])
			}
		}
		if b.Out32 != 0 {
			got32 := make([]float32, nq)
			if err := d.DtoH(cuda.Bytes(got32), out32); err != nil {
				t.Fatal(err)
			}
			for i, v := range got32 {
				if w := half.ToFloat32(got[i]); math.Float32bits(v) != math.Float32bits(w) && !(v != v && w != w) {
					t.Fatalf("%v: run %d float32 output element %d is %g, the fp16 output %#04x widens to %g", c, run, i, v, got[i], w)
				}
			}
		}
	}
	return first
}

// checkOut compares every output element with the reference within
// kvtest.DecodeTol, plus the fp16 rounding of the output (half an ulp:
// 2^-11 relative). With q8 (the int8 K·q path's score terms, q8ScoreTerm),
// the bound's query term is the larger of the fp16 path's (which the
// residual tokens still take) and the int8 path's: DecodeTol's score terms
// count 2.5 times, as there. With pv8 (the int8 P·V path's value terms,
// pv8ValueTerm), the weights' share of DecodeTol's value term (eps16 of
// MaxAbsV; the residual tokens still take the fp16 weights) becomes the
// larger of the two.
func checkOut(t *testing.T, c gpuCase, f kv.Format, st attn.RefStats, got []uint16, want []float32, q8, pv8 []float64) {
	t.Helper()
	d := c.sh.D
	ratio, vratio := 0.0, 0.0
	for row := 0; row < len(got)/d; row++ {
		tol := kvtest.DecodeTol(f, st, d, row, c.kernel != kernels.DecodeV1) + softcapTol(c.softcap, st)
		if q8 != nil {
			fp16Term := epsFP16 / math.Sqrt(float64(d)) * st.ScoreMag[row]
			tol += st.MaxAbsV * 2.5 * max(0, q8[row]-fp16Term)
			if fp16Term > 0 {
				ratio = max(ratio, q8[row]/fp16Term)
			}
		}
		if pv8 != nil {
			fp16Term := epsFP16 * st.MaxAbsV
			tol += max(0, pv8[row]-fp16Term)
			if fp16Term > 0 {
				vratio = max(vratio, pv8[row]/fp16Term)
			}
		}
		for ch := 0; ch < d; ch++ {
			g := float64(half.ToFloat32(got[row*d+ch]))
			w := float64(want[row*d+ch])
			if g != g || math.Abs(g-w) > tol+math.Abs(w)/2048 {
				t.Fatalf("%v: row %d channel %d: got %g, want %g (tol %.3g)", c, row, ch, g, w, tol+math.Abs(w)/2048)
			}
		}
	}
	if q8 != nil {
		t.Logf("%v: int8 K·q: score term / fp16 query term <= %.3g over the rows", c, ratio)
	}
	if pv8 != nil {
		t.Logf("%v: int8 P·V: value term / fp16 weight term <= %.3g over the rows", c, vratio)
	}
}

// pv8Bits is decode_mma.cu's kPV8Exp: the fixed-point weights n <= 2^20,
// within Δ/2 <= 2^-20 W of p·s (W the row's largest weight in the tile).
const pv8Bits = 20

// pv8TileTokens is the most tokens of a decode_mma.cu tile (MT <= 8 groups
// of 16), over which one Δ per row holds.
const pv8TileTokens = 128

// pv8ValueTerm returns, per output row (out's order), the bound of the
// output error the int8 P·V path (decode_mma.cu v2.9) adds, in output
// units: 2^-20 · 128 · maxcode · smax, smax the largest value scale of the
// row's visible packed tokens. (decode_mma.cu derives it: each weight within
// Δ/2 <= 2^-20 W_tile of p·s, W_tile <= pmax_tile · smax, and the tiles'
// pmax sum to at most the denominator.)
func pv8ValueTerm(f kv.Format, sh attn.Shape, seqs []*attn.Seq, tq int) []float64 {
	nr, group := f.Residual, sh.Hq/sh.Hkv
	maxCode := float64(int(1)<<f.V.Elem.Bits() - 1)
	out := make([]float64, len(seqs)*tq*sh.Hq)
	for b, s := range seqs {
		n := len(s.Blocks) * nr
		l := s.Len(nr)
		for h := 0; h < sh.Hkv; h++ {
			for i := 0; i < tq; i++ {
				smax := 0.0
				for t := 0; t < n && t <= l-tq+i; t++ {
					blk := s.Blocks[t/nr][h*f.BlockBytes()+f.K.Bytes:]
					sc, _ := f.V.Param(blk, f.V.ParamIndex(t%nr, 0))
					smax = max(smax, math.Abs(float64(half.ToFloat32(sc))))
				}
				for hq := h * group; hq < (h+1)*group; hq++ {
					out[(b*tq+i)*sh.Hq+hq] = math.Ldexp(pv8TileTokens*maxCode*smax, -pv8Bits)
				}
			}
		}
	}
	return out
}

// epsFP16 is the fp16 operands' relative rounding (DecodeTol's eps16).
const epsFP16 = 1.0 / (1 << 11)

// q8Max is decode_mma.cu's kQ8Max: the largest |n| of the fixed-point query.
const q8Max = 32767

// q8ScoreTerm returns, per output row (out's order), the bound of the score
// error the int8 K·q path (decode_mma.cu v2.8) adds, in DecodeTol's units
// (natural log, softmax scale applied): over the row's visible packed
// tokens t, the largest (1 + 2^-5)/2 · Σ_k s_k·Δ_k·Σ_{c in k} code_{t,c},
// with per-channel keys one group k of scale 1 and Δ = max_c |q_c·s_c|/q8Max
// of the token's key group, per-token keys the KT groups k of scale s_k and
// Δ = max_c |q_c|/q8Max. (decode_mma.cu derives it: each channel of the
// fixed-point query within Δ/2 (1 + 2^-5) of q_c·s_c.)
func q8ScoreTerm(f kv.Format, sh attn.Shape, seqs []*attn.Seq, q []float32, tq int) []float64 {
	d, nr, group := sh.D, f.Residual, sh.Hq/sh.Hkv
	kc := f.K.Scaling == kv.PerChannel
	kg := 1
	if !kc {
		kg = d / f.K.Group
	}
	scaleF := func(blk []byte, i int) float64 {
		s, _ := f.K.Param(blk, i)
		return float64(half.ToFloat32(s))
	}
	out := make([]float64, len(seqs)*tq*sh.Hq)
	for b, s := range seqs {
		n := len(s.Blocks) * nr
		l := s.Len(nr)
		for h := 0; h < sh.Hkv; h++ {
			// Σ code per packed token and KT group; each token's KT scales.
			codes := make([]float64, n*kg)
			scales := make([]float64, n*kg)
			for t := 0; t < n; t++ {
				blk := s.Blocks[t/nr][h*f.BlockBytes():]
				for c := 0; c < d; c++ {
					codes[t*kg+c*kg/d] += float64(f.K.Code(blk, t%nr, c))
				}
				for k := 0; k < kg && !kc; k++ {
					scales[t*kg+k] = scaleF(blk, f.K.ParamIndex(t%nr, k*f.K.Group))
				}
			}
			for i := 0; i < tq; i++ {
				for hq := h * group; hq < (h+1)*group; hq++ {
					row := (b*tq+i)*sh.Hq + hq
					qv := q[row*d : (row+1)*d]
					qmax := 0.0
					for _, x := range qv {
						qmax = max(qmax, math.Abs(float64(x)))
					}
					worst, delta := 0.0, 0.0
					for t := 0; t < n && t <= l-tq+i; t++ {
						if kc && t%f.K.Group == 0 { // a new key group: Δ of q·s
							blk := s.Blocks[t/nr][h*f.BlockBytes():]
							m := 0.0
							for c := 0; c < d; c++ {
								m = max(m, math.Abs(float64(qv[c])*scaleF(blk, f.K.ParamIndex(t%nr, c))))
							}
							delta = m / q8Max
						}
						e := 0.0
						for k := 0; k < kg; k++ {
							if kc {
								e += delta * codes[t*kg+k]
							} else {
								e += scales[t*kg+k] * qmax / q8Max * codes[t*kg+k]
							}
						}
						worst = max(worst, e)
					}
					out[row] = (1 + 1.0/32) / 2 * worst / math.Sqrt(float64(d))
				}
			}
		}
	}
	return out
}

func TestGPUDecodeMatchesReference(t *testing.T) {
	for _, k := range []kernels.DecodeKernel{kernels.DecodeMMA, kernels.DecodeV1, kernels.DecodeWGMMA} {
		t.Run(k.String(), func(t *testing.T) { testDecodeMatches(t, k) })
	}
}

// wgmmaReads reports whether the wgmma kernel reads spec at head dim d; if
// not, it checks that planning says so with an error rather than running.
func wgmmaReads(t *testing.T, spec string, d int) bool {
	t.Helper()
	lay, err := kernels.LayoutFor(kv.MustResolve(spec, d).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	if major, minor := device(t).ComputeCapability(); major != 9 || minor != 0 {
		t.Skipf("the wgmma kernel needs an sm_90 GPU (this one is %d.%d)", major, minor)
	}
	if err := kernels.WGMMASupports(device(t), lay); err != nil {
		if _, perr := kernels.PlanDecode(device(t), kernels.DecodeWGMMA, lay, kernels.DecodeShape{B: 1, Hq: 8, Hkv: 8, Tq: 1, MaxBlocks: 4, MaxL: 4 * lay.Nr}); perr == nil {
			t.Fatalf("%s D=%d: PlanDecode(wgmma) succeeded, but WGMMASupports says %v", spec, d, err)
		}
		return false
	}
	return true
}

func testDecodeMatches(t *testing.T, kern kernels.DecodeKernel) {
	device(t)
	r := rand.New(rand.NewPCG(21, 22))
	specs := []string{"fp16", "bf16", "int8", "int4", "int4:kt128", "int4:kt32:v32", "int2", "int2:kc32:v32", "k8v4", "k4v2", "int4:kc64:res64"}
	shapes := []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 4, Hkv: 4, D: 64}, {Hq: 8, Hkv: 1, D: 128}, {Hq: 6, Hkv: 2, D: 256},
		{Hq: 14, Hkv: 2, D: 128}, {Hq: 16, Hkv: 1, D: 64}, {Hq: 10, Hkv: 2, D: 128}}
	for i, spec := range specs {
		if kern == kernels.DecodeV1 && spec == "bf16" {
			continue // v1 reads fp16 blocks only
		}
		for j, sh := range shapes {
			if kern == kernels.DecodeWGMMA && !wgmmaReads(t, spec, sh.D) {
				continue
			}
			nr := kv.MustParseSpec(spec).Residual
			all := []int{5, nr - 1, nr, nr + 1, 3*nr + 7, 1000, 4099}
			lens := []int{all[(i+j)%len(all)], all[(i+j+3)%len(all)], all[(i+2*j+5)%len(all)]}
			for _, tq := range []int{1, 3} {
				runCase(t, r, gpuCase{kernel: kern, spec: spec, sh: sh, lens: lens, tq: tq})
			}
		}
	}
}

// TestGPUDecodeWindowMatchesReference checks the kernels' sliding-window
// mask (DecodeShape.Window) against attn.Reference under the same window,
// for every kernel and format: a window shorter than a 16-token group, one
// that is not a multiple of the block, one longer than the sequences, and
// one over whole splits (a 4099-token sequence), at Tq 1 and 5 (a prefill
// chunk whose rows start their windows at different tokens).
func TestGPUDecodeWindowMatchesReference(t *testing.T) {
	for _, k := range []kernels.DecodeKernel{kernels.DecodeMMA, kernels.DecodeV1, kernels.DecodeWGMMA} {
		t.Run(k.String(), func(t *testing.T) {
			device(t)
			r := rand.New(rand.NewPCG(31, 32))
			specs := []string{"fp16", "bf16", "int8", "int4", "int4:kt32:v32", "int2", "int2:kc32:v32", "k8v4", "k4v2", "int4:kc64:res64"}
			shapes := []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 4, Hkv: 4, D: 64}, {Hq: 6, Hkv: 2, D: 256}}
			for i, spec := range specs {
				if k == kernels.DecodeV1 && spec == "bf16" {
					continue // v1 reads fp16 blocks only
				}
				sh := shapes[i%len(shapes)]
				if k == kernels.DecodeWGMMA && !wgmmaReads(t, spec, sh.D) {
					continue
				}
				nr := kv.MustParseSpec(spec).Residual
				lens := []int{3*nr + 7, 1000, 4099}
				for _, w := range []int{9, nr + 37, 5000, 700} {
					for _, tq := range []int{1, 5} {
						runCase(t, r, gpuCase{kernel: k, spec: spec, sh: sh, lens: lens, tq: tq, window: w})
					}
				}
			}
		})
	}
}

func TestGPUDecodeLong(t *testing.T) {
	device(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, spec := range []string{"fp16", "int4", "int2"} {
		for _, k := range []kernels.DecodeKernel{kernels.DecodeMMA, kernels.DecodeV1, kernels.DecodeWGMMA} {
			runCase(t, r, gpuCase{kernel: k, spec: spec, sh: attn.Shape{Hq: 32, Hkv: 8, D: 128}, lens: []int{20000}, tq: 1})
		}
	}
}

// TestGPUDecodeRingMatchesPipeline checks decode_mma.cu's cp.async ring
// (v2.11) against v2.7's register pipeline at equal tiles and splits: only
// where the words come from differs, so the outputs must be equal bit for
// bit (each is also checked against the float64 reference by runCase).
func TestGPUDecodeRingMatchesPipeline(t *testing.T) {
	device(t)
	type ring struct{ stages, mt, minB int }
	cases := []struct {
		spec  string
		sh    attn.Shape
		rings []ring
	}{
		{"int2", attn.Shape{Hq: 32, Hkv: 8, D: 128}, []ring{{2, 0, 0}, {3, 4, 3}}},
		{"int2", attn.Shape{Hq: 16, Hkv: 1, D: 64}, []ring{{4, 0, 0}}},
		{"int2", attn.Shape{Hq: 6, Hkv: 2, D: 256}, []ring{{2, 0, 0}}},
		{"k4v2", attn.Shape{Hq: 14, Hkv: 2, D: 128}, []ring{{3, 4, 3}}},
		{"int2:kc32:v32", attn.Shape{Hq: 10, Hkv: 2, D: 128}, []ring{{3, 0, 3}}},
		{"int4:kt32:v32", attn.Shape{Hq: 8, Hkv: 1, D: 128}, []ring{{2, 0, 0}}},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for i, c := range cases {
		nr := kv.MustParseSpec(c.spec).Residual
		lens := []int{8*nr + 5, 4099, 1000}
		for _, rg := range c.rings {
			run := func(stages int) []uint16 {
				tune := kernels.DecodeTuning{MMA: kernels.MMATuning{Stages: stages, MT: rg.mt, MinB: rg.minB}}
				if stages == 0 {
					tune.MMA.MinB = 0 // the pipeline uncapped: registers change no bits
				}
				r := rand.New(rand.NewPCG(31, uint64(i)))
				return runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: c.spec, sh: c.sh, lens: lens, tq: 1, tune: &tune, splitLen: 4 * 128})
			}
			want, got := run(0), run(rg.stages)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s %+v ring %+v: element %d is %#04x, the register pipeline's %#04x", c.spec, c.sh, rg, j, got[j], want[j])
				}
			}
		}
	}
}

// TestGPUDecodeLookAheadMatchesRefold checks decode_mma.cu's look-ahead
// refold (v2.24: int2 keys refold the next tile's query under the current
// tile's P·V, the query floats parked in shared memory) against the refold
// at each tile's top (MMATuning.LA -1) on the same inputs: the same
// operations on the same values, moved, so the outputs must be equal bit for
// bit. Lengths with a residual, a block boundary inside a warp's run, one
// split and several (fused merge), Tq 1 and 3 (masked tiles), a sliding
// window; int2 at D 128 and 64 (key groups of 128 tokens, MT 8) and kc32
// (groups of 32 tokens, MT 2). Each run is also checked against the float64
// reference and for determinism by runCase.
func TestGPUDecodeLookAheadMatchesRefold(t *testing.T) {
	device(t)
	cases := []struct {
		spec   string
		sh     attn.Shape
		tq     int
		window int
	}{
		{"int2", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1, 0},
		{"int2", attn.Shape{Hq: 16, Hkv: 1, D: 64}, 3, 0},
		{"int2:kc32:v32", attn.Shape{Hq: 10, Hkv: 2, D: 128}, 1, 0},
		{"int2", attn.Shape{Hq: 14, Hkv: 2, D: 128}, 3, 700},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for i, c := range cases {
		nr := kv.MustParseSpec(c.spec).Residual
		for _, split := range []struct {
			lens     []int
			splitLen int
		}{
			{[]int{8*nr + 5, 4099, 1000}, 4 * 128},
			{[]int{4099, 37, 3*nr + 7}, 0},
			{[]int{20000}, 0},
		} {
			run := func(la int) []uint16 {
				tune := tuning.Decode
				tune.MMA.LA = la
				r := rand.New(rand.NewPCG(43, uint64(i)))
				return runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: c.spec, sh: c.sh, lens: split.lens, tq: c.tq, tune: &tune, splitLen: split.splitLen, window: c.window})
			}
			want, got := run(-1), run(1)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s %+v Tq %d lens %v split %d: element %d is %#04x with the look-ahead, %#04x without", c.spec, c.sh, c.tq, split.lens, split.splitLen, j, got[j], want[j])
				}
			}
		}
	}
}

// TestGPUDecodeOneSplitMatchesCombine checks decode_mma.cu's one-split
// epilogue (v2.15: finishOneSplit writes the output of a row chunk whose
// sequence has one split) against decode_combine's merge of the same
// split's partial (the plan without the fused merge), bit for bit: the
// merge of one split is the same arithmetic (decode_mma.cu derives it).
// Each batch mixes sequences of one split with one of several (finishSplits,
// whose bits decode_combine's must equal too), and a split length over the
// longest sequence makes every row chunk a one-split one. Both runs are also
// checked against the float64 reference and for determinism by runCase.
func TestGPUDecodeOneSplitMatchesCombine(t *testing.T) {
	device(t)
	cases := []struct {
		spec string
		sh   attn.Shape
		tq   int
	}{
		{"int2", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"k4v2", attn.Shape{Hq: 14, Hkv: 2, D: 128}, 3}, // 21 rows: three row chunks, the last of 5
		{"int4", attn.Shape{Hq: 6, Hkv: 2, D: 256}, 1},
		{"int4:kt128", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"int4:kc64:res64", attn.Shape{Hq: 16, Hkv: 1, D: 64}, 3},
		{"fp16", attn.Shape{Hq: 10, Hkv: 2, D: 128}, 1},
		{"int8", attn.Shape{Hq: 8, Hkv: 1, D: 128}, 3},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for i, c := range cases {
		for _, split := range []struct {
			lens     []int
			splitLen int
		}{
			{[]int{4099, 1000, 5, 1024}, 1024}, // 5 splits, then three sequences of one
			{[]int{1000, 4099, 37}, 4352},      // one split each (17 blocks of 256)
		} {
			run := func(noFuse bool) []uint16 {
				tune := tuning.Decode
				tune.NoFuse = noFuse
				r := rand.New(rand.NewPCG(41, uint64(i)))
				return runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: c.spec, sh: c.sh, lens: split.lens, tq: c.tq, tune: &tune, splitLen: split.splitLen})
			}
			want, got := run(true), run(false)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s %+v lens %v split %d: element %d is %#04x, decode_combine's %#04x", c.spec, c.sh, split.lens, split.splitLen, j, got[j], want[j])
				}
			}
		}
	}
}

// TestGPUDecodeSeqSplits runs per-sequence splits (DecodeShape.SplitCap,
// kvcache/gpukv's batch-invariant decode) on a batch whose sequences split
// at three lengths, most of them unlike the launch's guess (the longest
// sequence's split), one past SplitCap splits at SplitMax: against the
// float64 reference and for determinism (runCase), and each sequence's
// output against the same batch run with a fixed split of that sequence's
// own length, bit for bit (a fixed split is batch-invariant: so is a split
// that depends on the sequence's own length only). With the fused merge and
// without it (decode_combine's per-sequence splits), on decode_mma.cu,
// decode_wgmma.cu (Hopper) and v1. The int2 case with la forces the
// look-ahead refold (MMATuning.LA) at these short splits, so that the
// per-sequence look-ahead kernel (v2.34's leaner loop by default,
// mmaSeqLean) runs, with Tq 2 (a causal mask in each sequence's last tile:
// both of that loop's copies); BITDECODE_DECODE_SEQLEAN=1 gives every
// per-sequence kernel the leaner loop.
func TestGPUDecodeSeqSplits(t *testing.T) {
	d := device(t)
	const base, splitCap, most = 256, 4, 1024 // S(n): 256 to 1K tokens, 512 to 2K, then 1024
	lens := []int{5000, 300, 1500, 37, 2100, 1024}
	own := func(n int) int {
		s := base
		for s < most && n > splitCap*s {
			s *= 2
		}
		return s
	}
	cases := []struct {
		kernel kernels.DecodeKernel
		spec   string
		sh     attn.Shape
		tq     int
		la     bool
	}{
		{kernels.DecodeMMA, "int4", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1, false},
		{kernels.DecodeMMA, "k4v2", attn.Shape{Hq: 14, Hkv: 2, D: 128}, 3, false}, // 21 rows: three row chunks
		{kernels.DecodeMMA, "int2", attn.Shape{Hq: 8, Hkv: 2, D: 128}, 1, false},
		{kernels.DecodeMMA, "int2", attn.Shape{Hq: 8, Hkv: 2, D: 128}, 2, true},
		{kernels.DecodeWGMMA, "fp16", attn.Shape{Hq: 10, Hkv: 2, D: 128}, 1, false},
		{kernels.DecodeWGMMA, "int8", attn.Shape{Hq: 8, Hkv: 1, D: 128}, 3, false},
		{kernels.DecodeV1, "int4:kc64:res64", attn.Shape{Hq: 16, Hkv: 2, D: 64}, 1, false},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for i, c := range cases {
		if c.kernel == kernels.DecodeWGMMA {
			f := kv.MustResolve(c.spec, c.sh.D).WithOrder(kv.MMA)
			lay, err := kernels.LayoutFor(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := kernels.WGMMASupports(d, lay); err != nil {
				t.Logf("%s: %v", c.spec, err)
				continue
			}
		}
		run := func(splitLen, splitCap, splitMax int, noFuse bool) []uint16 {
			tune := tuning.Decode
			tune.NoFuse = noFuse
			if c.la {
				tune.MMA.LA = 1
			}
			r := rand.New(rand.NewPCG(43, uint64(i)))
			return runCase(t, r, gpuCase{kernel: c.kernel, spec: c.spec, sh: c.sh, lens: lens, tq: c.tq, tune: &tune,
				splitLen: splitLen, splitCap: splitCap, splitMax: splitMax})
		}
		fixed := map[int][]uint16{}
		for _, n := range lens {
			if s := own(n); fixed[s] == nil {
				fixed[s] = run(s, 0, 0, false)
			}
		}
		per := c.tq * c.sh.Hq * c.sh.D
		for _, noFuse := range []bool{false, true} {
			got := run(base, splitCap, most, noFuse)
			for b, n := range lens {
				want := fixed[own(n)]
				for j := b * per; j < (b+1)*per; j++ {
					if got[j] != want[j] {
						t.Fatalf("%v %s %+v la %t lens %v (no fuse %t): sequence %d (%d tokens, splits of %d) element %d is %#04x, %#04x with a fixed split of %d",
							c.kernel, c.spec, c.sh, c.la, lens, noFuse, b, n, own(n), j-b*per, got[j], want[j], own(n))
					}
				}
			}
		}
	}
}

// TestGPUDecodeOneSMTile runs int2 at one sequence of 1K-4K tokens, where
// the planner gives decode_mma.cu's one-CTA-an-SM plans 64-token tiles
// (session 29, mmaOneSMTile), and the same shapes with the 128-token tile
// forced (MMATuning.MT 8): both within the format's bound against the
// float64 reference and deterministic (runCase), with a residual, with Tq 3
// and two KV heads (three row chunks), and at 8K (not routed).
func TestGPUDecodeOneSMTile(t *testing.T) {
	device(t)
	cases := []struct {
		sh   attn.Shape
		lens []int
		tq   int
	}{
		{attn.Shape{Hq: 32, Hkv: 8, D: 128}, []int{1031}, 1},
		{attn.Shape{Hq: 32, Hkv: 8, D: 128}, []int{4000}, 1},
		{attn.Shape{Hq: 14, Hkv: 2, D: 128}, []int{2048}, 3},
		{attn.Shape{Hq: 32, Hkv: 8, D: 128}, []int{8192}, 1},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for i, c := range cases {
		for _, mt := range []int{0, 8} {
			tune := tuning.Decode
			tune.MMA.MT = mt
			r := rand.New(rand.NewPCG(53, uint64(i)))
			runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: "int2", sh: c.sh, lens: c.lens, tq: c.tq, tune: &tune})
		}
	}
}

// TestGPUDecodeScaledValuesULPs runs decode_mma.cu with v2.12's scaled
// values (unpackV, the default) and with v2.11's unpack (MMATuning.
// V211Unpack) on the same inputs and logs how far apart the outputs are, in
// fp16 ulps: session 12 found v2.12 not bitwise v2.11 (about one ulp in a
// few bench rows) and attributed it to the scaling, not measured alone.
// Both runs are checked against the float64 reference by runCase (so they
// differ by at most the sum of the two bounds); formats whose values are
// not int2 or int4 (fp16, int8) compile the same code either way and must
// be equal bit for bit.
func TestGPUDecodeScaledValuesULPs(t *testing.T) {
	device(t)
	cases := []struct {
		spec string
		sh   attn.Shape
		tq   int
	}{
		{"int2", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"k4v2", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"int4", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"int4:kt128", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1},
		{"k8v4", attn.Shape{Hq: 14, Hkv: 2, D: 128}, 3},
		{"int2", attn.Shape{Hq: 6, Hkv: 2, D: 256}, 3},
		{"int8", attn.Shape{Hq: 32, Hkv: 8, D: 128}, 1}, // control: no scaled values
	}
	if testing.Short() {
		cases = []struct {
			spec string
			sh   attn.Shape
			tq   int
		}{cases[0], cases[len(cases)-1]}
	}
	for i, c := range cases {
		run := func(v211 bool) []uint16 {
			tune := tuning.Decode
			tune.MMA.V211Unpack = v211
			r := rand.New(rand.NewPCG(43, uint64(i)))
			return runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: c.spec, sh: c.sh, lens: []int{4099, 1000, 8192}, tq: c.tq, tune: &tune})
		}
		scaled, v211 := run(false), run(true)
		// A large ulp count can be a small absolute difference at an output
		// near 0 (session 15 saw up to 830 ulps): the largest absolute
		// difference, against the largest output, is logged too.
		diff, most, hist := 0, 0, map[int]int{}
		absDiff, absOut := 0.0, 0.0
		for j := range scaled {
			a, b := float64(half.ToFloat32(scaled[j])), float64(half.ToFloat32(v211[j]))
			absOut = max(absOut, math.Abs(a))
			if u := fp16ULPs(scaled[j], v211[j]); u > 0 {
				diff++
				most = max(most, u)
				hist[min(u, 4)]++
				absDiff = max(absDiff, math.Abs(a-b))
			}
		}
		scaledV := strings.HasPrefix(c.spec, "int2") || strings.HasPrefix(c.spec, "int4") || strings.HasPrefix(c.spec, "k4v2") || c.spec == "k8v4"
		if !scaledV && diff > 0 {
			t.Fatalf("%s %+v: %d of %d outputs differ (up to %d ulps) though the values are not scaled", c.spec, c.sh, diff, len(scaled), most)
		}
		t.Logf("%s %+v Tq=%d: v2.12 (scaled values) against v2.11's unpack: %d of %d outputs differ (%.2f%%), at most %d fp16 ulps; 1 ulp: %d, 2: %d, 3: %d, 4 or more: %d; largest difference %.3g (largest |output| %.3g)",
			c.spec, c.sh, c.tq, diff, len(scaled), 100*float64(diff)/float64(len(scaled)), most, hist[1], hist[2], hist[3], hist[4], absDiff, absOut)
	}
}

// fp16ULPs returns the distance of two fp16 values in ulps: the count of
// fp16 values from one to the other (+0 and -0 one apart); a NaN on either
// side counts as far (1 << 16).
func fp16ULPs(a, b uint16) int {
	if a&0x7fff > 0x7c00 || b&0x7fff > 0x7c00 {
		return 1 << 16
	}
	ord := func(h uint16) int {
		if h&0x8000 != 0 {
			return -int(h&0x7fff) - 1
		}
		return int(h)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

func TestLayoutForUnsupported(t *testing.T) {
	for _, spec := range []string{"fp8e4m3", "int4:rot"} {
		if _, err := kernels.LayoutFor(kv.MustResolve(spec, 128)); err == nil {
			t.Errorf("LayoutFor(%s) succeeded; want an error naming the format", spec)
		}
	}
}

func TestPlanDecodeV1RejectsBF16(t *testing.T) {
	lay, err := kernels.LayoutFor(kv.MustResolve("bf16", 128))
	if err != nil {
		t.Fatal(err)
	}
	if !lay.BF16 {
		t.Fatal("bf16 layout not marked BF16")
	}
	d := device(t)
	if _, err := kernels.PlanDecode(d, kernels.DecodeV1, lay, kernels.DecodeShape{B: 1, Hq: 8, Hkv: 2, Tq: 1, MaxBlocks: 1, MaxL: 128}); err == nil {
		t.Error("v1 accepted bf16 blocks")
	}
}

// TestGPUDecodeTimelineSameBits runs decode_mma.cu compiled with its launch
// timeline (DecodeTuning.Timeline, session 19) and without it on the same
// inputs: the timeline only reads the clock and writes its own buffer, so
// the outputs must be equal bit for bit (and within the reference bound,
// which runCase checks), with several splits merged and with one split.
func TestGPUDecodeTimelineSameBits(t *testing.T) {
	device(t)
	specs := []string{"int4", "int2"}
	if testing.Short() {
		specs = specs[:1]
	}
	for i, spec := range specs {
		for _, lens := range [][]int{{4099, 1000, 5}, {700}} {
			run := func(timeline bool) []uint16 {
				tune := tuning.Decode
				tune.Timeline = timeline
				r := rand.New(rand.NewPCG(43, uint64(i)))
				return runCase(t, r, gpuCase{kernel: kernels.DecodeMMA, spec: spec, sh: attn.Shape{Hq: 32, Hkv: 8, D: 128}, lens: lens, tq: 1, tune: &tune})
			}
			want, got := run(false), run(true)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s lens %v: element %d is %#04x with the timeline, %#04x without", spec, lens, j, got[j], want[j])
				}
			}
		}
	}
}

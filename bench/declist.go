package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// The lists' ranking in 'tune dec' (session 21, docs/perf/dec.md): with the
// lists made where x is produced (DECConfig.ListGiven), each DEC list costs
// its producer's time over the plain kernel it replaces (~1 us, session
// 20b's BenchmarkOpsSel), once per layer and list. The tuner times that
// difference per shape and k_chunk as the step runs it (a chain of
// programmatic dependent launches) and charges it to the shapes whose
// layers read the list, so that a shape's percentage holds in the step.

// Which kernel makes a Llama layer's DEC list at one row (backend/gpu's q6
// route) and how many of the layer's GEMVs read it.
const (
	decListNorm = "norm" // add_rmsnorm_cluster_sel: q|k|v's and gate|up's x
	decListOut  = "out"  // f16_to_f32_hadamard_sel: o's x (a rotated KV cache's attention output)
	decListGLU  = "glu"  // swiglu_cols_sel: down's x
)

// decListChain is the number of producer launches a list-cost timing chains
// into one graph (BenchmarkOpsSel's selBenchChain).
const decListChain = 64

// decListHeadDim is the head width o's producer is timed with (the
// rotated formats' Hadamard blocks; Llama-3's 128).
const decListHeadDim = 128

// decListOf returns the producer of layer's list and how many of a layer's
// GEMVs share that list: q_proj, k_proj and v_proj read the attention
// norm's (3), gate_proj and up_proj the MLP norm's (2), o_proj the
// attention output's and down_proj SwiGLU's (1 each). A name it does not
// know is charged a whole norm list.
func decListOf(layer string) (producer string, sharers int) {
	switch layer {
	case "q_proj", "k_proj", "v_proj":
		return decListNorm, 3
	case "gate_proj", "up_proj":
		return decListNorm, 2
	case "o_proj":
		return decListOut, 1
	case "down_proj":
		return decListGLU, 1
	}
	return decListNorm, 1
}

// decListShare returns, for a shape named by its layers ("q_proj/o_proj";
// "" or NxK: unknown), each producer's share of one list that one of the
// shape's GEMVs carries: the mean over its layers of 1/sharers.
func decListShare(name string) map[string]float64 {
	layers := strings.Split(name, "/")
	out := map[string]float64{}
	for _, l := range layers {
		p, n := decListOf(l)
		out[p] += 1 / float64(n) / float64(len(layers))
	}
	return out
}

// decLister times the list producers at one input width K.
type decLister struct {
	t      *timer
	K      int
	launch map[string]func(c *cuda.Ctx, st cuda.Stream, k int) error // k 0: the plain kernel
	plain  map[string]float64                                        // us a launch
}

// newDECLister makes the inputs of the producers of the lists of the shape
// named name (decListShare) for width K (random activations with outlier
// channels) and times each plain kernel. A producer the device or K does
// not allow is left out (charged nothing).
func (t *timer) newDECLister(c *cuda.Ctx, st cuda.Stream, r *rand.Rand, alloc func(int) (cuda.DevicePtr, error), name string, K, maxK int) (*decLister, error) {
	o := t.ops
	put := func(v []float32) (cuda.DevicePtr, error) {
		p, err := alloc(4 * len(v))
		if err != nil {
			return 0, err
		}
		return p, c.HtoD(p, cuda.Bytes(v))
	}
	acts := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * r.NormFloat64())
			if i%97 == 13 {
				v[i] *= float32(20 + 30*r.Float64())
			}
		}
		return v
	}
	l := &decLister{t: t, K: K, launch: map[string]func(*cuda.Ctx, cuda.Stream, int) error{}, plain: map[string]float64{}}
	sel, err := alloc(4 * kernels.DECSelected(K, min(maxK, wq.ChunkChannels)))
	if err != nil {
		return nil, err
	}
	x, err := alloc(4 * K)
	if err != nil {
		return nil, err
	}
	const eps = 1e-5
	share := decListShare(name)
	if share[decListNorm] > 0 && o.AddRMSNormSelects(K) {
		h, err := put(acts(K, 1))
		if err != nil {
			return nil, err
		}
		delta, err := put(acts(K, 0.05))
		if err != nil {
			return nil, err
		}
		w, err := put(acts(K, 1))
		if err != nil {
			return nil, err
		}
		l.launch[decListNorm] = func(c *cuda.Ctx, st cuda.Stream, k int) error {
			if k == 0 {
				return o.AddRMSNormHalfEarly(c, st, h, x, 0, delta, w, 1, K, eps, true)
			}
			return o.AddRMSNormSel(c, st, h, x, 0, delta, w, 1, K, eps, true, sel, k)
		}
	}
	if share[decListOut] > 0 && o.OutSelects(1, K, decListHeadDim) {
		att, err := alloc(2 * K)
		if err != nil {
			return nil, err
		}
		if err := o.FillNormalF16(c, st, att, K, uint32(K), 1); err != nil {
			return nil, err
		}
		l.launch[decListOut] = func(c *cuda.Ctx, st cuda.Stream, k int) error {
			if k == 0 {
				return o.F16ToF32Hadamard(c, st, x, att, K/decListHeadDim, decListHeadDim)
			}
			return o.F16ToF32HadamardSel(c, st, x, att, 1, K, decListHeadDim, sel, k)
		}
	}
	if share[decListGLU] > 0 && o.GLUSelects(1, K) {
		y, err := put(append(acts(K, 1), acts(K, 1)...))
		if err != nil {
			return nil, err
		}
		up, err := alloc(4 * K)
		if err != nil {
			return nil, err
		}
		gate, upOut := kernels.ColsOut{N: K}, kernels.ColsOut{Y: up, N: K}
		l.launch[decListGLU] = func(c *cuda.Ctx, st cuda.Stream, k int) error {
			if k == 0 {
				return o.GLUColsHalf(c, st, kernels.ActSiLU, y, x, 0, 1, gate, upOut)
			}
			return o.GLUColsSel(c, st, kernels.ActSiLU, y, x, 1, gate, upOut, sel, k)
		}
	}
	for p := range l.launch {
		us, err := l.chainUS(c, st, p, 0)
		if err != nil {
			return nil, fmt.Errorf("list producer %s (plain): %w", p, err)
		}
		l.plain[p] = us
	}
	return l, nil
}

// chainUS times producer p at k_chunk k (0: its plain kernel) as the step
// runs it: a graph of decListChain launches, each a programmatic dependent
// of the one before, replayed; the median replay over decListChain.
func (l *decLister) chainUS(c *cuda.Ctx, st cuda.Stream, p string, k int) (float64, error) {
	prev := c.SetGridDependentLaunch(true)
	defer c.SetGridDependentLaunch(prev)
	if err := c.BeginCapture(st); err != nil {
		return 0, err
	}
	var lerr error
	for range decListChain {
		if lerr = l.launch[p](c, st, k); lerr != nil {
			break
		}
	}
	g, err := c.EndCapture(st)
	if lerr != nil {
		if g != nil {
			c.DestroyGraph(g)
		}
		return 0, lerr
	}
	if err != nil {
		return 0, err
	}
	defer c.DestroyGraph(g)
	us, err := c.MedianUS(st, l.t.cfg.Warmup, l.t.cfg.Runs, func(int) error { return c.LaunchGraph(g, st) })
	return us / decListChain, err
}

// costUS returns what one GEMV of the shape named name carries of its
// lists' ranking at k_chunk k: each producer's time over its plain kernel
// (never below 0) times the shape's share of it (decListShare).
func (l *decLister) costUS(c *cuda.Ctx, st cuda.Stream, name string, k int) (float64, error) {
	total := 0.0
	for p, share := range decListShare(name) {
		if l.launch[p] == nil {
			continue
		}
		us, err := l.chainUS(c, st, p, k)
		if err != nil {
			return 0, fmt.Errorf("list producer %s k_chunk %d: %w", p, k, err)
		}
		total += share * max(0, us-l.plain[p])
	}
	return total, nil
}

package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// gemv_q6_dec's kernel table ('bitdecode bench dec --v6', before session 19
// gpu/kernels' opt-in TestGEMVQ6DECTimes and TestGEMVQ6DECDiag): per shape
// and base width, v6.1 at LaunchTiled's split, gemv_q6_dec with no rows
// (the DEC warp's own cost), at each k_chunk with the list given, the
// selection launch alone and ahead of the largest k_chunk, and the largest
// k_chunk at every split; with Diag, gemv_q6_dec's diagnostic builds at
// k_chunk 0, 8 and 64. Each run after an L2 flush, as RunDEC; decCopies
// activation rows (and their lists) rotate; the median of Runs.

// DefaultDECV6Shapes are the shapes --v6 times by default: Llama-3.1-8B's
// four and the two joined groups the backend runs at one row (q|k|v,
// gate|up).
var DefaultDECV6Shapes = []DECShape{{Name: "q/o", N: 4096, K: 4096}, {Name: "k/v", N: 1024, K: 4096}, {Name: "gate/up", N: 14336, K: 4096},
	{Name: "down", N: 4096, K: 14336}, {Name: "q|k|v", N: 6144, K: 4096}, {Name: "gate|up", N: 28672, K: 4096}}

// DefaultDECV6KChunks are the k_chunk values --v6 times.
var DefaultDECV6KChunks = []int{1, 8, 16, 32, 64}

// decV6Forms are gemv_q6_dec's diagnostic builds (DECV6Config.Diag): the
// NVRTC options of each (gemvq6dec.cu's GEMVQ6DEC_DIAG and GEMVQ6DEC_WARPS)
// and the form Launch runs. "warp" is sessions 18-22's (the DEC warp sums
// every row while the base streams), "tail" session 22b's (every row over
// every warp after the base), "default" the one Launch picks by the list's
// length and the split.
var decV6Forms = []struct {
	name, opts string
	tail       kernels.GEMVQ6DECTail
}{
	{"default", "", kernels.TailAuto},
	{"warp", "", kernels.TailNever},
	{"tail", "", kernels.TailAlways},
	{"warp-alone", "-DGEMVQ6DEC_DIAG=1", kernels.TailNever},
	{"tail-alone", "-DGEMVQ6DEC_DIAG=1", kernels.TailAlways},
	{"pair", "-DGEMVQ6DEC_WARPS=2", kernels.TailNever},
}

// DECV6Config configures RunDECV6.
type DECV6Config struct {
	Ordinal int
	Shapes  []DECShape // nil: DefaultDECV6Shapes
	Bits    []int      // base widths, 4 and/or 3 (nil: both)
	KChunks []int      // increasing (nil: DefaultDECV6KChunks)
	Runs    int        // timed runs a point, median (0: 30)
	// Diag times the diagnostic builds (decV6Forms) on the shapes at
	// k_chunk 0 and KChunks instead of the table.
	Diag bool
	Out  io.Writer // the lines
}

// RunDECV6 prints gemv_q6_dec's kernel table (or its diagnostics) to
// cfg.Out, one line a shape and width.
func RunDECV6(cfg DECV6Config) error {
	dev, err := cuda.Open(cfg.Ordinal)
	if err != nil {
		return fmt.Errorf("bench: dec --v6: %w", err)
	}
	defer dev.Close()
	if cfg.Shapes == nil {
		cfg.Shapes = DefaultDECV6Shapes
	}
	if cfg.Bits == nil {
		cfg.Bits = []int{4, 3}
	}
	if cfg.KChunks == nil {
		cfg.KChunks = DefaultDECV6KChunks
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 30
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	const G = 128
	for _, b := range cfg.Bits {
		for _, s := range cfg.Shapes {
			if err := kernels.GEMVQ6DECReads(b, G, s.N, s.K); err != nil {
				return fmt.Errorf("bench: dec --v6: %w", err)
			}
		}
	}
	g, err := kernels.LoadGEMVQ(dev)
	if err != nil {
		return err
	}
	dk, err := kernels.LoadDEC(dev)
	if err != nil {
		return err
	}
	ks := []*kernels.GEMVQ6DEC{}
	forms := decV6Forms[:1]
	if cfg.Diag {
		forms = decV6Forms
	}
	loaded := map[string]*kernels.GEMVQ6DEC{}
	for _, f := range forms {
		k := loaded[f.opts]
		if k == nil {
			var opts []string
			if f.opts != "" {
				opts = strings.Fields(f.opts)
			}
			if k, err = kernels.LoadGEMVQ6DEC(dev, opts...); err != nil {
				return err
			}
			loaded[f.opts] = k
		}
		kf := *k
		kf.Tail = f.tail
		ks = append(ks, &kf)
	}
	return dev.Do(func(c *cuda.Ctx) error {
		st := dev.Stream()
		flush, err := c.Alloc(decFlushBytes)
		if err != nil {
			return err
		}
		defer c.Free(flush)
		median := func(launch func(i int) error) (float64, error) {
			return c.MedianUSPrep(st, 3, cfg.Runs, func(i int) error { return c.Memset32Async(flush, uint32(i), decFlushBytes/4, st) },
				func(i int) error { return launch(i % decCopies) })
		}
		if cfg.Diag {
			fmt.Fprintf(cfg.Out, "gemv_q6_dec diagnostics on %s: us, median of %d, L2 flushed each run, k_chunk 0 and %v\n", dev.Name(), cfg.Runs, cfg.KChunks)
		} else {
			fmt.Fprintf(cfg.Out, "gemv_q6_dec on %s: us, median of %d, L2 flushed each run, list given\n", dev.Name(), cfg.Runs)
		}
		r := rand.New(rand.NewPCG(18, 23))
		for _, bits := range cfg.Bits {
			for _, s := range cfg.Shapes {
				if err := decV6Shape(c, st, g, dk, ks, r, cfg, bits, s, median); err != nil {
					return fmt.Errorf("bench: dec --v6: int%d %dx%d: %w", bits, s.N, s.K, err)
				}
			}
		}
		return nil
	})
}

// decV6Shape times one shape and width (RunDECV6).
func decV6Shape(c *cuda.Ctx, st cuda.Stream, g *kernels.GEMVQ, dk *kernels.DEC, ks []*kernels.GEMVQ6DEC, r *rand.Rand, cfg DECV6Config,
	bits int, s DECShape, median func(func(i int) error) (float64, error)) error {
	const G = 128
	N, K := s.N, s.K
	e := wq.Int4
	if bits == 3 {
		e = wq.Int3
	}
	var free []cuda.DevicePtr
	defer func() {
		for _, p := range free {
			c.Free(p)
		}
	}()
	put := func(b []byte) (cuda.DevicePtr, error) {
		p, err := c.Alloc(max(len(b), 16))
		if err != nil {
			return 0, err
		}
		free = append(free, p)
		return p, c.HtoD(p, b)
	}
	words, params := randomPacked(r, e, G, N, K)
	wp, err := put(cuda.Bytes(words))
	if err != nil {
		return err
	}
	pp, err := put(cuda.Bytes(params))
	if err != nil {
		return err
	}
	twb, tpb := kernels.TiledBytes(bits, N, K, G)
	twp, err := put(make([]byte, twb))
	if err != nil {
		return err
	}
	tpp, err := put(make([]byte, tpb))
	if err != nil {
		return err
	}
	if err := g.PackTiles(c, st, twp, tpp, wp, pp, N, K, bits, G); err != nil {
		return err
	}
	RN := N // the residual's outputs: all, or [s.Lo, s.Lo + s.DECN)
	if s.DECN > 0 {
		RN = s.DECN
	}
	rw, rpar := randomPacked(r, wq.Int4, wq.ResidualGroup, K, RN)
	for i := range rpar {
		if i%2 == 0 {
			rpar[i] = half.FromFloat32(float32(0.001 * (1 + r.Float64())))
		}
	}
	rwp, err := put(cuda.Bytes(rw))
	if err != nil {
		return err
	}
	rpp, err := put(cuda.Bytes(rpar))
	if err != nil {
		return err
	}
	res := &kernels.DECResidual{Elem: wq.Int4, Words: rwp, Params: rpp, N: RN, K: K}
	var xs [decCopies]cuda.DevicePtr
	var xv [decCopies][]float32
	for i := range xs {
		// N(0, 1) with outlier channels (RunDEC's activations).
		xv[i] = make([]float32, K)
		for j := range xv[i] {
			xv[i][j] = float32(r.NormFloat64())
			if j%97 == 13 {
				xv[i][j] *= float32(20 + 30*r.Float64())
			}
		}
		if xs[i], err = put(cuda.Bytes(xv[i])); err != nil {
			return err
		}
	}
	yp, err := put(make([]byte, 4*N))
	if err != nil {
		return err
	}
	// lists returns each activation copy's list at k_chunk kc on the device.
	lists := func(kc int) (sp [decCopies]cuda.DevicePtr, n int, err error) {
		for i := range decCopies {
			var sel []int32
			if kc > 0 {
				sel = wq.SelectApprox(nil, xv[i], kc)
			}
			n = len(sel)
			if sp[i], err = put(cuda.Bytes(append(sel, 0))); err != nil {
				return sp, 0, err
			}
		}
		return sp, n, nil
	}
	split := g.SplitV5For(N, K, bits)
	v61 := func(S int) (float64, error) {
		return median(func(i int) error { return g.LaunchV6(c, st, yp, xs[i], twp, tpp, 0, N, K, bits, G, S) })
	}
	decAt := func(k *kernels.GEMVQ6DEC, kc, S int) (float64, error) {
		sp, n, err := lists(kc)
		if err != nil {
			return 0, err
		}
		return median(func(i int) error {
			return k.LaunchPart(c, st, yp, xs[i], twp, tpp, 0, sp[i], n, res, s.Lo, N, K, bits, G, S, true)
		})
	}
	g.EarlyWeights = true
	defer func() { g.EarlyWeights = false }()
	base, err := v61(split)
	if err != nil {
		return err
	}
	if cfg.Diag {
		line := fmt.Sprintf("diag int%d %-8s %5dx%-5d S %d: v6.1 %.2f", bits, s.Name, N, K, split, base)
		for fi, k := range ks {
			fi2, perSM, err := k.Info(c, bits, split)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" | %s (%d regs, %d CTAs/SM):", decV6Forms[fi].name, fi2.Registers, perSM)
			for _, kc := range append([]int{0}, cfg.KChunks...) {
				us, err := decAt(k, kc, split)
				if err != nil {
					return err
				}
				line += fmt.Sprintf(" k%d %.2f", kc, us)
			}
		}
		fmt.Fprintln(cfg.Out, line)
		return nil
	}
	k := ks[0]
	fi, perSM, err := k.Info(c, bits, split)
	if err != nil {
		return err
	}
	k0, err := decAt(k, 0, split)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("int%d %-8s %5dx%-5d S %d (regs %d, local %d, static smem %d, CTAs/SM %d): v6.1 %.2f | dec k0 %.2f (%+.1f%%)",
		bits, s.Name, N, K, split, fi.Registers, fi.LocalBytes, fi.StaticSharedBytes, perSM, base, k0, 100*(k0/base-1))
	for _, kc := range cfg.KChunks {
		us, err := decAt(k, kc, split)
		if err != nil {
			return err
		}
		line += fmt.Sprintf(" | k%d %.2f (%+.1f%%)", kc, us, 100*(us/base-1))
	}
	// The selection as a launch of its own (select_topk), alone and ahead
	// of the largest k_chunk's launch that reads its list.
	kMax := cfg.KChunks[len(cfg.KChunks)-1]
	selp, err := put(make([]byte, 4*max(kernels.DECSelected(K, kMax), 1)))
	if err != nil {
		return err
	}
	selectL := func(i int) *kernels.DECLaunch {
		return &kernels.DECLaunch{X: xs[i], Y: yp, Sel: selp, R: res, T: 1, KChunk: kMax}
	}
	selUS, err := median(func(i int) error { return dk.Select(c, st, selectL(i)) })
	if err != nil {
		return err
	}
	n := kernels.DECSelected(K, kMax)
	both, err := median(func(i int) error {
		if err := dk.Select(c, st, selectL(i)); err != nil {
			return err
		}
		return k.LaunchPart(c, st, yp, xs[i], twp, tpp, 0, selp, n, res, s.Lo, N, K, bits, G, split, true)
	})
	if err != nil {
		return err
	}
	// And select_q6 (the backend's: a programmatic dependent that lets
	// gemv_q6_dec start at once).
	bothQ6, err := median(func(i int) error {
		if err := k.Select(c, st, selectL(i)); err != nil {
			return err
		}
		return k.LaunchPart(c, st, yp, xs[i], twp, tpp, 0, selp, n, res, s.Lo, N, K, bits, G, split, true)
	})
	if err != nil {
		return err
	}
	line += fmt.Sprintf(" | select k%d alone %.2f | select + dec k%d %.2f (%+.1f%%) | select_q6 + dec %.2f (%+.1f%%)", kMax, selUS, kMax, both,
		100*(both/base-1), bothQ6, 100*(bothQ6/base-1))
	fmt.Fprintln(cfg.Out, line)
	line = fmt.Sprintf("int%d %-8s k%d by split:", bits, s.Name, kMax)
	for _, S := range kernels.GEMVQ4Splits() {
		bs, err := v61(S)
		if err != nil {
			return err
		}
		ds, err := decAt(k, kMax, S)
		if err != nil {
			return err
		}
		line += fmt.Sprintf(" | S %d v6.1 %.2f dec %.2f", S, bs, ds)
	}
	fmt.Fprintln(cfg.Out, line)
	return nil
}

package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// DEC timing: the decode-step cost of dynamic error compensation on the GPU
// ('bitdecode bench dec', 'bitdecode tune dec').
//
// For one linear-layer shape [N, K] and T rows of x it times, each run
// after a write of decFlushBytes that evicts L2 (in a decode step the same
// layer comes back only after every other layer's weights went through L2,
// so neither its weights nor its residual rows are cached):
//
//   - the base GEMV alone (gemvq.cu for int4/int8, gemv.cu on fp16 for
//     formats backend/gpu dequantizes at load);
//   - for each k_chunk, dec.cu's selection alone;
//   - for each (k_chunk, n_tb): the step as backend/gpu runs it in serial
//     mode (base, selection, compensation), and the compensation alone,
//     whose residual bytes (T·S rows of codes and params) over its time are
//     the achieved zero-copy read rate;
//   - in fused mode also the step whose DEC CTAs read each token's list
//     made before the launch (a LinearGroup's later weights, or a
//     selection done where x is produced), not selecting themselves.
//
// In fused mode at one row with the residual in device memory, a shape
// whose base v6.1 reads runs as backend/gpu runs it since session 19
// (unless DECConfig.Q3): the base is v6.1 over the tiled layout
// (GEMVQ.LaunchV6 at SplitV5For's split), the step select_q6 (dec.cu's
// select_topk as a programmatic dependent), then gemvq6dec.cu's gemv_q6_dec (no n_tb: one point a k_chunk), and the
// list-given step gemv_q6_dec alone.
//
// Weights and residuals hold random codes and valid fp16 params (the time
// does not depend on the values); x has outlier channels, so the selected
// rows are spread over the residual like real activations'.

// Defaults of DECConfig.
var (
	// DefaultDECKChunks are the k_chunk values timed, increasing.
	DefaultDECKChunks = []int{8, 16, 32, 64, 128, 256, 512, 1024}
	// DefaultDECBlocks are the n_tb values timed (clamped per shape).
	DefaultDECBlocks = []int{4, 8, 16, 32, 66, 132}
)

const (
	// decFlushBytes is written before each timed run to evict L2 (H100:
	// 50 MB).
	decFlushBytes = 192 << 20
	// decCopies is how many different activation rows are rotated, so
	// consecutive runs select different residual rows.
	decCopies = 4
	// decPCIeBytes is the pinned host-to-device copy that measures the
	// copy engines' PCIe rate, for reference.
	decPCIeBytes = 64 << 20
)

// DECShape is one linear-layer shape to time.
type DECShape struct {
	Name string `json:"name"` // the layers that have it ("gate_proj/up_proj"), or "NxK"
	N    int    `json:"n"`
	K    int    `json:"k"`
	// Lo and DECN, where DECN > 0, give DEC to the outputs [Lo, Lo + DECN)
	// only ('bench dec --v6': a joined group whose parts have DEC or not,
	// GEMVQ6DEC.LaunchPart; "6144x4096@5120+1024" is q|k|v with v's).
	Lo   int `json:"dec_lo,omitempty"`
	DECN int `json:"dec_n,omitempty"`
}

// DECShapesOf returns the distinct linear-layer shapes of c, named by
// their layers.
func DECShapesOf(c *model.Config) ([]DECShape, error) {
	ls, err := model.LinearShapes(c)
	if err != nil {
		return nil, err
	}
	out := make([]DECShape, len(ls))
	for i, s := range ls {
		out[i] = DECShape{Name: strings.Join(s.Layers, "/"), N: s.N, K: s.K}
	}
	return out, nil
}

// PresetConfig parses the config of a preset (Presets).
func PresetConfig(name string) (*model.Config, error) {
	js, ok := Presets[name]
	if !ok {
		return nil, fmt.Errorf("bench: no preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
	c, err := model.ParseConfig([]byte(js))
	if err != nil {
		return nil, fmt.Errorf("bench: preset %s: %w", name, err)
	}
	return c, nil
}

// DECConfig configures RunDEC.
type DECConfig struct {
	// Ordinal is the GPU to time on (0: the first).
	Ordinal int
	Shapes  []DECShape
	// Weights is the base format: int4 and int8 stay packed (gemvq.cu),
	// others run as fp16 (gemv.cu), as backend/gpu stores them.
	Weights  wq.Spec
	Residual wq.Elem // the residual's element type (0: int4)
	// ResidualOnDevice keeps the residual in device memory instead of
	// mapped host memory (backend/gpu's Options.DECResidualOnDevice).
	ResidualOnDevice bool
	Tokens           int   // rows of x, 1..kernels.GEMVMaxRows (0: 1)
	KChunks          []int // increasing (nil: DefaultDECKChunks)
	Blocks           []int // n_tb values (nil: DefaultDECBlocks), clamped to each shape's range
	Runs             int   // timed runs per point, median reported (0: 30)
	Warmup           int   // untimed runs first (0: 3)
	// Mode is how a step runs DEC beside the base GEMV: kernels.DECSerial
	// (0 too) or kernels.DECConcurrent (a second stream, joined by an add;
	// as backend/gpu runs it).
	Mode kernels.DECMode
	// Activations is how x is drawn: DECOutliers ("" too; Gaussian with
	// outlier channels) or DECNarrow (every |x| within 1% of 1: a chunk's
	// keys in one or two selection buckets, the worst case of v6's
	// histogram selection; docs/perf/dec.md v7).
	Activations string
	// Q3 keeps fused mode on gemv_q3_dec beside v3.2 (wq's layout) where
	// the backend would run gemv_q6_dec (backend/gpu's Options.DECQ3).
	Q3 bool
	// StopPct > 0 stops a shape's k_chunk sweep after the first k_chunk
	// whose fastest step is more than StopPct percent slower than the base.
	StopPct float64
	// ListGiven makes a shape's cost its step with the list given
	// (DECPoint.ListedPct) where fused mode times one: the lists made where
	// x is produced, as backend/gpu runs them unless
	// Options.NoDECNormSelect (EnvNoDECNormSelect; sessions 19b-20). The
	// sweep's stop and the tuning's picks use it. The producers' own
	// ranking is in it (DECPoint.ListUS, session 21) unless NoListCost.
	ListGiven bool
	// NoListCost leaves the lists' ranking out of the list-given step
	// (session 20's picks, for comparison).
	NoListCost bool
	Progress   io.Writer // one line per timed point; nil: quiet
}

// The activation distributions DECConfig.Activations names.
const (
	DECOutliers = "outliers"
	DECNarrow   = "narrow"
)

// DECReport is a RunDEC run.
type DECReport struct {
	Device   string           `json:"device"`
	Date     string           `json:"date"`
	Weights  string           `json:"weights"`
	Residual string           `json:"residual"`
	At       string           `json:"residual_at"` // "host" (mapped, read over PCIe) or "device"
	Mode     string           `json:"mode"`
	Q3       bool             `json:"q3,omitempty"`         // DECConfig.Q3
	Listed   bool             `json:"list_given,omitempty"` // DECConfig.ListGiven: picks on the list-given step
	Tokens   int              `json:"tokens"`
	X        string           `json:"activations,omitempty"` // DECConfig.Activations; "" = outliers
	PCIeGBps float64          `json:"pcie_copy_gb_per_s"`    // pinned host-to-device copy, for reference
	Shapes   []DECShapeResult `json:"shapes"`
}

// DECShapeResult is one shape's base time and points.
type DECShapeResult struct {
	DECShape
	// Route is the fused kernel: "gemv_q6_dec" (v6.1 base, tiled) or
	// "gemv_q3_dec"/"gemv_q_dec" (wq's layout); "" in other modes.
	Route  string     `json:"route,omitempty"`
	BaseUS float64    `json:"base_us"`
	Points []DECPoint `json:"points"`
}

// DECPoint is one (k_chunk, n_tb) of a shape.
type DECPoint struct {
	KChunk      int     `json:"k_chunk"`
	Blocks      int     `json:"n_tb"`
	Selected    int     `json:"selected"`       // channels per token (S)
	StepUS      float64 `json:"step_us"`        // base + selection + compensation
	SelectUS    float64 `json:"select_us"`      // selection alone
	CompUS      float64 `json:"compensate_us"`  // compensation alone
	Bytes       int64   `json:"residual_bytes"` // T·S residual rows (codes and params)
	GBps        float64 `json:"read_gb_per_s"`  // Bytes / CompUS
	OverheadPct float64 `json:"overhead_pct"`   // 100·(StepUS/BaseUS − 1)
	// Fused mode: the step with each token's list made before the launch
	// (kernels.DECLaunch.Listed, untimed), as a LinearGroup's weights after
	// the first run it, or a selection where x is produced would.
	ListedUS float64 `json:"step_listed_us,omitempty"`
	// ListUS is what one GEMV of the shape carries of its lists' ranking
	// at this k_chunk (decLister.costUS: each list's producer over its
	// plain kernel, shared among the GEMVs that read it), charged to the
	// list-given step (DECConfig.ListGiven, unless NoListCost).
	ListUS    float64 `json:"list_us,omitempty"`
	ListedPct float64 `json:"overhead_listed_pct,omitempty"` // 100·((ListedUS + ListUS)/BaseUS − 1)
}

// decBlocksFor returns the n_tb values of want that a shape allows (in
// every mode), or the fewest it allows if none.
func decBlocksFor(want []int, e wq.Elem, N int) []int {
	lo, hi := max(kernels.DECMinBlocks(e, N), kernels.DECFusedMinBlocks(N)), kernels.DECMaxBlocks(N)
	var out []int
	for _, b := range want {
		if b >= lo && b <= hi && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		out = []int{lo}
	}
	sort.Ints(out)
	return out
}

// EnvDECMode is the environment variable that picks the CUDA backend's DEC
// mode (backend/gpu), which 'bench dec' and 'tune dec' default to.
const EnvDECMode = gpu.EnvDECMode

// EnvDECResidual is the environment variable that places the CUDA
// backend's DEC residuals (host or device), which 'bench dec' and 'tune
// dec' default to.
const EnvDECResidual = gpu.EnvDECResidual

// EnvNoDECNormSelect is the environment variable that has the CUDA
// backend make DEC's lists by a selection launch a GEMV instead of where x
// is produced (backend/gpu's Options.NoDECNormSelect); 'tune dec' then
// picks on the step with the selection (DECConfig.ListGiven false).
const EnvNoDECNormSelect = gpu.EnvNoDECNormSelect

// EnvDECQ3 is the environment variable that keeps the CUDA backend's DEC
// weights on gemv_q3_dec (Options.DECQ3), which 'bench dec' and 'tune dec'
// follow (DECConfig.Q3).
const EnvDECQ3 = gpu.EnvDECQ3

// ParseDECMode parses a DEC mode name: serial (or ""), concurrent or fused.
func ParseDECMode(s string) (kernels.DECMode, error) { return kernels.ParseDECMode(s) }

// RunDEC times DEC for each shape of cfg on GPU cfg.Ordinal (see the
// comment above).
func RunDEC(cfg DECConfig) (*DECReport, error) {
	dev, err := cuda.Open(cfg.Ordinal)
	if err != nil {
		return nil, fmt.Errorf("bench: dec: %w", err)
	}
	defer dev.Close()
	return runDEC(dev, cfg)
}

func runDEC(dev *cuda.Device, cfg DECConfig) (*DECReport, error) {
	if cfg.Residual == 0 {
		cfg.Residual = wq.Int4
	}
	if cfg.Tokens == 0 {
		cfg.Tokens = 1
	}
	if cfg.KChunks == nil {
		cfg.KChunks = DefaultDECKChunks
	}
	if cfg.Blocks == nil {
		cfg.Blocks = DefaultDECBlocks
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 30
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Tokens < 1 || cfg.Tokens > kernels.GEMVMaxRows {
		return nil, fmt.Errorf("bench: dec: %d tokens: want 1..%d (decode batches)", cfg.Tokens, kernels.GEMVMaxRows)
	}
	if !slices.IsSorted(cfg.KChunks) || len(cfg.KChunks) == 0 || cfg.KChunks[0] < 1 {
		return nil, fmt.Errorf("bench: dec: k_chunk values %v: want positive and increasing", cfg.KChunks)
	}
	if cfg.Mode == 0 {
		cfg.Mode = kernels.DECSerial
	}
	if cfg.Mode == kernels.DECFused && (cfg.Residual != wq.Int4 || cfg.Tokens > 8) {
		return nil, fmt.Errorf("bench: dec: fused mode takes int4 residuals and at most 8 tokens")
	}
	packed := cfg.Weights.Elem == wq.Int4 || cfg.Weights.Elem == wq.Int8 || cfg.Weights.Elem == wq.Int3
	for _, s := range cfg.Shapes {
		if err := kernels.DECReads(cfg.Residual, s.N); err != nil {
			return nil, fmt.Errorf("bench: dec: shape %dx%d: %w", s.N, s.K, err)
		}
		if packed && s.K%cfg.Weights.Group != 0 {
			return nil, fmt.Errorf("bench: dec: shape %dx%d: K is not a multiple of the group %d", s.N, s.K, cfg.Weights.Group)
		}
	}
	t := &timer{dev: dev, cfg: cfg, packed: packed}
	var err error
	if t.dec, err = kernels.LoadDEC(dev); err != nil {
		return nil, err
	}
	if packed {
		t.gq, err = kernels.LoadGEMVQ(dev)
	} else {
		t.gv, err = kernels.LoadGEMV(dev)
	}
	if err != nil {
		return nil, err
	}
	if t.ops, err = kernels.LoadOps(dev); err != nil {
		return nil, err
	}
	if cfg.Mode == kernels.DECFused {
		if !packed {
			return nil, fmt.Errorf("bench: dec: fused mode needs packed base weights (int3, int4, int8)")
		}
		if t.gqd, err = kernels.LoadGEMVQDEC(dev); err != nil {
			return nil, err
		}
		if err := t.gqd.Prepare(cfg.Weights.Elem.Bits()); err != nil {
			return nil, err
		}
		if b := cfg.Weights.Elem.Bits(); cfg.ResidualOnDevice && cfg.Tokens == 1 && !cfg.Q3 && (b == 3 || b == 4) {
			if t.q6, err = kernels.LoadGEMVQ6DEC(dev); err != nil {
				return nil, err
			}
			// The backend's GEMVs issue their first weight loads before
			// the dependency wait.
			t.gq.EarlyWeights = true
		}
	}
	rep := &DECReport{Device: dev.Name(), Date: time.Now().UTC().Format("2006-01-02"), Weights: cfg.Weights.Short(),
		Residual: cfg.Residual.String(), At: "host", Mode: cfg.Mode.String(), Tokens: cfg.Tokens, X: cfg.Activations, Q3: cfg.Q3, Listed: cfg.ListGiven}
	if cfg.ResidualOnDevice {
		rep.At = "device"
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		st := dev.Stream()
		var err error
		if t.flush, err = c.Alloc(decFlushBytes); err != nil {
			return err
		}
		defer c.Free(t.flush)
		if cfg.Mode == kernels.DECConcurrent {
			if t.s2, err = c.NewPriorityStream(); err != nil {
				return err
			}
			defer c.DestroyStream(t.s2)
			if t.fork, err = c.NewEvent(); err != nil {
				return err
			}
			defer c.DestroyEvent(t.fork)
			if t.join, err = c.NewEvent(); err != nil {
				return err
			}
			defer c.DestroyEvent(t.join)
		}
		if rep.PCIeGBps, err = pcieCopyGBps(c, st); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Progress, "%s: pinned host-to-device copy %.1f GB/s\n", dev.Name(), rep.PCIeGBps)
		for i, s := range cfg.Shapes {
			r, err := t.shape(c, st, s, fmt.Sprintf("[%d/%d]", i+1, len(cfg.Shapes)))
			if err != nil {
				return fmt.Errorf("shape %dx%d: %w", s.N, s.K, err)
			}
			rep.Shapes = append(rep.Shapes, *r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: dec: %w", err)
	}
	return rep, nil
}

// timer holds RunDEC's kernels and flush buffer.
type timer struct {
	dev    *cuda.Device
	cfg    DECConfig
	packed bool
	gq     *kernels.GEMVQ
	gv     *kernels.GEMV
	ops    *kernels.Ops
	dec    *kernels.DEC
	flush  cuda.DevicePtr
	gqd    *kernels.GEMVQDEC  // fused mode
	q6     *kernels.GEMVQ6DEC // fused mode, one row, residual on the device (not Q3)
	// Concurrent mode: the second stream and its fork/join events.
	s2         cuda.Stream
	fork, join cuda.Event
}

// medianUS times step like cuda.Ctx.MedianUS, but writes the flush buffer
// (untimed) before every run, so each run reads weights and residual rows
// from DRAM as a real decode step does.
func (t *timer) medianUS(c *cuda.Ctx, st cuda.Stream, step func(i int) error) (float64, error) {
	flush := func(i int) error { return c.Memset32Async(t.flush, uint32(i), decFlushBytes/4, st) }
	return c.MedianUSPrep(st, t.cfg.Warmup, t.cfg.Runs, flush, step)
}

// shape times one shape.
func (t *timer) shape(c *cuda.Ctx, st cuda.Stream, s DECShape, tag string) (*DECShapeResult, error) {
	cfg, T, N, K := t.cfg, t.cfg.Tokens, s.N, s.K
	r := rand.New(rand.NewPCG(uint64(N), uint64(K)))
	var free []cuda.DevicePtr
	defer func() {
		for _, p := range free {
			c.Free(p)
		}
	}()
	alloc := func(bytes int) (cuda.DevicePtr, error) {
		p, err := c.Alloc(max(bytes, 16))
		if err == nil {
			free = append(free, p)
		}
		return p, err
	}
	// The compensation's own output in concurrent mode.
	part, err := alloc(4 * T * N)
	if err != nil {
		return nil, err
	}
	base, fusedStep, q6, err := t.baseGEMV(c, st, r, alloc, N, K)
	if err != nil {
		return nil, err
	}
	xs, err := decActivations(c, r, alloc, T, K, t.cfg.Activations == DECNarrow)
	if err != nil {
		return nil, err
	}
	y, err := alloc(4 * T * N)
	if err != nil {
		return nil, err
	}
	sel, err := alloc(4 * T * kernels.DECSelected(K, cfg.KChunks[len(cfg.KChunks)-1]))
	if err != nil {
		return nil, err
	}
	res, freeRes, err := mappedResidual(c, r, cfg.Residual, N, K, cfg.ResidualOnDevice)
	if err != nil {
		return nil, err
	}
	defer freeRes()
	rowBytes := wq.RowBytes(cfg.Residual, wq.ResidualGroup, N)

	out := &DECShapeResult{DECShape: s}
	switch {
	case q6:
		out.Route = "gemv_q6_dec"
	case t.gqd != nil:
		out.Route = "gemv_q3_dec or gemv_q_dec"
	}
	if out.BaseUS, err = t.medianUS(c, st, func(i int) error { return base(y, xs[i%decCopies]) }); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "dec %s %dx%d %s: base %.1f us\n", tag, N, K, s.Name, out.BaseUS)
	if t.gqd != nil {
		// The fused kernels' resources beside the base's: registers set
		// the base CTAs' occupancy.
		bits := cfg.Weights.Elem.Bits()
		bi, err := t.gq.Info(c, T, bits, kernels.SplitFor(N, K))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "dec %s %dx%d: gemv_q split %d: %d registers, %d B shared, %d B local\n",
			tag, N, K, kernels.SplitFor(N, K), bi.Registers, bi.StaticSharedBytes, bi.LocalBytes)
		for _, pmax := range kernels.GEMVQDECPMax() {
			fi, err := t.gqd.Info(c, N, K, bits, pmax)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(cfg.Progress, "dec %s %dx%d: gemv_q_dec P<=%d: %d registers, %d B shared, %d B local\n",
				tag, N, K, pmax, fi.Registers, fi.StaticSharedBytes, fi.LocalBytes)
		}
	}
	blocks := decBlocksFor(cfg.Blocks, cfg.Residual, N)
	if q6 {
		blocks = blocks[:1] // gemv_q6_dec has no n_tb
	}
	// Fused mode's lists made before the launch, one per activation copy.
	var lists []cuda.DevicePtr
	if t.gqd != nil {
		for range decCopies {
			p, err := alloc(4 * T * kernels.DECSelected(K, cfg.KChunks[len(cfg.KChunks)-1]))
			if err != nil {
				return nil, err
			}
			lists = append(lists, p)
		}
	}
	// The lists' ranking, charged to the list-given step.
	var lister *decLister
	if lists != nil && cfg.ListGiven && !cfg.NoListCost && t.ops.AddRMSNormSelects(kernels.NormClusterMinG) {
		if lister, err = t.newDECLister(c, st, r, alloc, s.Name, K, cfg.KChunks[len(cfg.KChunks)-1]); err != nil {
			return nil, err
		}
	}
	for _, k := range cfg.KChunks {
		listUS := 0.0
		if lister != nil {
			if listUS, err = lister.costUS(c, st, s.Name, k); err != nil {
				return nil, err
			}
		}
		launch := func(i, nTB int) *kernels.DECLaunch {
			return &kernels.DECLaunch{X: xs[i%decCopies], Y: y, Sel: sel, R: res, T: T, KChunk: k, Blocks: nTB}
		}
		selUS, err := t.medianUS(c, st, func(i int) error { return t.dec.Select(c, st, launch(i, blocks[0])) })
		if err != nil {
			return nil, err
		}
		for i, p := range lists {
			l := launch(i, blocks[0])
			l.Sel = p
			if err := t.dec.Select(c, st, l); err != nil {
				return nil, err
			}
		}
		best := 0.0
		for _, nTB := range blocks {
			p := DECPoint{KChunk: k, Blocks: nTB, Selected: kernels.DECSelected(K, k), SelectUS: selUS}
			if q6 {
				p.Blocks = 0
			}
			p.Bytes = int64(T) * int64(p.Selected) * rowBytes
			if p.StepUS, err = t.medianUS(c, st, func(i int) error {
				l := launch(i, nTB)
				switch t.cfg.Mode {
				case kernels.DECConcurrent:
					return t.concurrentStep(c, st, base, l, part, N)
				case kernels.DECFused:
					return fusedStep(l)
				}
				if err := base(y, l.X); err != nil {
					return err
				}
				if err := t.dec.Select(c, st, l); err != nil {
					return err
				}
				return t.dec.Compensate(c, st, l)
			}); err != nil {
				return nil, err
			}
			// The compensation alone reads the selection of copy 0.
			if err := t.dec.Select(c, st, launch(0, nTB)); err != nil {
				return nil, err
			}
			if p.CompUS, err = t.medianUS(c, st, func(int) error { return t.dec.Compensate(c, st, launch(0, nTB)) }); err != nil {
				return nil, err
			}
			p.GBps = float64(p.Bytes) / p.CompUS / 1e3
			p.OverheadPct = 100 * (p.StepUS/out.BaseUS - 1)
			listed := ""
			if lists != nil {
				if p.ListedUS, err = t.medianUS(c, st, func(i int) error {
					l := launch(i, nTB)
					l.Sel, l.Listed = lists[i%decCopies], true
					return fusedStep(l)
				}); err != nil {
					return nil, err
				}
				p.ListUS = listUS
				p.ListedPct = 100 * ((p.ListedUS+p.ListUS)/out.BaseUS - 1)
				listed = fmt.Sprintf(", list given %7.1f us + ranking %4.2f us (%+6.1f%%)", p.ListedUS, p.ListUS, p.ListedPct)
			}
			out.Points = append(out.Points, p)
			if cost := p.cost(cfg.ListGiven); best == 0 || cost < best {
				best = cost
			}
			fmt.Fprintf(cfg.Progress, "dec %s %dx%d k_chunk %4d n_tb %3d: step %7.1f us (%+6.1f%%)%s, select %5.1f us, compensate %6.1f us (%5.1f GB/s)\n",
				tag, N, K, k, nTB, p.StepUS, p.OverheadPct, listed, p.SelectUS, p.CompUS, p.GBps)
		}
		if cfg.StopPct > 0 && best > cfg.StopPct {
			break
		}
	}
	return out, nil
}

// baseGEMV makes the random base weights of an N x K layer in the
// configured format and returns the base GEMV launch (y = x·Wᵀ) and, for
// packed weights, fused mode's whole step; q6 when that step is the
// backend's q6 route (select_topk unless the launch is Listed, then
// gemv_q6_dec; the base v6.1 over the tiled layout).
func (t *timer) baseGEMV(c *cuda.Ctx, st cuda.Stream, r *rand.Rand, alloc func(int) (cuda.DevicePtr, error), N, K int) (
	base func(y, x cuda.DevicePtr) error, fusedStep func(l *kernels.DECLaunch) error, q6 bool, err error) {
	cfg, T := t.cfg, t.cfg.Tokens
	if !t.packed {
		wp, err := alloc(2 * N * K)
		if err != nil {
			return nil, nil, false, err
		}
		if err := t.ops.FillNormalF16(c, st, wp, N*K, uint32(N^K), 0.02); err != nil {
			return nil, nil, false, err
		}
		return func(y, x cuda.DevicePtr) error { return t.gv.Launch(c, st, y, x, wp, 0, T, N, K) }, nil, false, nil
	}
	// Fused mode's tile flags (each launch leaves them zeroed).
	flags, err := alloc(4 * kernels.DECFlagWords(N))
	if err != nil {
		return nil, nil, false, err
	}
	if err := c.Memset32Async(flags, 0, kernels.DECFlagWords(N), st); err != nil {
		return nil, nil, false, err
	}
	bits, G := cfg.Weights.Elem.Bits(), cfg.Weights.Group
	words, params := randomPacked(r, cfg.Weights.Elem, G, N, K)
	wp, err := alloc(4 * len(words))
	if err != nil {
		return nil, nil, false, err
	}
	pp, err := alloc(2 * len(params))
	if err != nil {
		return nil, nil, false, err
	}
	if err := c.HtoD(wp, cuda.Bytes(words)); err != nil {
		return nil, nil, false, err
	}
	if err := c.HtoD(pp, cuda.Bytes(params)); err != nil {
		return nil, nil, false, err
	}
	// And its compensation buffer, empty between launches.
	part, err := alloc(4 * T * N)
	if err != nil {
		return nil, nil, false, err
	}
	if err := c.Memset32Async(part, kernels.DECPartEmpty, T*N, st); err != nil {
		return nil, nil, false, err
	}
	if t.q6 != nil && t.gq.UsesV6(1, N, K, bits, G) && kernels.GEMVQ6DECReads(bits, G, N, K) == nil && !(t.gq.V51 && bits == 4) {
		tw, tp := kernels.TiledBytes(bits, N, K, G)
		twp, err := alloc(tw)
		if err != nil {
			return nil, nil, false, err
		}
		tpp, err := alloc(tp)
		if err != nil {
			return nil, nil, false, err
		}
		if err := t.gq.PackTiles(c, st, twp, tpp, wp, pp, N, K, bits, G); err != nil {
			return nil, nil, false, err
		}
		S := t.gq.SplitV5For(N, K, bits)
		base = func(y, x cuda.DevicePtr) error { return t.gq.LaunchV6(c, st, y, x, twp, tpp, 0, N, K, bits, G, S) }
		fusedStep = func(l *kernels.DECLaunch) error {
			if !l.Listed {
				if err := t.q6.Select(c, st, l); err != nil {
					return err
				}
			}
			return t.q6.Launch(c, st, l.Y, l.X, twp, tpp, 0, l.Sel, kernels.DECSelected(K, l.KChunk), l.R, N, K, bits, G, S, t.gq.EarlyWeights)
		}
		return base, fusedStep, true, nil
	}
	base = func(y, x cuda.DevicePtr) error { return t.gq.Launch(c, st, y, x, wp, pp, 0, T, N, K, bits, G) }
	fusedStep = func(l *kernels.DECLaunch) error {
		f := *l
		f.Flags, f.Part = flags, part
		return t.gqd.Launch(c, st, f.Y, f.X, wp, pp, 0, T, N, K, bits, G, &f)
	}
	return base, fusedStep, false, nil
}

// decActivations uploads decCopies batches of T rows of K activations with
// outlier channels, or (narrow) of random sign and |x| within 1% of 1.
func decActivations(c *cuda.Ctx, r *rand.Rand, alloc func(int) (cuda.DevicePtr, error), T, K int, narrow bool) ([]cuda.DevicePtr, error) {
	xs := make([]cuda.DevicePtr, decCopies)
	for i := range xs {
		x := make([]float32, T*K)
		for j := range x {
			if narrow {
				x[j] = float32(1 + 0.003*r.NormFloat64())
				if r.IntN(2) == 0 {
					x[j] = -x[j]
				}
				continue
			}
			x[j] = float32(r.NormFloat64())
			if j%K%97 == 13 {
				x[j] *= float32(20 + 30*r.Float64())
			}
		}
		p, err := alloc(4 * len(x))
		if err != nil {
			return nil, err
		}
		if err := c.HtoD(p, cuda.Bytes(x)); err != nil {
			return nil, err
		}
		xs[i] = p
	}
	return xs, nil
}

// mappedResidual puts a random residual Rᵀ [K][N] of element type e in
// mapped host memory, as the CUDA backend keeps DEC's residuals (or in
// device memory with onDevice), and returns it with the function that
// frees it.
func mappedResidual(c *cuda.Ctx, r *rand.Rand, e wq.Elem, N, K int, onDevice bool) (*kernels.DECResidual, func(), error) {
	rw, rpar := randomPacked(r, e, wq.ResidualGroup, K, N)
	wb, pb := cuda.Bytes(rw), cuda.Bytes(rpar)
	off := (len(wb) + 255) / 256 * 256
	if onDevice {
		p, err := c.Alloc(off + max(len(pb), 16))
		if err != nil {
			return nil, nil, fmt.Errorf("the residual in device memory: %w", err)
		}
		err = c.HtoD(p, wb)
		if err == nil && len(pb) > 0 {
			err = c.HtoD(p+cuda.DevicePtr(off), pb)
		}
		if err != nil {
			c.Free(p)
			return nil, nil, err
		}
		res := &kernels.DECResidual{Elem: e, Words: p, N: N, K: K}
		if e.IsInt() {
			res.Params = p + cuda.DevicePtr(off)
		}
		return res, func() { c.Free(p) }, nil
	}
	host, err := c.AllocHost(off+max(len(pb), 16), true)
	if err != nil {
		return nil, nil, fmt.Errorf("the residual in mapped host memory: %w", err)
	}
	copy(host.Bytes(), wb)
	copy(host.Bytes()[off:], pb)
	res := &kernels.DECResidual{Elem: e, Words: host.DevicePtr(), N: N, K: K}
	if e.IsInt() {
		res.Params = host.DevicePtr() + cuda.DevicePtr(off)
	}
	return res, func() { c.FreeHost(host) }, nil
}

// concurrentStep queues one step of concurrent mode as backend/gpu runs
// it: fork; on the second stream zero part, select and compensate into it;
// the base GEMV on st; join; y += part.
func (t *timer) concurrentStep(c *cuda.Ctx, st cuda.Stream, base func(y, x cuda.DevicePtr) error, l *kernels.DECLaunch, part cuda.DevicePtr, N int) error {
	y := l.Y
	d := *l
	d.Y = part
	for _, f := range []func() error{
		func() error { return c.Record(t.fork, st) },
		func() error { return c.WaitEvent(t.s2, t.fork) },
		func() error { return c.Memset32Async(part, 0, l.T*N, t.s2) },
		func() error { return t.dec.Select(c, t.s2, &d) },
		func() error { return t.dec.Compensate(c, t.s2, &d) },
		func() error { return c.Record(t.join, t.s2) },
		func() error { return base(y, l.X) },
		func() error { return c.WaitEvent(st, t.join) },
		func() error { return t.ops.Add(c, st, y, y, part, l.T*N) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// randomPacked returns random codes and valid fp16 (scale, zero) pairs of
// an [n, k] matrix of element type e in wq's packed layout (fp16: random
// values of magnitude about 0.002, no params).
func randomPacked(r *rand.Rand, e wq.Elem, G, n, k int) ([]uint32, []uint16) {
	words := make([]uint32, n*e.RowWords(k))
	if !e.IsInt() {
		for i := range words {
			lo, hi := half.FromFloat32(float32(0.002*r.NormFloat64())), half.FromFloat32(float32(0.002*r.NormFloat64()))
			words[i] = uint32(lo) | uint32(hi)<<16
		}
		return words, nil
	}
	for i := range words {
		words[i] = r.Uint32()
	}
	params := make([]uint16, 2*n*(k/G))
	for i := 0; i < len(params); i += 2 {
		params[i], params[i+1] = half.FromFloat32(float32(0.0005+0.0005*r.Float64())), half.FromFloat32(float32(-0.004*(1+r.Float64())))
	}
	return words, params
}

// pcieCopyGBps times a pinned host-to-device copy of decPCIeBytes.
func pcieCopyGBps(c *cuda.Ctx, st cuda.Stream) (float64, error) {
	h, err := c.AllocHost(decPCIeBytes, false)
	if err != nil {
		return 0, err
	}
	defer c.FreeHost(h)
	d, err := c.Alloc(decPCIeBytes)
	if err != nil {
		return 0, err
	}
	defer c.Free(d)
	us, err := c.MedianUS(st, 2, 5, func(int) error { return c.HtoDAsync(d, h.Bytes(), st) })
	if err != nil {
		return 0, err
	}
	return decPCIeBytes / us / 1e3, nil
}

// Pick returns the choice for a slowdown target of pct percent: the largest
// k_chunk with a point within it, at its fastest n_tb; k_chunk 0 if none.
func (s *DECShapeResult) Pick(pct float64) model.DECPick { return s.pick(pct, false) }

// pick is Pick; with listed a point's cost is its step with the list given
// where it has one (DECConfig.ListGiven).
func (s *DECShapeResult) pick(pct float64, listed bool) model.DECPick {
	best := model.DECPick{SlowdownPct: pct, US: s.BaseUS}
	for _, p := range s.Points {
		cost, us := p.OverheadPct, p.StepUS
		if listed && p.ListedUS > 0 {
			cost, us = p.ListedPct, p.ListedUS+p.ListUS
		}
		if cost > pct {
			continue
		}
		if p.KChunk > best.KChunk || (p.KChunk == best.KChunk && us < best.US) {
			best = model.DECPick{SlowdownPct: pct, KChunk: p.KChunk, Blocks: p.Blocks, US: us, OverheadPct: cost}
		}
	}
	return best
}

// cost is the point's overhead in percent: with listed its step with the
// list given where it has one, else its step with the selection.
func (p *DECPoint) cost(listed bool) float64 {
	if listed && p.ListedUS > 0 {
		return p.ListedPct
	}
	return p.OverheadPct
}

// Tuning returns the settings-file form of the report with picks for each
// target (percent).
func (rep *DECReport) Tuning(targets []float64, source string) *model.DECTuning {
	res := rep.Residual
	if rep.At == "device" {
		res += " (device memory)" // the tuning holds only for that placement
	}
	tu := &model.DECTuning{Device: rep.Device, Mode: rep.Mode, Residual: res, Tokens: rep.Tokens,
		Date: rep.Date, Source: source, Targets: slices.Clone(targets)}
	for i := range rep.Shapes {
		s := &rep.Shapes[i]
		st := model.DECShapeTuning{N: s.N, K: s.K, BaseUS: s.BaseUS}
		if s.Name != "" && s.Name != fmt.Sprintf("%dx%d", s.N, s.K) {
			st.Layers = strings.Split(s.Name, "/")
		}
		for _, p := range targets {
			st.Picks = append(st.Picks, s.pick(p, rep.Listed))
		}
		for _, p := range s.Points {
			st.Points = append(st.Points, model.DECPoint{KChunk: p.KChunk, Blocks: p.Blocks, US: p.StepUS, DECUS: p.SelectUS + p.CompUS})
		}
		tu.Shapes = append(tu.Shapes, st)
	}
	return tu
}

// WriteTable prints every point as a Markdown table.
func (rep *DECReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "DEC on %s, %s mode, base %s, residual %s in %s memory, T = %d; pinned copy %.1f GB/s\n\n", rep.Device, rep.Mode, rep.Weights, rep.Residual, rep.At, rep.Tokens, rep.PCIeGBps)
	fmt.Fprintln(w, "| layers | N x K | base us | k_chunk | rows/token | n_tb | select us | compensate us | step us | overhead | step, list given + its ranking | residual KiB | read GB/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Shapes {
		for _, p := range s.Points {
			listed := "-"
			if p.ListedUS > 0 {
				listed = fmt.Sprintf("%.1f + %.2f (%+.1f%%)", p.ListedUS, p.ListUS, p.ListedPct)
			}
			fmt.Fprintf(w, "| %s | %dx%d | %.1f | %d | %d | %d | %.1f | %.1f | %.1f | %+.1f%% | %s | %.1f | %.1f |\n", s.Name, s.N, s.K, s.BaseUS,
				p.KChunk, p.Selected, p.Blocks, p.SelectUS, p.CompUS, p.StepUS, p.OverheadPct, listed, float64(p.Bytes)/1024, p.GBps)
		}
	}
}

// WriteJSON writes the report to path.
func (rep *DECReport) WriteJSON(path string) error {
	return writeJSON(path, rep)
}

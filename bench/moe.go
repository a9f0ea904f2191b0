package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// MoEShape is one sparse layer's expert shapes: hidden size H, expert
// width IE, E experts of which each token takes k.
type MoEShape struct {
	H, IE, E, K int
}

// MoEPresets are the sparse layers 'bench moe' times (the checkpoints'
// config.json: hidden_size, moe_intermediate_size or intermediate_size,
// num_local_experts or num_experts, num_experts_per_tok).
var MoEPresets = map[string]MoEShape{
	"mixtral-8x7b":  {H: 4096, IE: 14336, E: 8, K: 2},
	"qwen3-30b-a3b": {H: 2048, IE: 768, E: 128, K: 8},
}

// MoEPresetNames returns MoEPresets' names, sorted.
func MoEPresetNames() []string {
	var names []string
	for n := range MoEPresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// The paths a MoERow times.
const (
	// MoEPathDevice is the engine's route on the device (model.moeDevice):
	// RouteExperts and MixExperts a layer, no host round trip, the flush
	// replayed as a CUDA graph. fp16 experts: the per-token GEMVs or the
	// grouped GEMMs (Options.MoEGroupRows); packed ones: the indexed
	// one-row GEMVs up to their backend.ExpertRows.
	MoEPathDevice = "device"
	// MoEPathHost is model.moeHost's ops (the route of packed experts
	// before session 19, and of their batches over MaxRows): the router's
	// logits downloaded, RouteTokens on the host, per chosen expert its
	// tokens' rows gathered (Rows), gate and up (LinearGroup), SwiGLU, down,
	// its output downloaded and summed on the host, the sum uploaded.
	MoEPathHost = "host"
	// MoEPathRoute is RouteExperts alone (the device's top-k), one a layer.
	MoEPathRoute = "route"
)

// MoEConfig is what RunMoE times.
type MoEConfig struct {
	Presets []string    // keys of MoEPresets
	Tokens  []int       // T, tokens a layer
	Weights []wq.Spec   // fp16 or packed (int8, int4, int3; RTN)
	Paths   []string    // MoEPath*; the device path is skipped where the experts refuse T
	Layers  int         // sparse layers of their own random experts, one flush (0: 8)
	Reps    int         // timed flushes a row (0: as many as 0.3 s takes, 5 to 50)
	GPU     gpu.Options // the backend's options (gpu.ParseOptions of the environment)
	// Progress gets the read ceiling and a line a row, as they come.
	Progress io.Writer
}

// MoERow is one (preset, weights, T, path) point.
type MoERow struct {
	Preset  string  `json:"preset"`
	Weights string  `json:"weights"`
	T       int     `json:"t"`
	Path    string  `json:"path"`
	Layers  int     `json:"layers"`
	US      float64 `json:"us_per_layer"`     // median flush over Layers
	USMin   float64 `json:"us_per_layer_min"` // fastest flush over Layers
	Experts int     `json:"experts"`          // distinct experts the T tokens chose (each layer the same)
	// MB is the chosen experts' weight bytes a layer (codes and (scale,
	// zero) pairs for packed ones), the least a layer reads; GBps those
	// over US, OfCeiling that over the read ceiling (0 for the route alone).
	MB        float64 `json:"expert_mb_per_layer"`
	GBps      float64 `json:"gb_per_s"`
	OfCeiling float64 `json:"ceiling_fraction"`
	// Replayed is the flushes of the timed ones replayed as CUDA graphs.
	Replayed int `json:"graphs_replayed"`
	Flushes  int `json:"flushes"`
	// VsHost is ‖out − host's‖/‖host's‖ of the device path's last layer
	// against the host path's (when both ran): the same experts' sums,
	// bitwise at T = 1 for packed experts, but routing weights may differ by
	// an ulp (the host's float64 exp).
	VsHost *float64 `json:"vs_host,omitempty"`
}

// MoEReport is RunMoE's result.
type MoEReport struct {
	Device   string  `json:"device"`
	Date     string  `json:"date"`
	ReadGBps float64 `json:"read_ceiling_gb_per_s"` // the higher of the probes before and after
	// ReadBefore and ReadAfter are the read ceiling's probes around the rows.
	ReadBefore float64  `json:"read_ceiling_before_gb_per_s"`
	ReadAfter  float64  `json:"read_ceiling_after_gb_per_s"`
	Rows       []MoERow `json:"rows"`
}

// moeDefaultLayers is MoEConfig.Layers's default: 8 layers of their own
// experts a flush keep the weights cold in L2 (Qwen3-30B-A3B's 8 chosen
// int4 experts take 20 MB a layer, an H100's L2 50 MB).
const moeDefaultLayers = 8

// moeWarmFlushes are the untimed flushes before a row (the second
// captures its graph).
const moeWarmFlushes = 3

// moeMinReps, moeMaxReps and moeRepSeconds bound a row's timed flushes
// when MoEConfig.Reps is 0.
const (
	moeMinReps    = 5
	moeMaxReps    = 50
	moeRepSeconds = 0.3
)

// moeMismatch is the largest VsHost RunMoE accepts: a wrong expert or
// weight shows as O(1); kernels that sum in another order (the host
// path's GEMVs at several rows an expert) differ by ~1e-6.
const moeMismatch = 1e-3

// RunMoE times one mixture-of-experts layer a preset's shapes at each T
// and weight format on GPU 0 (the CUDA backend, cfg.GPU): Layers sparse
// layers of their own random experts (std 0.02; packed ones random codes
// with plausible scales) routed from the same random router logits, one
// flush of all of them a timed run, each path in turn (device, host) and
// then again (alternated), the rows' times the median of the second
// round. Every output is checked finite, the device path's against the
// host's (moeMismatch). The read ceiling is probed before and after.
func RunMoE(cfg MoEConfig) (*MoEReport, error) {
	if cfg.Layers <= 0 {
		cfg.Layers = moeDefaultLayers
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	g, err := gpu.Open(0, cfg.GPU)
	if err != nil {
		return nil, fmt.Errorf("bench: moe: %w", err)
	}
	defer g.Close()
	rep := &MoEReport{Device: g.Device().Name(), Date: time.Now().UTC().Format("2006-01-02")}
	bw, err := g.Device().ProbeBandwidth()
	if err != nil {
		return nil, err
	}
	rep.ReadBefore = bw.GBps
	fmt.Fprintf(progress, "%s: read ceiling %.0f GB/s before the rows\n", rep.Device, bw.GBps)
	for _, name := range cfg.Presets {
		sh, ok := MoEPresets[name]
		if !ok {
			return nil, fmt.Errorf("bench: moe: no preset %q (have %s)", name, strings.Join(MoEPresetNames(), ", "))
		}
		for _, spec := range cfg.Weights {
			rows, err := runMoEWeights(g, name, sh, spec, cfg, rep.ReadBefore, progress)
			if err != nil {
				return nil, err
			}
			rep.Rows = append(rep.Rows, rows...)
		}
	}
	if bw, err = g.Device().ProbeBandwidth(); err != nil {
		return nil, err
	}
	rep.ReadAfter = bw.GBps
	rep.ReadGBps = max(rep.ReadBefore, rep.ReadAfter)
	fmt.Fprintf(progress, "%s: read ceiling %.0f GB/s after the rows\n", rep.Device, bw.GBps)
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Path != MoEPathRoute {
			r.OfCeiling = r.GBps / rep.ReadGBps
		}
	}
	return rep, nil
}

// moeLayers are a preset's Layers sparse layers of one weight format on g.
type moeLayers struct {
	g       *gpu.Backend
	experts []backend.Experts
	w       [][3][]backend.Weight // [layer][gate, up, down][expert]
	err     error                 // LoadExperts's refusal, if any
}

func (ls *moeLayers) free() {
	for _, ex := range ls.experts {
		ls.g.FreeExperts(ex)
	}
	for _, lw := range ls.w {
		for _, ps := range lw {
			for _, w := range ps {
				if w != nil {
					ls.g.FreeWeight(w)
				}
			}
		}
	}
}

// loadMoELayers makes n layers of random experts of shape sh in spec's
// format (seeded by layer, projection and expert) and hands each layer to
// LoadExperts; a refusal is kept (the device path then has no rows).
func loadMoELayers(g *gpu.Backend, sh MoEShape, spec wq.Spec, n int) (*moeLayers, error) {
	ls := &moeLayers{g: g}
	for l := range n {
		var lw [3][]backend.Weight
		ls.w = append(ls.w, lw)
		for i, shape := range [][]int{{sh.IE, sh.H}, {sh.IE, sh.H}, {sh.H, sh.IE}} {
			ls.w[l][i] = make([]backend.Weight, sh.E)
			for e := range sh.E {
				seed := uint64(1000*l+3*e+i) + 1
				var err error
				if spec.IsQuantized() {
					ls.w[l][i][e], err = g.LoadRandomQuant("expert", shape, spec.Elem, spec.Group, seed, wq.DEC{})
				} else {
					ls.w[l][i][e], err = g.LoadRandom("expert", shape, 0.02, seed)
				}
				if err != nil {
					ls.free()
					return nil, err
				}
			}
		}
		ex, err := g.LoadExperts(ls.w[l][0], ls.w[l][1], ls.w[l][2], sh.K)
		if err != nil {
			ls.err = err
			continue
		}
		ls.experts = append(ls.experts, ex)
	}
	return ls, nil
}

// moeExpertBytes is one expert's weight bytes (gate, up and down): fp16,
// or codes and a (scale, zero) fp16 pair per group.
func moeExpertBytes(sh MoEShape, spec wq.Spec) float64 {
	elems := 3 * float64(sh.IE) * float64(sh.H)
	if !spec.IsQuantized() {
		return 2 * elems
	}
	return elems * (float64(spec.Elem.Bits())/8 + 4/float64(spec.Group))
}

// runMoEWeights times every T and path of one preset and weight format.
func runMoEWeights(g *gpu.Backend, name string, sh MoEShape, spec wq.Spec, cfg MoEConfig, ceiling float64, progress io.Writer) ([]MoERow, error) {
	ls, err := loadMoELayers(g, sh, spec, cfg.Layers)
	if err != nil {
		return nil, fmt.Errorf("bench: moe %s %v: %w", name, spec, err)
	}
	defer ls.free()
	if ls.err != nil {
		fmt.Fprintf(progress, "%s %v: LoadExperts refused the experts (no device rows): %v\n", name, spec, ls.err)
	}
	var rows []MoERow
	for _, T := range cfg.Tokens {
		r, err := runMoET(g, ls, name, sh, spec, T, cfg, ceiling, progress)
		if err != nil {
			return nil, fmt.Errorf("bench: moe %s %v T %d: %w", name, spec, T, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// moeTensors are one T's activations on the device and the host path's
// scratch.
type moeTensors struct {
	x, lg, idx, w, act, out backend.Tensor
	// The host path's: per rows-an-expert count, a gather index, x's rows,
	// gate, up and y.
	hb      map[int]*moeHostBufs
	hostLog []float32
	acc     []float32
}

// moeHostBufs are model.moeState's bufsOf for n rows.
type moeHostBufs struct {
	idx, x, gate, up, y backend.Tensor
	host                []float32
}

// runMoET times the paths of one T.
func runMoET(g *gpu.Backend, ls *moeLayers, name string, sh MoEShape, spec wq.Spec, T int, cfg MoEConfig, ceiling float64, progress io.Writer) ([]MoERow, error) {
	var ts []backend.Tensor
	var failed error
	alloc := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := g.Alloc(dt, shape...)
		if err != nil {
			failed = err
			return nil
		}
		ts = append(ts, x)
		return x
	}
	defer func() {
		for _, x := range ts {
			g.Free(x)
		}
	}()
	mt := &moeTensors{hb: map[int]*moeHostBufs{}, hostLog: make([]float32, T*sh.E), acc: make([]float32, T*sh.H)}
	defer mt.freeHost(g)
	mt.x, mt.lg = alloc(backend.F32, T, sh.H), alloc(backend.F32, T, sh.E)
	mt.idx, mt.w = alloc(backend.I32, T, sh.K), alloc(backend.F32, T, sh.K)
	mt.act, mt.out = alloc(backend.F32, T*sh.K, sh.IE), alloc(backend.F32, T, sh.H)
	if failed != nil {
		return nil, failed
	}
	r := rand.New(rand.NewPCG(uint64(T), 2))
	xv, lv := make([]float32, T*sh.H), make([]float32, T*sh.E)
	for i := range xv {
		xv[i] = float32(r.NormFloat64())
	}
	for i := range lv {
		lv[i] = float32(r.NormFloat64())
	}
	if err := g.Upload(mt.x, xv); err != nil {
		return nil, err
	}
	if err := g.Upload(mt.lg, lv); err != nil {
		return nil, err
	}
	// The distinct experts the tokens choose (every layer the same logits).
	routes := model.RouteTokens(lv, sh.E, sh.K, true)
	chosen := map[int]bool{}
	for _, rt := range routes {
		for _, e := range rt.Expert {
			chosen[int(e)] = true
		}
	}
	mb := float64(len(chosen)) * moeExpertBytes(sh, spec) / 1e6

	device := ls.err == nil
	if device {
		if er, ok := ls.experts[0].(backend.ExpertRows); ok && T > er.MaxRows() {
			device = false
			if slices.Contains(cfg.Paths, MoEPathDevice) {
				fmt.Fprintf(progress, "%s %v T %d: device: over the experts' %d rows (the model routes this batch on the host)\n", name, spec, T, er.MaxRows())
			}
		}
	}
	type path struct {
		name string
		run  func() error
	}
	var paths []path
	for _, p := range cfg.Paths {
		switch p {
		case MoEPathDevice:
			if device {
				paths = append(paths, path{p, func() error { return moeDeviceFlush(g, ls, mt, true) }})
			}
		case MoEPathRoute:
			if device {
				paths = append(paths, path{p, func() error { return moeDeviceFlush(g, ls, mt, false) }})
			}
		case MoEPathHost:
			paths = append(paths, path{p, func() error { return moeHostFlush(g, ls, mt, sh) }})
		default:
			return nil, fmt.Errorf("path %q (want %s, %s or %s)", p, MoEPathDevice, MoEPathHost, MoEPathRoute)
		}
	}
	// Two rounds, alternated; the rows are the second's.
	var rows []MoERow
	outs := map[string][]float32{}
	for round := range 2 {
		for _, p := range paths {
			row, out, err := timeMoEPath(g, p.run, mt.out, T*sh.H, cfg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			if prev, ok := outs[p.name]; ok && p.name != MoEPathRoute && !sameFloats(prev, out) {
				return nil, fmt.Errorf("%s: the output differs between rounds (a race?)", p.name)
			}
			outs[p.name] = out
			if round == 0 {
				continue
			}
			row.Preset, row.Weights, row.T, row.Path, row.Layers = name, spec.String(), T, p.name, len(ls.w)
			row.Experts, row.MB = len(chosen), mb
			if p.name != MoEPathRoute {
				row.GBps = mb * 1e6 / (row.US * 1e-6) / 1e9
			}
			rows = append(rows, row)
		}
	}
	if d, ok := outs[MoEPathDevice]; ok {
		if h, ok := outs[MoEPathHost]; ok {
			rel := relDiff(d, h)
			if !(rel <= moeMismatch) {
				return nil, fmt.Errorf("device against host: ‖Δ‖/‖host‖ = %.3g (over %g: a wrong expert or weight)", rel, moeMismatch)
			}
			for i := range rows {
				if rows[i].Path == MoEPathDevice {
					rows[i].VsHost = &rel
				}
			}
		}
	}
	for _, row := range rows {
		line := fmt.Sprintf("%-14s %-14s T %4d %-6s %9.1f us a layer (min %.1f), %3d experts %8.1f MB", row.Preset, row.Weights, row.T, row.Path, row.US, row.USMin, row.Experts, row.MB)
		if row.Path != MoEPathRoute {
			line += fmt.Sprintf(", %5.0f GB/s, %4.1f%% of %.0f", row.GBps, 100*row.GBps/ceiling, ceiling)
		}
		line += fmt.Sprintf("; graphs %d/%d", row.Replayed, row.Flushes)
		if row.VsHost != nil {
			line += fmt.Sprintf("; vs host %.1e", *row.VsHost)
		}
		fmt.Fprintln(progress, line)
	}
	return rows, nil
}

// moeDeviceFlush queues every layer's RouteExperts and (mix) MixExperts
// and syncs: one flush, a CUDA graph once captured.
func moeDeviceFlush(g *gpu.Backend, ls *moeLayers, mt *moeTensors, mix bool) error {
	for _, ex := range ls.experts {
		g.RouteExperts(mt.idx, mt.w, mt.lg, true)
		if mix {
			g.MixExperts(mt.out, mt.x, ex, mt.idx, mt.w, mt.act, nil, nil)
		}
	}
	return g.Sync()
}

// moeHostFlush runs model.moeHost's ops for every layer (the router's
// logits already on the device): a round trip per layer and per expert.
func moeHostFlush(g *gpu.Backend, ls *moeLayers, mt *moeTensors, sh MoEShape) error {
	H := sh.H
	for _, lw := range ls.w {
		if err := g.Download(mt.hostLog, mt.lg); err != nil {
			return err
		}
		rows, ws := model.TokensByExpert(model.RouteTokens(mt.hostLog, sh.E, sh.K, true), sh.E)
		clear(mt.acc)
		for e, idx := range rows {
			n := len(idx)
			if n == 0 {
				continue
			}
			b, err := mt.hostBufs(g, n, sh)
			if err != nil {
				return err
			}
			if err := g.UploadInt32(b.idx, idx); err != nil {
				return err
			}
			g.Rows(b.x, mt.x, b.idx)
			g.LinearGroup([]backend.Tensor{b.gate, b.up}, b.x, []backend.Weight{lw[0][e], lw[1][e]}, nil)
			g.SwiGLU(b.gate, b.gate, b.up)
			g.Linear(b.y, b.gate, lw[2][e], nil)
			if err := g.Download(b.host, b.y); err != nil {
				return err
			}
			for j, t := range idx {
				w, y, acc := ws[e][j], b.host[j*H:(j+1)*H], mt.acc[int(t)*H:(int(t)+1)*H]
				for i, v := range y {
					acc[i] += float32(v * w)
				}
			}
		}
		if err := g.Upload(mt.out, mt.acc); err != nil {
			return err
		}
	}
	return g.Sync()
}

// hostBufs returns the host path's buffers for n rows, made at first use.
func (mt *moeTensors) hostBufs(g *gpu.Backend, n int, sh MoEShape) (*moeHostBufs, error) {
	if b, ok := mt.hb[n]; ok {
		return b, nil
	}
	b := &moeHostBufs{host: make([]float32, n*sh.H)}
	var err error
	for _, p := range []struct {
		t     *backend.Tensor
		dt    backend.DType
		shape []int
	}{{&b.idx, backend.I32, []int{n}}, {&b.x, backend.F32, []int{n, sh.H}}, {&b.gate, backend.F32, []int{n, sh.IE}},
		{&b.up, backend.F32, []int{n, sh.IE}}, {&b.y, backend.F32, []int{n, sh.H}}} {
		if *p.t, err = g.Alloc(p.dt, p.shape...); err != nil {
			return nil, err
		}
	}
	mt.hb[n] = b
	return b, nil
}

// freeHost frees the host path's buffers.
func (mt *moeTensors) freeHost(g *gpu.Backend) {
	for _, b := range mt.hb {
		for _, t := range []backend.Tensor{b.idx, b.x, b.gate, b.up, b.y} {
			if t != nil {
				g.Free(t)
			}
		}
	}
}

// timeMoEPath warms a path up (moeWarmFlushes), times its flushes
// (cfg.Reps, or as many as moeRepSeconds takes within moeMinReps and
// moeMaxReps) and returns the row's times a layer, its graph counts and
// the output (every element checked finite).
func timeMoEPath(g *gpu.Backend, run func() error, out backend.Tensor, n int, cfg MoEConfig) (MoERow, []float32, error) {
	var row MoERow
	for range moeWarmFlushes {
		if err := run(); err != nil {
			return row, nil, err
		}
	}
	before := g.GraphStats()
	var times []float64
	start := time.Now()
	for len(times) < moeMaxReps && (len(times) < max(cfg.Reps, moeMinReps) || (cfg.Reps == 0 && time.Since(start).Seconds() < moeRepSeconds)) {
		t0 := time.Now()
		if err := run(); err != nil {
			return row, nil, err
		}
		times = append(times, time.Since(t0).Seconds())
		if cfg.Reps > 0 && len(times) == cfg.Reps {
			break
		}
	}
	after := g.GraphStats()
	row.Replayed = after.Replayed - before.Replayed
	row.Flushes = after.Replayed + after.Captured + after.Direct - before.Replayed - before.Captured - before.Direct
	sort.Float64s(times)
	layers := float64(max(1, cfg.Layers))
	row.US, row.USMin = 1e6*times[len(times)/2]/layers, 1e6*times[0]/layers
	res := make([]float32, n)
	if err := g.Download(res, out); err != nil {
		return row, nil, err
	}
	for i, v := range res {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return row, nil, fmt.Errorf("out[%d] = %v", i, v)
		}
	}
	return row, res, nil
}

// sameFloats reports whether a and b hold the same bits.
func sameFloats(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// relDiff is ‖a − b‖/‖b‖ in float64.
func relDiff(a, b []float32) float64 {
	var dn, bn float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		dn, bn = dn+d*d, bn+float64(b[i])*float64(b[i])
	}
	return math.Sqrt(dn / bn)
}

// WriteMoEReport prints rep's rows as a table.
func WriteMoEReport(w io.Writer, rep *MoEReport) {
	fmt.Fprintf(w, "\nMixture-of-experts layer, %s, %s; read ceiling %.0f GB/s (before %.0f, after %.0f); us a layer: median flush of %d layers\n\n",
		rep.Device, rep.Date, rep.ReadGBps, rep.ReadBefore, rep.ReadAfter, firstLayers(rep))
	fmt.Fprintf(w, "%-14s %-14s %5s %-6s %10s %10s %7s %10s %8s %8s %8s\n", "preset", "weights", "T", "path", "us/layer", "min", "experts", "MB/layer", "GB/s", "ceiling", "vs host")
	for _, r := range rep.Rows {
		gbs, of, vs := "-", "-", "-"
		if r.Path != MoEPathRoute {
			gbs, of = fmt.Sprintf("%.0f", r.GBps), fmt.Sprintf("%.1f%%", 100*r.OfCeiling)
		}
		if r.VsHost != nil {
			vs = fmt.Sprintf("%.1e", *r.VsHost)
		}
		fmt.Fprintf(w, "%-14s %-14s %5d %-6s %10.1f %10.1f %7d %10.1f %8s %8s %8s\n", r.Preset, r.Weights, r.T, r.Path, r.US, r.USMin, r.Experts, r.MB, gbs, of, vs)
	}
}

// firstLayers is the rows' layers a flush (all rows the same).
func firstLayers(rep *MoEReport) int {
	if len(rep.Rows) == 0 {
		return 0
	}
	return rep.Rows[0].Layers
}

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache/gpukv"
)

// GPUGrid is BENCHMARKS.md's decode-attention grid.
var GPUGrid = []Point{{1, 8192}, {1, 32768}, {1, 131072}, {8, 32768}, {16, 32768}, {32, 8192}, {64, 8192}, {128, 8192}}

// GPUFormats are the protocol's formats for the GPU table.
var GPUFormats = []string{"fp16", "int8", "int4", "int4:kt128", "int2", "k4v2"}

// GPU timing protocol (BENCHMARKS.md): warm-ups, timed runs, and the working
// set the rotated inputs must exceed so that L2 (50 MB on H100) cannot serve
// them.
const (
	gpuWarmups        = 5
	gpuRuns           = 50
	gpuRotateBytes    = 256 << 20
	gpuMaxPoolBytes   = 40 << 30
	gpuPrototypes     = 16    // distinct random blocks replicated over the pool
	gpuErrCheckTokens = 32768 // check against the float64 reference up to this length
)

// GPUConfig configures RunAttnGPU.
type GPUConfig struct {
	// Ordinal is the GPU to time on (0: the first).
	Ordinal int
	// GPU holds the kernels' tuning (and the backend's settings), from the
	// environment at the program's edge (GPUSettings).
	GPU     GPUOptions
	Formats []string
	Grid    []Point
	Shape   attn.Shape
	// Softcap is the attention scores' soft-cap c (DecodeShape.Softcap;
	// 0: none), the float64 check's too.
	Softcap float32
	// ResidualFull runs every row with Nr-1 tokens in the residual block
	// (L-1 cached tokens) instead of none.
	ResidualFull bool
	// Paged shuffles the block table (pages scattered over the pool).
	Paged bool
	// BatchInvariant plans every row as kvcache/gpukv's batch-invariant
	// mode does (serve --batch-invariant, the default there): each
	// sequence's splits from its own length (gpukv.BatchInvariantSplits,
	// DecodeShape.SplitCap), the per-sequence kernel.
	BatchInvariant bool
	// Kernel is the decode implementation to time.
	Kernel kernels.DecodeKernel
	// Kernels, when set, times each of them in turn in place of Kernel (a
	// side-by-side run; a format a kernel cannot read is skipped with a note).
	Kernels  []kernels.DecodeKernel
	Progress io.Writer
}

// GPURow is one measured GPU row.
type GPURow struct {
	AttnRow
	Kernel      string  `json:"kernel"`
	Splits      int     `json:"splits"`
	ResidualLen int     `json:"residual_tokens"`
	Paged       bool    `json:"paged"`
	KernelErr   float64 `json:"max_abs_err_vs_f64_ref"` // vs attn.Reference on the stored values, sequence 0; -1 if not checked
	// PackUS is the time to quantize and pack one full residual block for
	// every sequence and KV head at once (the worst step: all fill together).
	PackUS      float64 `json:"pack_us,omitempty"`
	SDPAUS      float64 `json:"sdpa_us,omitempty"`
	SpeedupSDPA float64 `json:"speedup_vs_sdpa,omitempty"`
	// FP16US is the fp16 kernel's time at the same point in the same run,
	// SpeedupFP16 FP16US over this row's time (bw rows).
	FP16US      float64 `json:"fp16_us,omitempty"`
	SpeedupFP16 float64 `json:"speedup_vs_fp16,omitempty"`
	// Planes describes a bit-plane (bw) row: tier shares and bytes.
	Planes *PlanesRow `json:"planes,omitempty"`
}

// GPUReport is the result of RunAttnGPU.
type GPUReport struct {
	Date     string       `json:"date"`
	Device   string       `json:"device"`
	Info     *cuda.Info   `json:"info,omitempty"`
	ReadGBps float64      `json:"read_ceiling_gb_per_s"`
	Rows     []GPURow     `json:"rows"`
	SDPA     []SDPARecord `json:"sdpa,omitempty"`
}

// RunAttnGPU measures the GPU decode kernels on GPU cfg.Ordinal for every
// format and grid point (BENCHMARKS.md's protocol).
func RunAttnGPU(cfg GPUConfig) (*GPUReport, error) {
	dev, err := cuda.Open(cfg.Ordinal)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer dev.Close()
	return runAttnGPU(dev, cfg)
}

// ParseDecodeKernels parses --kernel: auto, mma, wgmma or v1, or a
// comma-separated list of them to time side by side.
func ParseDecodeKernels(list string) ([]kernels.DecodeKernel, error) {
	var out []kernels.DecodeKernel
	for _, name := range strings.Split(list, ",") {
		k, err := kernels.ParseDecodeKernel(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// runAttnGPU measures the GPU decode kernels on every format and grid point.
func runAttnGPU(dev *cuda.Device, cfg GPUConfig) (*GPUReport, error) {
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	info, err := dev.Info(true)
	if err != nil {
		return nil, err
	}
	rep := &GPUReport{Date: time.Now().UTC().Format("2006-01-02"), Device: info.Name, Info: &info}
	if info.Bandwidth != nil {
		rep.ReadGBps = info.Bandwidth.GBps
	}
	fmt.Fprintf(progress, "%s: read ceiling %.0f GB/s (16-byte streaming probe)\n", info.Name, rep.ReadGBps)
	fp16 := map[Point]float64{} // the fp16 kernel's time per point, for bw rows
	kerns := cfg.Kernels
	if len(kerns) == 0 {
		kerns = []kernels.DecodeKernel{cfg.Kernel}
	}
	for _, spec := range cfg.Formats {
		for _, kern := range kerns {
			kcfg := cfg
			kcfg.Kernel = kern
			if err := runFormat(dev, kcfg, spec, rep, fp16, progress); err != nil {
				return nil, err
			}
		}
	}
	err = fp16Times(dev, cfg, rep, fp16, func(format string, a ...any) { fmt.Fprintf(progress, format, a...) })
	return rep, err
}

// runFormat measures one format with cfg.Kernel on every grid point.
func runFormat(dev *cuda.Device, cfg GPUConfig, spec string, rep *GPUReport, fp16 map[Point]float64, progress io.Writer) error {
	f, err := kv.MustParseSpec(spec).Resolve(cfg.Shape.D)
	if err != nil {
		return err
	}
	f = f.WithOrder(cfg.Kernel.Order())
	if cfg.Kernel == kernels.DecodeWGMMA && len(cfg.Kernels) > 1 {
		if f.Planes.On {
			fmt.Fprintf(progress, "  %-24s skipped for wgmma: bit planes have their own kernel (planes.cu)\n", spec)
			return nil
		}
		lay, err := kernels.LayoutFor(f)
		if err == nil {
			err = kernels.WGMMASupports(dev, lay)
		}
		if err != nil {
			fmt.Fprintf(progress, "  %-24s skipped for wgmma: %v\n", spec, err)
			return nil
		}
	}
	for _, pt := range cfg.Grid {
		var row *GPURow
		if f.Planes.On && cfg.Softcap != 0 {
			return fmt.Errorf("%s: the bit-plane kernels have no soft-cap", spec)
		}
		if f.Planes.On {
			row, err = runPlanesPoint(dev, f, cfg, pt)
		} else {
			row, err = runGPUPoint(dev, f, cfg, pt)
		}
		if err != nil {
			return fmt.Errorf("%s B=%d L=%d: %w", spec, pt.B, pt.L, err)
		}
		if isFP16(f) && !cfg.ResidualFull && cfg.Kernel != kernels.DecodeV1 && (fp16[pt] == 0 || row.TimeUS < fp16[pt]) {
			fp16[pt] = row.TimeUS
		}
		row.FracCeiling = row.GBps / rep.ReadGBps
		rep.Rows = append(rep.Rows, *row)
		fmt.Fprintf(progress, "  %-12s %-24s B=%-3d L=%-6d splits=%-3d %9.1f us %7.0f GB/s %5.1f%% of read  err %.1e\n",
			row.Kernel, row.Format, row.B, row.L, row.Splits, row.TimeUS, row.GBps, 100*row.FracCeiling, row.KernelErr)
	}
	return nil
}

func runGPUPoint(dev *cuda.Device, f kv.Format, cfg GPUConfig, pt Point) (row *GPURow, err error) {
	sh := cfg.Shape
	lay, err := kernels.LayoutFor(f)
	if err != nil {
		return nil, err
	}
	l := pt.L
	if cfg.ResidualFull {
		l = pt.L - 1
	}
	nr := f.Residual
	nBlocks := l / nr
	maxBlocks := max(nBlocks, 1)
	headBlock := sh.Hkv * f.BlockBytes()
	setBytes := int64(pt.B) * (int64(nBlocks)*int64(headBlock) + int64(sh.Hkv*f.ResidualBytes()))
	sets := int(max(1, min((gpuRotateBytes+setBytes-1)/setBytes, gpuMaxPoolBytes/max(setBytes, 1))))
	poolBlocks := sets * pt.B * maxBlocks

	// Prototype blocks and residual from real (synthetic, realistic) K/V.
	r := rand.New(rand.NewPCG(uint64(pt.B), uint64(pt.L)))
	cache, err := attn.NewCache(f, sh)
	if err != nil {
		return nil, err
	}
	k, v := kvtest.KeysValues(r, gpuPrototypes*nr+nr-1, sh.Hkv, sh.D)
	if err := cache.Append(k, v); err != nil {
		return nil, err
	}
	a := &devArena{dev: dev}
	defer a.free()
	pool, err := a.alloc(poolBlocks * headBlock)
	if err != nil {
		return nil, err
	}
	if err := fillPool(dev, pool, cache.Blocks, headBlock, poolBlocks); err != nil {
		return nil, err
	}
	// Block tables and residuals, one per rotated set; lengths, q and out.
	res := repeatTo(kernels.ResidualOrder(cfg.Kernel, f, cache.ResK, false), pt.B)
	resV := repeatTo(kernels.ResidualOrder(cfg.Kernel, f, cache.ResV, true), pt.B)
	hostTables := rotatedTables(r, sets, pt.B, maxBlocks, cfg.Paged)
	tables := make([]cuda.DevicePtr, sets)
	resKs, resVs := make([]cuda.DevicePtr, sets), make([]cuda.DevicePtr, sets)
	for s := range sets {
		if tables[s], err = a.upload(cuda.Bytes(hostTables[s])); err != nil {
			return nil, err
		}
		if resKs[s], err = a.upload(cuda.Bytes(res)); err != nil {
			return nil, err
		}
		if resVs[s], err = a.upload(cuda.Bytes(resV)); err != nil {
			return nil, err
		}
	}
	lensPtr, err := a.upload(cuda.Bytes(sameLens(pt.B, l)))
	if err != nil {
		return nil, err
	}
	qh := queriesFP16(r, k, sh, pt.B)
	nq := len(qh)
	qPtr, err := a.upload(cuda.Bytes(qh))
	if err != nil {
		return nil, err
	}
	outPtr, err := a.alloc(nq * 2)
	if err != nil {
		return nil, err
	}
	shape := kernels.DecodeShape{B: pt.B, Hq: sh.Hq, Hkv: sh.Hkv, Tq: 1, MaxBlocks: maxBlocks, MaxL: l, Softcap: cfg.Softcap}
	if cfg.BatchInvariant {
		shape.SplitLen, shape.SplitCap, shape.SplitMax = gpukv.BatchInvariantSplits(nr)
	}
	plan, err := kernels.PlanDecodeWith(dev, cfg.Kernel, lay, shape, cfg.GPU.Tuning.Decode)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	var us float64
	err = dev.Do(func(c *cuda.Ctx) (err error) {
		us, err = c.MedianUS(dev.Stream(), gpuWarmups, gpuRuns, func(i int) error {
			s := i % sets
			return plan.Launch(c, dev.Stream(), kernels.DecodeBuffers{Pool: pool, BlockTable: tables[s], ResK: resKs[s], ResV: resVs[s],
				Lens: lensPtr, Q: qPtr, Out: outPtr}, 0)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if cfg.GPU.Tuning.Decode.Timeline {
		// Session 19: where the last launches' time went, CTA by CTA.
		if err := printTimeline(cfg.Progress, f.Spec.String(), pt, plan.Timeline); err != nil {
			return nil, err
		}
		if err := appendTimelineCSV(cfg.GPU.Tuning.Decode.TimelineCSV, f.Spec.String(), pt, plan.Timeline); err != nil {
			return nil, err
		}
	}
	packUS := 0.0
	if cfg.Kernel != kernels.DecodeV1 {
		if packUS, err = timePack(dev, f, cfg.GPU.Tuning.Pack, resKs[0], resVs[0], pt.B*sh.Hkv, a.alloc); err != nil {
			return nil, fmt.Errorf("pack: %w", err)
		}
	}
	bytes := int64(pt.B)*int64(sh.Hkv)*f.ReadBytes(l) + int64(2*nq*2)
	_, splits := plan.SplitLen()
	kname := cfg.Kernel.String()
	if cfg.Kernel == kernels.DecodeAuto {
		kname = "auto:" + plan.Kernel().String()
	}
	if plan.QK8() {
		kname += "+qk8" // decode_mma.cu's scores on int8 tensor cores (v2.8)
	}
	if plan.LA() {
		kname += "+la" // decode_mma.cu's look-ahead refold (v2.24)
	}
	row = &GPURow{Kernel: kname, AttnRow: AttnRow{Device: "cuda", Format: f.Spec.String(), B: pt.B, L: pt.L, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
		TimeUS: us, BytesRead: bytes, GBps: float64(bytes) / us / 1e3, BytesPerToken: f.BytesPerToken(), BitsPerElem: f.BitsPerElement(), Softcap: cfg.Softcap},
		Splits: splits, ResidualLen: l % nr, Paged: cfg.Paged, KernelErr: -1, PackUS: packUS}
	if l <= gpuErrCheckTokens {
		// The last run used set (gpuWarmups+gpuRuns-1)%sets.
		tbl := hostTables[(gpuWarmups+gpuRuns-1)%sets]
		if row.KernelErr, err = checkDecode(dev, outPtr, qh, cache, tbl[:nBlocks], l, f, sh, cfg.Softcap); err != nil {
			return nil, err
		}
	}
	return row, nil
}

// checkDecode returns the largest error of sequence 0's output at out
// against the float64 reference over the values the kernel read: table's
// pool blocks (pool block j holds prototype j mod gpuPrototypes of cache)
// and cache's residual, l tokens in all.
func checkDecode(dev *cuda.Device, out cuda.DevicePtr, qh []uint16, cache *attn.Cache, table []int32, l int, f kv.Format, sh attn.Shape, softcap float32) (float64, error) {
	got := make([]uint16, len(qh))
	if err := dev.DtoH(cuda.Bytes(got), out); err != nil {
		return 0, err
	}
	seq := &attn.Seq{ResK: cache.ResK, ResV: cache.ResV, ResLen: l % f.Residual}
	for _, b := range table {
		seq.Blocks = append(seq.Blocks, cache.Blocks[int(b)%gpuPrototypes])
	}
	q0 := fp16ToFloat32s(qh[:sh.Hq*sh.D])
	want := make([]float32, len(q0))
	if _, err := attn.Reference(want, q0, []*attn.Seq{seq}, attn.Params{Format: f, Shape: sh, Tq: 1, Softcap: softcap}); err != nil {
		return 0, err
	}
	return maxAbsErrFP16(got, want), nil
}

// repeatTo returns B copies of proto back to back.
func repeatTo(proto []uint16, B int) []uint16 {
	out := make([]uint16, B*len(proto))
	for i := range out {
		out[i] = proto[i%len(proto)]
	}
	return out
}

// fp16ToFloat32s widens fp16 values.
func fp16ToFloat32s(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, x := range h {
		f[i] = half.ToFloat32(x)
	}
	return f
}

// maxAbsErrFP16 returns the largest |got - want| over want's elements,
// got in fp16; a NaN in got counts as +Inf.
func maxAbsErrFP16(got []uint16, want []float32) float64 {
	var m float64
	for i := range want {
		d := math.Abs(float64(half.ToFloat32(got[i])) - float64(want[i]))
		if d != d {
			d = math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// timePack returns the median time to pack heads full residual blocks
// (resK/resV in kv.MMA order) into fresh blocks with the GPU packer.
func timePack(dev *cuda.Device, f kv.Format, t kernels.PackTuning, resK, resV cuda.DevicePtr, heads int, alloc func(int) (cuda.DevicePtr, error)) (float64, error) {
	plan, err := kernels.PlanPackWith(dev, f, t)
	if err != nil {
		return 0, err
	}
	dst, err := alloc(heads * f.BlockBytes())
	if err != nil {
		return 0, err
	}
	var us float64
	err = dev.Do(func(c *cuda.Ctx) (err error) {
		us, err = c.MedianUS(dev.Stream(), gpuWarmups, gpuRuns/2, func(int) error {
			return plan.Launch(c, dev.Stream(), resK, resV, dst, heads)
		})
		return err
	})
	return us, err
}

// SDPARecord is one row of bench/anchors/sdpa_decode.py's JSON.
type SDPARecord struct {
	B        int     `json:"B"`
	L        int     `json:"L"`
	Hq       int     `json:"Hq"`
	Hkv      int     `json:"Hkv"`
	D        int     `json:"D"`
	FlashUS  float64 `json:"flash_us"`
	CudnnUS  float64 `json:"cudnn_us"`
	BestUS   float64 `json:"best_us"`
	MaxAbsEr float64 `json:"max_abs_err"`
}

// AttachSDPA reads the anchor's JSON and fills each row's SDPA time and speedup.
func (rep *GPUReport) AttachSDPA(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var recs []SDPARecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep.SDPA = recs
	for i := range rep.Rows {
		r := &rep.Rows[i]
		for _, s := range recs {
			if s.B == r.B && s.L == r.L && s.Hq == r.Hq && s.Hkv == r.Hkv && s.D == r.D && s.BestUS > 0 {
				r.SDPAUS, r.SpeedupSDPA = s.BestUS, s.BestUS/r.TimeUS
			}
		}
	}
	return nil
}

// WriteTable prints the GPU report as Markdown.
func (rep *GPUReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "GPU decode attention, %s, %s; read ceiling %.0f GB/s (16-byte streaming probe, same run)\n\n", rep.Device, rep.Date, rep.ReadGBps)
	fmt.Fprintln(w, "| format | B | L | Hq/Hkv/D | res | splits | time us | bytes read | GB/s | of ceiling | SDPA fp16 us | vs SDPA | max err vs f64 ref | pack us (all B) | vs fp16 kernel |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		sdpa, sp := "-", "-"
		if r.SDPAUS > 0 {
			sdpa, sp = fmt.Sprintf("%.1f", r.SDPAUS), fmt.Sprintf("%.2fx", r.SpeedupSDPA)
		}
		e := "-"
		if r.KernelErr >= 0 {
			e = fmt.Sprintf("%.1e", r.KernelErr)
		}
		pg := ""
		if r.Paged {
			pg = " paged"
		}
		pk := "-"
		if r.PackUS > 0 {
			pk = fmt.Sprintf("%.1f (%.0f%%)", r.PackUS, 100*r.PackUS/r.TimeUS)
		}
		vs := "-"
		if r.SpeedupFP16 > 0 {
			vs = fmt.Sprintf("%.2fx (fp16 %.1f us, reads %.0f%%; H2O bookkeeping %.1f%%: mass %.1f us on 1 step in %d (%.1f%% per step), GPU re-tier per period %.1f us per layer of 32 (one layer alone %.1f us, v2 %.1f us))",
				r.SpeedupFP16, r.FP16US, 100*r.Planes.ReadVsFP16, 100*r.Planes.BookkeepingShare, r.Planes.MassUS, r.Planes.MassEvery, 100*r.Planes.MassShare,
				r.Planes.RetierLayersUS, r.Planes.RetierUS, r.Planes.RetierV2US)
		}
		fmt.Fprintf(w, "| %s %s%s | %d | %d | %d/%d/%d | %d | %d | %.1f | %s | %.0f | %.1f%% | %s | %s | %s | %s | %s |\n", r.Kernel, r.Format, pg, r.B, r.L,
			r.Hq, r.Hkv, r.D, r.ResidualLen, r.Splits, r.TimeUS, mib(r.BytesRead), r.GBps, 100*r.FracCeiling, sdpa, sp, e, pk, vs)
	}
}

// WriteJSON writes the report as indented JSON.
func (rep *GPUReport) WriteJSON(path string) error {
	return writeJSON(path, rep)
}

// fillPool writes the prototype blocks (gpuPrototypes of headBlock bytes,
// concatenated from blocks) to the start of pool, then doubles the filled
// prefix on the device until poolBlocks blocks hold copies of them: pool
// block j holds prototype j mod gpuPrototypes.
func fillPool(dev *cuda.Device, pool cuda.DevicePtr, blocks [][]byte, headBlock, poolBlocks int) error {
	protos := make([]byte, 0, gpuPrototypes*headBlock)
	for _, b := range blocks {
		protos = append(protos, b...)
	}
	if err := dev.HtoD(pool, protos[:min(len(protos), poolBlocks*headBlock)]); err != nil {
		return err
	}
	return dev.Do(func(c *cuda.Ctx) error {
		for filled := min(gpuPrototypes, poolBlocks); filled < poolBlocks; {
			n := min(filled, poolBlocks-filled)
			if err := c.DtoD(pool+cuda.DevicePtr(filled*headBlock), pool, n*headBlock); err != nil {
				return err
			}
			filled += n
		}
		return nil
	})
}

// GPUOptions are the CUDA backend's settings, the kernels' tuning among
// them (backend/gpu.Options).
type GPUOptions = gpu.Options

// GPUSettings reads the GPU settings (BITDECODE_*, docs/gpu.md) through
// lookup: os.LookupEnv at the program's edge.
func GPUSettings(lookup func(string) (string, bool)) (GPUOptions, error) {
	return gpu.ParseOptions(lookup)
}

// printTimeline prints the summary of a plan's last timed launches
// (kernels.SummarizeTimeline) under a header naming the row, when w is not
// nil and the plan recorded any.
func printTimeline(w io.Writer, spec string, pt Point, timeline func() ([]kernels.TimelineLaunch, error)) error {
	if w == nil {
		return nil
	}
	launches, err := timeline()
	if err != nil || len(launches) == 0 {
		return err
	}
	fmt.Fprintf(w, "\ntimeline %s B=%d L=%d:\n", spec, pt.B, pt.L)
	kernels.SummarizeTimeline(w, launches)
	kernels.SummarizeSMs(w, launches)
	return nil
}

// appendTimelineCSV appends the plan's last timed launches, CTA by CTA
// (kernels.WriteTimelineCSV, labelled spec:BxL), to the file path, when
// path is not empty (session 26).
func appendTimelineCSV(path, spec string, pt Point, timeline func() ([]kernels.TimelineLaunch, error)) error {
	if path == "" {
		return nil
	}
	launches, err := timeline()
	if err != nil || len(launches) == 0 {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := kernels.WriteTimelineCSV(f, fmt.Sprintf("%s:%dx%d", spec, pt.B, pt.L), launches); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

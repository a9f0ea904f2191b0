package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
)

// Point is one (batch, context) cell of the benchmark grid.
type Point struct{ B, L int }

// CPUGrid is BENCHMARKS.md's protocol scaled to a small CPU machine;
// CPUQuickGrid runs in well under a minute on two cores.
var (
	CPUGrid      = []Point{{1, 8192}, {1, 32768}, {8, 8192}, {4, 32768}}
	CPUQuickGrid = []Point{{1, 4096}, {1, 16384}}
)

// DefaultFormats are the formats of the protocol (fp16, int8, int4 KC and
// KT, int2, k4v2).
var DefaultFormats = []string{"fp16", "int8", "int4", "int4:kt128", "int2", "k4v2"}

// MainShape is the protocol's main row: Llama-3-8B attention.
var MainShape = attn.Shape{Hq: 32, Hkv: 8, D: 128}

// AttnConfig configures an attention benchmark.
type AttnConfig struct {
	Formats []string
	Grid    []Point
	Shape   attn.Shape
	Reps    int // timed runs per row (median reported)
	// Softcap is the attention scores' soft-cap c (attn.Params.Softcap;
	// 0: none): every format's row runs with it and its error column is
	// against attn.Reference with the cap on sequence 0's stored values;
	// the fp32 baseline row runs without (attn.DecodeF32 has no cap).
	Softcap float32
	// MinSeconds is the least time a row's timed runs take together: more
	// runs are added until they do. RunAttnCPU sets DefaultCPUMinSeconds
	// when Reps is left 0 (the protocol's rows); 0 with Reps set runs Reps.
	MinSeconds float64
	// Progress receives one line per row as it is measured (nil: quiet).
	Progress io.Writer
}

// AttnRow is one measured row.
type AttnRow struct {
	Device    string  `json:"device"`
	Format    string  `json:"format"`
	B         int     `json:"B"`
	L         int     `json:"L"`
	Hq        int     `json:"Hq"`
	Hkv       int     `json:"Hkv"`
	D         int     `json:"D"`
	TimeUS    float64 `json:"time_us"`
	BytesRead int64   `json:"bytes_read"`
	GBps      float64 `json:"gb_per_s"`
	// FracCeiling is GBps over the read bandwidth measured in the same run.
	FracCeiling float64 `json:"frac_of_read_ceiling"`
	// Speedup is the fp32 baseline's time over this row's time.
	Speedup float64 `json:"speedup_vs_fp32"`
	// MaxAbsErr is the largest error against float64 attention on the
	// unquantized K/V (sequence 0), i.e. the format's own error.
	MaxAbsErr     float64 `json:"max_abs_err_vs_f64"`
	BytesPerToken float64 `json:"kv_bytes_per_token_per_head"`
	BitsPerElem   float64 `json:"bits_per_element"`
	// OtherCores is the cores' worth of CPU time other processes took
	// while the row was timed (CPU rows on Linux; 0 elsewhere): a row
	// timed beside another process's work reads up to 2x its cycles on a
	// 2-core machine (BusyOtherCores).
	OtherCores float64 `json:"other_cores,omitempty"`
	// Softcap is the attention soft-cap the row ran with (0: none).
	Softcap float32 `json:"softcap,omitempty"`
}

// jsonNum returns x, or 0 for NaN (which JSON cannot hold).
func jsonNum(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// AttnReport is the result of RunAttnCPU.
type AttnReport struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Threads int    `json:"threads"`
	// ReadGBps is the read ceiling every row's FracCeiling is taken
	// against: the higher of the two probes, ReadBeforeGBps (before the
	// rows) and ReadAfterGBps (after them). On a shared VM one probe can
	// catch a busy minute and read 30% low; the higher is the bandwidth
	// the machine showed it can deliver during the run.
	ReadGBps       float64 `json:"read_ceiling_gb_per_s"`
	ReadBeforeGBps float64 `json:"read_before_gb_per_s"`
	ReadAfterGBps  float64 `json:"read_after_gb_per_s"`
	ReadGBps1T     float64 `json:"read_one_thread_gb_per_s"`
	// ReadBeforeOther and ReadAfterOther are the cores' worth of CPU time
	// other processes took during each two-thread probe (OtherCores; 0
	// where the system does not say).
	ReadBeforeOther float64   `json:"read_before_other_cores,omitempty"`
	ReadAfterOther  float64   `json:"read_after_other_cores,omitempty"`
	Rows            []AttnRow `json:"rows"`
	BaselineRows    []AttnRow `json:"fp32_rows"`
}

// DefaultCPUReps is RunAttnCPU's timed runs per row when AttnConfig.Reps
// is 0. With 5, the medians of the same binary moved by up to 1.6x between
// runs minutes apart on a shared 2-core VM; 15 steadies them
// (docs/perf/cpu-attention.md, session 3).
const DefaultCPUReps = 15

// DefaultCPUMinSeconds is the least time a row's timed runs take in the
// protocol (Reps left 0): 15 calls of int2 at (1, 32K) take ~17 ms, and the
// VM's two cores together run at a speed that changes in windows of
// ~0.1-0.5 s (1.1-2x a pair's cycles with two threads, little with one; 2x
// more often just after timeIt's collection), so a 17 ms row read one
// window, 30.1 to 60.7 cycles a pair and core, where round 9's program,
// the median of 300 calls (~0.33 s), read 30.3 to 39.3 in the same minutes
// (docs/perf/cpu-attention.md, round 16). The fp32 rows take longer anyway.
const DefaultCPUMinSeconds = 0.3

// RunAttnCPU measures CPU decode attention (one query token per sequence)
// for every format and grid point, plus the fp32 baseline, and this
// machine's read bandwidth in the same run (before and after the rows;
// AttnReport.ReadGBps).
func RunAttnCPU(cfg AttnConfig) (*AttnReport, error) {
	if cfg.Reps <= 0 {
		cfg.Reps = DefaultCPUReps
		if cfg.MinSeconds == 0 {
			cfg.MinSeconds = DefaultCPUMinSeconds
		}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep := &AttnReport{Date: time.Now().UTC().Format("2006-01-02"), Machine: machineName(), Threads: runtime.GOMAXPROCS(0)}
	fmt.Fprintf(progress, "measuring read bandwidth (%d threads)...\n", rep.Threads)
	rep.ReadBeforeGBps, rep.ReadBeforeOther = readBandwidthOther()
	rep.ReadGBps = rep.ReadBeforeGBps // the progress lines' ceiling until the second probe
	rep.ReadGBps1T = ReadBandwidth(1<<30, 1, 3)
	fmt.Fprintf(progress, "read bandwidth: %.1f GB/s (%d threads), %.1f GB/s (1 thread)\n", rep.ReadGBps, rep.Threads, rep.ReadGBps1T)
	sh := cfg.Shape
	for _, pt := range cfg.Grid {
		r := rand.New(rand.NewPCG(uint64(pt.B), uint64(pt.L)))
		keys, vals := make([][]float32, pt.B), make([][]float32, pt.B)
		for b := range keys {
			keys[b], vals[b] = kvtest.KeysValues(r, pt.L, sh.Hkv, sh.D)
		}
		q := syntheticQ(r, keys, sh)
		exact := make([]float32, sh.Hq*sh.D)
		attn.ExactReference(exact, q[:sh.Hq*sh.D], keys[:1], vals[:1], sh, 1, 0)

		out := make([]float32, len(q))
		base := timeIt(cfg.Reps, cfg.MinSeconds, func() {
			if err := attn.DecodeF32(out, q, keys, vals, sh, 1, 0); err != nil {
				panic(err)
			}
		})
		fp32Bytes := int64(pt.B*pt.L*sh.Hkv*sh.D*2*4) + int64(2*len(q)*4)
		baseRow := AttnRow{Device: "cpu", Format: "fp32 (baseline)", B: pt.B, L: pt.L, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
			TimeUS: base * 1e6, BytesRead: fp32Bytes, Speedup: 1, MaxAbsErr: maxAbsDiff(out[:len(exact)], exact),
			BytesPerToken: float64(2 * sh.D * 4), BitsPerElem: 32}
		baseRow.GBps = float64(fp32Bytes) / base / 1e9
		baseRow.FracCeiling = baseRow.GBps / rep.ReadGBps
		rep.BaselineRows = append(rep.BaselineRows, baseRow)
		fmt.Fprintf(progress, "%s\n", rowLine(baseRow))

		for _, spec := range cfg.Formats {
			f, err := kv.MustParseSpec(spec).Resolve(sh.D)
			if err != nil {
				return nil, err
			}
			if f.Planes.On {
				if cfg.Softcap != 0 {
					return nil, fmt.Errorf("%s: the bit-plane decode has no soft-cap (attn.Params.Softcap)", spec)
				}
				row, err := runPlanesCPU(f, sh, pt, keys, vals, q, exact, base, cfg.Reps, cfg.MinSeconds)
				if err != nil {
					return nil, fmt.Errorf("%s B=%d L=%d: %w", spec, pt.B, pt.L, err)
				}
				row.FracCeiling = row.GBps / rep.ReadGBps
				rep.Rows = append(rep.Rows, row)
				fmt.Fprintf(progress, "%s\n", rowLine(row))
				continue
			}
			seqs := make([]*attn.Seq, pt.B)
			var bytesRead int64
			for b := range seqs {
				c, err := attn.NewCache(f, sh)
				if err != nil {
					return nil, err
				}
				if err := c.Append(keys[b], vals[b]); err != nil {
					return nil, err
				}
				seqs[b] = &c.Seq
				bytesRead += f.ReadBytes(pt.L) * int64(sh.Hkv)
			}
			bytesRead += int64(2 * len(q) * 4)
			p := attn.Params{Format: f, Shape: sh, Tq: 1, Softcap: cfg.Softcap}
			want := exact
			if cfg.Softcap != 0 {
				want = make([]float32, sh.Hq*sh.D)
				ref := attn.Params{Format: f, Shape: sh, Tq: 1, Softcap: cfg.Softcap}
				if _, err := attn.Reference(want, q[:sh.Hq*sh.D], seqs[:1], ref); err != nil {
					return nil, err
				}
			}
			sec, other := timeItOther(cfg.Reps, cfg.MinSeconds, func() {
				if err := attn.Decode(out, q, seqs, p); err != nil {
					panic(err)
				}
			})
			row := AttnRow{Device: "cpu", Format: f.Spec.String(), B: pt.B, L: pt.L, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
				TimeUS: sec * 1e6, BytesRead: bytesRead, GBps: float64(bytesRead) / sec / 1e9,
				Speedup: base / sec, MaxAbsErr: maxAbsDiff(out[:len(want)], want),
				BytesPerToken: f.BytesPerToken(), BitsPerElem: f.BitsPerElement(), OtherCores: jsonNum(other), Softcap: cfg.Softcap}
			row.FracCeiling = row.GBps / rep.ReadGBps
			rep.Rows = append(rep.Rows, row)
			fmt.Fprintf(progress, "%s\n", rowLine(row))
		}
	}
	fmt.Fprintf(progress, "measuring read bandwidth again (%d threads)...\n", rep.Threads)
	rep.ReadAfterGBps, rep.ReadAfterOther = readBandwidthOther()
	rep.ReadGBps = max(rep.ReadBeforeGBps, rep.ReadAfterGBps)
	for _, rows := range [][]AttnRow{rep.Rows, rep.BaselineRows} {
		for i := range rows {
			rows[i].FracCeiling = rows[i].GBps / rep.ReadGBps
		}
	}
	return rep, nil
}

// readBandwidthOther runs the two-thread read probe (fastest of 5 passes
// over 1 GiB) and returns its GB/s and the cores' worth of CPU time other
// processes took meanwhile (jsonNum of otherCores).
func readBandwidthOther() (gbps, other float64) {
	c0, w0 := readCPU(), time.Now()
	gbps = ReadBandwidth(1<<30, 0, 5)
	return gbps, jsonNum(otherCores(c0, readCPU(), time.Since(w0).Seconds()))
}

// TargetScoreStd is the standard deviation of the synthetic attention
// scores q·k/sqrt(D): real models' scores spread over a few units; random
// queries against outlier-heavy keys would make softmax one-hot instead.
const TargetScoreStd = 2.5

// syntheticQ draws [B][Hq][D] queries, each scaled so its scores against
// the first tokens of its sequence have a standard deviation of
// TargetScoreStd.
func syntheticQ(r *rand.Rand, keys [][]float32, sh attn.Shape) []float32 {
	d := sh.D
	q := make([]float32, len(keys)*sh.Hq*d)
	for b := range keys {
		l := len(keys[b]) / (sh.Hkv * d)
		for hq := 0; hq < sh.Hq; hq++ {
			row := q[(b*sh.Hq+hq)*d : (b*sh.Hq+hq+1)*d]
			for c := range row {
				row[c] = float32(r.NormFloat64())
			}
			h := hq / sh.Group()
			var s1, s2 float64
			n := min(l, 256)
			for t := 0; t < n; t++ {
				var s float64
				for c := range row {
					s += float64(row[c]) * float64(keys[b][(t*sh.Hkv+h)*d+c])
				}
				s /= math.Sqrt(float64(d))
				s1, s2 = s1+s, s2+s*s
			}
			std := math.Sqrt(max(s2/float64(n)-(s1/float64(n))*(s1/float64(n)), 1e-12))
			for c := range row {
				row[c] *= float32(TargetScoreStd / std)
			}
		}
	}
	return q
}

// timeIt runs fn once to warm up, then reps times, and more until the
// timed runs add up to minSec (DefaultCPUMinSeconds), and returns the
// median in seconds. A garbage collection first finishes the collector's work on
// the row's set-up (the caches just built, the previous rows' garbage):
// started by those allocations, its mark phase ran beside the timed calls
// on one of the two cores (int2 at (8, 8K) 4.0-4.5 ms with it, 3.2 ms
// with GOGC=off; docs/perf/cpu-attention.md, round 4). The freed memory
// is then returned to the system at once (debug.FreeOSMemory): left to the
// background scavenger, its madvise calls ran beside the timed calls too
// (~500 MB of them during one (1, 32K) row: cpu-attention.md, round 11).
func timeIt(reps int, minSec float64, fn func()) float64 {
	sec, _ := timeItOther(reps, minSec, fn)
	return sec
}

// timeItOther is timeIt that also returns the cores' worth of CPU time
// other processes took during the timed runs (otherCores; NaN where the
// system does not say).
func timeItOther(reps int, minSec float64, fn func()) (sec, other float64) {
	runtime.GC()
	debug.FreeOSMemory()
	fn()
	t := make([]float64, 0, reps)
	var total float64
	c0, w0 := readCPU(), time.Now()
	for len(t) < reps || total < minSec {
		start := time.Now()
		fn()
		t = append(t, time.Since(start).Seconds())
		total += t[len(t)-1]
	}
	other = otherCores(c0, readCPU(), time.Since(w0).Seconds())
	sort.Float64s(t)
	return t[len(t)/2], other
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i] - b[i]))
		if d != d {
			return math.NaN()
		}
		m = max(m, d)
	}
	return m
}

func rowLine(r AttnRow) string {
	s := fmt.Sprintf("  %-22s B=%-3d L=%-6d %10.1f us %7.2f GB/s %5.1f%% of read  %5.2fx fp32  err %.2e",
		r.Format, r.B, r.L, r.TimeUS, r.GBps, 100*r.FracCeiling, r.Speedup, r.MaxAbsErr)
	if r.OtherCores > 0 {
		s += fmt.Sprintf("  other procs %.2f cores", r.OtherCores)
	}
	return s
}

// WriteTable prints the report as a Markdown table.
func (rep *AttnReport) WriteTable(w io.Writer) {
	sh := MainShape
	if len(rep.Rows) > 0 { // the shape the rows ran (AttnConfig.Shape)
		sh = attn.Shape{Hq: rep.Rows[0].Hq, Hkv: rep.Rows[0].Hkv, D: rep.Rows[0].D}
	}
	fmt.Fprintf(w, "CPU decode attention, %s, %d threads, Hq=%d Hkv=%d D=%d, %s\n", rep.Machine, rep.Threads,
		sh.Hq, sh.Hkv, sh.D, rep.Date)
	fmt.Fprintf(w, "read ceiling (streaming read with the widest loads, fastest of 5 passes over 1 GiB, same run): %.1f GB/s (%d threads; the higher of %.1f before the rows and %.1f after), %.1f GB/s (1 thread)\n\n", rep.ReadGBps, rep.Threads, rep.ReadBeforeGBps, rep.ReadAfterGBps, rep.ReadGBps1T)
	fmt.Fprintln(w, "| format | B | L | bits/elem | time us | bytes read | GB/s | of read ceiling | vs fp32 | max abs err vs f64 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	all := append(append([]AttnRow(nil), rep.BaselineRows...), rep.Rows...)
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].L != all[j].L {
			return all[i].L < all[j].L
		}
		return all[i].B < all[j].B
	})
	for _, r := range all {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.0f | %s | %.2f | %.1f%% | %.2fx | %.1e |\n", r.Format, r.B, r.L, r.BitsPerElem,
			r.TimeUS, mib(r.BytesRead), r.GBps, 100*r.FracCeiling, r.Speedup, r.MaxAbsErr)
	}
	for _, p := range []struct {
		name  string
		other float64
	}{{"before the rows", rep.ReadBeforeOther}, {"after the rows", rep.ReadAfterOther}} {
		if p.other >= BusyOtherCores {
			fmt.Fprintf(w, "\nThe read probe %s ran beside other processes' work (%.2f cores of %d): it reads low.\n", p.name, p.other, rep.Threads)
		}
	}
	for _, r := range all {
		if r.OtherCores >= BusyOtherCores {
			fmt.Fprintf(w, "\n%s B=%d L=%d was timed beside other processes' work (%.2f cores of %d): its time reads high.\n",
				r.Format, r.B, r.L, r.OtherCores, rep.Threads)
		}
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// WriteJSON writes the report as indented JSON to path.
func (rep *AttnReport) WriteJSON(path string) error {
	return writeJSON(path, rep)
}

// writeJSON writes v as indented JSON to path: every report's WriteJSON.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func machineName() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) > 10 && line[:10] == "model name" {
				for i := range line {
					if line[i] == ':' {
						return strings.TrimSpace(line[i+1:])
					}
				}
			}
		}
	}
	return runtime.GOARCH
}

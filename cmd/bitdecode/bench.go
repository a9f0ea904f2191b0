package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/kv"
)

var benchCmd = &command{
	name:    "bench",
	usage:   "[attn] [--device auto|cpu|cuda] [--quick] [--kv SPEC,...] [--grid BxL,...] [--heads N --kv-heads N --head-dim D] [--softcap C] [--simd LEVEL] [--json FILE] | e2e [flags] | model [flags] | gemv [flags] | gemvq [flags] | dec [flags] | linear [flags] | moe [flags]",
	summary: "benchmark decode attention per KV format (attn), whole generation on a model (e2e), model decode steps on the GPU (model), the fp16 linear kernels (gemv), the low-bit weight GEMV (gemvq), DEC on the GPU (dec), the CPU's linear layers and decode step (linear), or a mixture-of-experts layer on the GPU (moe)",
	help: `Measures one decode step of attention (one new query token per sequence) over
a cache of L tokens for each format and each (batch B, context L) grid point,
on Llama-3-8B attention shapes (Hq=32, Hkv=8, D=128; on the CPU --heads,
--kv-heads and --head-dim time another shape, --simd a lower SIMD level),
and this machine's read bandwidth in the same run. Each row reports the
median time, the bytes the step actually reads (packed K/V, scales, fp16
residual, Q and O), the achieved GB/s,
its fraction of the measured read ceiling (on the CPU probed before and after
the rows, the higher taken), the speedup over the fp32 baseline,
and the largest error against float64 attention on the unquantized K/V.
On Linux the CPU rows and probes also say how many cores' worth of CPU time
other processes took while they ran; those at a quarter of a core or more are
listed under the table, since on a small machine they read up to 2x slow.

The synthetic K has per-channel offsets and a few outlier channels (x10-x50)
like real keys; queries are scaled so scores have a realistic spread.

Bit-plane formats (--kv bw:...) run the planes kernel (tensor cores, or CUDA
cores with --kernel v1) with every sequence's tokens tiered by the H2O
policy over random attention masses (the spec's shares, sinks and window):
rows report the bytes actually read (planes and tier index), and on the GPU
the fp16 kernel's time at the same point and the speedup over it. With only
bw formats the GPU grid is issue #8's (1x8K 1x32K 1x128K 16x8K 16x32K 64x8K
128x8K).

'bench e2e' generates greedily from --prompt with each KV format in --kv on
a model (--model DIR, or the embedded default model) and prints prefill and
decode speed, the KV memory of the sequence and of one filling the context
next to the first format's, and how many tokens agree with it. By default
it fills the model's context; --quick generates 256 tokens. --tp N runs it
on N GPUs (tensor parallelism, as 'bitdecode help run' says).

'bench model' times whole decode steps of a model with random weights on the
GPU against the bytes floor, on one GPU or with --tp N on N ('bitdecode
bench model --help').

'bench dec' times dynamic error compensation on the GPU per layer shape,
k_chunk and n_tb, with the zero-copy read rate ('bitdecode bench dec --help').

'bench linear' times the CPU backend's linear layers (prefill GFLOP/s against
the measured fp32 peak, decode GEMV GB/s against the read ceiling) and whole
decode steps of a model against their bytes floor ('bitdecode bench linear
--help').

'bench moe' times one mixture-of-experts layer (Mixtral-8x7B's and
Qwen3-30B-A3B's shapes) on the GPU for T tokens, fp16 and packed experts,
routed on the device and on the host, against the chosen experts' bytes at
the read ceiling ('bitdecode bench moe --help').

examples:
  bitdecode bench --quick
  bitdecode bench attn --kv int4,int2 --grid 1x32768,8x8192 --json out.json
  bitdecode bench attn --device cuda --kv bw:h100,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40 --json bw.json
  bitdecode bench e2e --quick
  bitdecode bench model --preset llama-3.1-8b --ctx 32k,128k --kv fp16,int4,int2
  bitdecode bench model --preset llama-3.1-70b --tp 2 --ctx 32k --kv int4
  bitdecode bench dec --json dec.json
  bitdecode bench moe --tokens 1,16 --weights fp16,int4 --json moe.json`,
}

// gpuBenchFlags are the flags that apply to --device cuda only.
type gpuBenchFlags struct {
	residualFull   *bool
	paged          *bool
	anchor         *string
	kernel         *string
	batchInvariant *bool
}

func addGPUBenchFlags(fs *flag.FlagSet) gpuBenchFlags {
	return gpuBenchFlags{
		residualFull:   fs.Bool("residual-full", false, "cuda: cache L-1 tokens so the fp16 residual block holds Nr-1 (default: none)"),
		paged:          fs.Bool("paged", false, "cuda: scatter the KV blocks over the pool through a shuffled block table"),
		anchor:         fs.String("anchor", "", "cuda: JSON from bench/anchors/sdpa_decode.py measured in the same session, for the speedup column"),
		kernel:         fs.String("kernel", "auto", "cuda: decode kernel: auto (what the engine plans: the faster of mma and wgmma for each format and shape), mma (tensor cores, mma.sync), wgmma (Hopper: TMA ring + wgmma) or v1 (CUDA cores); a comma-separated list times them side by side"),
		batchInvariant: fs.Bool("batch-invariant", false, "cuda: plan as serve --batch-invariant's cache does (its default): each sequence split by its own length, the per-sequence kernel"),
	}
}

func benchFlags(fs *flag.FlagSet) (device *string, quick *bool, kvs, grid, jsonPath *string, reps *int) {
	device = fs.String("device", "cpu", "where to run: cpu, cuda, or auto (cuda when a driver is present)")
	quick = fs.Bool("quick", false, "a small grid that runs in under a minute on two cores")
	kvs = fs.String("kv", strings.Join(bench.DefaultFormats, ","), "comma-separated KV format specs ('bitdecode inspect kv' explains them)")
	grid = fs.String("grid", "", "comma-separated BxL points, e.g. 1x8192,8x8192 (default: the CPU protocol grid, or the quick grid)")
	jsonPath = fs.String("json", "", "also write the results as JSON to this file")
	reps = fs.Int("reps", 0, "timed runs per row on the CPU, median reported (default: at least 15 and as many more as 0.3 s of runs take; 3 with --quick; N runs exactly N)")
	fs.Int("heads", bench.MainShape.Hq, "cpu: query heads of the attention shape (the GQA group is heads / kv-heads)")
	fs.Int("kv-heads", bench.MainShape.Hkv, "cpu: KV heads of the attention shape")
	fs.Int("head-dim", bench.MainShape.D, "cpu: head dim of the attention shape ("+kv.HeadDimRule+")")
	fs.Float64("softcap", 0, "attention logit soft-cap c (Gemma 2's attn_logit_softcapping, 50): every score s becomes c·tanh(s/c) (0: none; bw formats have none); the CPU's fp32 baseline row runs without it")
	return
}

func init() {
	flagSets["bench"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		benchFlags(fs)
		addGPUBenchFlags(fs)
		e2e := flag.NewFlagSet("bench e2e", flag.ContinueOnError)
		addBenchE2EFlags(e2e)
		e2e.VisitAll(func(f *flag.Flag) {
			if fs.Lookup(f.Name) == nil {
				fs.Var(f.Value, f.Name, "e2e: "+f.Usage)
			}
		})
		return fs
	}
	benchCmd.run = runBench
	register(benchCmd)
}

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "model" {
		return runBenchModel(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "e2e" {
		return runBenchE2E(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "gemv" {
		return runBenchGEMV(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "gemvq" {
		return runBenchGEMVQ(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "dec" {
		return runBenchDEC(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "linear" {
		return runBenchLinear(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "moe" {
		return runBenchMoE(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "attn" {
		args = args[1:]
	}
	fs := newFlagSet(benchCmd, stdout)
	device, quick, kvs, grid, jsonPath, reps := benchFlags(fs)
	gf := addGPUBenchFlags(fs)
	simd := fs.String("simd", "", "cpu: SIMD level to run the decode at: generic, avx2 or avx512 (amd64), neon (arm64) (default: the CPU's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	shape := bench.MainShape
	for _, f := range []struct {
		name string
		dst  *int
	}{{"heads", &shape.Hq}, {"kv-heads", &shape.Hkv}, {"head-dim", &shape.D}} {
		if v := fs.Lookup(f.name); v != nil {
			*f.dst = v.Value.(flag.Getter).Get().(int)
		}
	}
	softcap := fs.Lookup("softcap").Value.(flag.Getter).Get().(float64)
	if !(softcap >= 0) || math.IsInf(softcap, 0) {
		return usageErrorf("--softcap %v: want 0 (none) or a finite cap > 0", softcap)
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (the benchmarks are attn, the default, e2e, model, gemv, gemvq, dec, linear and moe, which come first)", fs.Arg(0))
	}
	if err := checkDevice(*device); err != nil {
		return err
	}
	dev, err := backend.ResolveDevice(*device, stderr)
	if err != nil {
		return err
	}
	var formats []string
	for _, s := range strings.Split(*kvs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, err := parseSpecChecked(s); err != nil {
				return err
			}
			formats = append(formats, s)
		}
	}
	if dev == "cuda" && shape != bench.MainShape {
		return usageErrorf("--heads, --kv-heads and --head-dim: the CPU benchmark's (the GPU's runs %d/%d heads, head dim %d)", bench.MainShape.Hq, bench.MainShape.Hkv, bench.MainShape.D)
	}
	if dev == "cuda" {
		gcfg := bench.GPUConfig{Formats: formats, Grid: bench.GPUGrid, Shape: bench.MainShape,
			ResidualFull: *gf.residualFull, Paged: *gf.paged, BatchInvariant: *gf.batchInvariant, Progress: stderr, Softcap: float32(softcap)}
		if gcfg.GPU, err = bench.GPUSettings(lookupEnv); err != nil {
			return err
		}
		if gcfg.Kernels, err = bench.ParseDecodeKernels(*gf.kernel); err != nil {
			return usageErrorf("--kernel %q: want auto, mma, wgmma or v1, or a comma-separated list to time side by side", *gf.kernel)
		}
		gcfg.Kernel = gcfg.Kernels[0]
		allBW := true
		for _, s := range formats {
			allBW = allBW && kv.MustParseSpec(s).Planes.On
		}
		if allBW {
			gcfg.Grid = bench.BWGrid
		}
		if *grid != "" {
			if gcfg.Grid, err = parseGrid(*grid); err != nil {
				return err
			}
		}
		rep, err := bench.RunAttnGPU(gcfg)
		if err != nil {
			return err
		}
		if *gf.anchor != "" {
			if err := rep.AttachSDPA(*gf.anchor); err != nil {
				return err
			}
		}
		return writeReport(stdout, stderr, rep, *jsonPath)
	}
	if err := shape.Validate(); err != nil || !kv.HeadDimOK(shape.D) {
		return usageErrorf("--heads %d --kv-heads %d --head-dim %d: want query heads a multiple of the KV heads and a head dim %s", shape.Hq, shape.Hkv, shape.D, kv.HeadDimRule)
	}
	for _, s := range formats {
		if _, err := kv.MustParseSpec(s).Resolve(shape.D); err != nil {
			return usageErrorf("--kv %s at --head-dim %d: %v", s, shape.D, err)
		}
	}
	if *simd != "" {
		lvl, err := cpufeat.ParseLevel(*simd)
		if err != nil {
			return usageErrorf("--simd: %v", err)
		}
		got, restore := cpufeat.Force(lvl)
		defer restore()
		fmt.Fprintf(stdout, "simd level: %s (asked %s)\n", got, lvl)
	}
	cfg := bench.AttnConfig{Shape: shape, Reps: *reps, Progress: stderr, Formats: formats, Softcap: float32(softcap)}
	cfg.Grid = bench.CPUGrid
	if *quick {
		cfg.Grid = bench.CPUQuickGrid
		if cfg.Reps == 0 {
			cfg.Reps = 3
		}
	}
	if *grid != "" {
		if cfg.Grid, err = parseGrid(*grid); err != nil {
			return err
		}
	}
	rep, err := bench.RunAttnCPU(cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, stderr, rep, *jsonPath)
}

// report is what the bench commands print: a Markdown table, and JSON.
type report interface {
	WriteTable(w io.Writer)
	WriteJSON(path string) error
}

// writeReport prints rep's table after a blank line and, with a path,
// writes its JSON there and says so on stderr.
func writeReport(stdout, stderr io.Writer, rep report, jsonPath string) error {
	fmt.Fprintln(stdout)
	rep.WriteTable(stdout)
	if jsonPath != "" {
		if err := rep.WriteJSON(jsonPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", jsonPath)
	}
	return nil
}

func parseGrid(s string) ([]bench.Point, error) {
	var pts []bench.Point
	for _, p := range strings.Split(s, ",") {
		b, l, ok := strings.Cut(strings.TrimSpace(strings.ToLower(p)), "x")
		bi, err1 := strconv.Atoi(b)
		li, err2 := parseTokens(l)
		if !ok || err1 != nil || err2 != nil || bi < 1 || li < 1 {
			return nil, usageErrorf("grid point %q: want BxL such as 1x8192 or 8x32k", p)
		}
		pts = append(pts, bench.Point{B: bi, L: li})
	}
	return pts, nil
}

// parseTokens parses a token count with an optional k suffix (1024).
func parseTokens(s string) (int, error) {
	mult := 1
	if strings.HasSuffix(s, "k") {
		mult, s = 1024, strings.TrimSuffix(s, "k")
	}
	n, err := strconv.Atoi(s)
	return n * mult, err
}

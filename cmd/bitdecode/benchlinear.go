package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// benchLinearHelp is the help of 'bitdecode bench linear'.
const benchLinearHelp = `usage: bitdecode bench linear --model DIR [--formats F,...] [--rows T,...] [--kv SPEC,...] [--ctx L,...] [--threads N] [--simd LEVEL] [--steps S] [--json FILE]

Times the CPU backend's linear layers on the layer shapes of the model in DIR
for each weight format (bf16, fp16, fp32, int8: the checkpoint formats read
in place; wq-int8, wq-int4, wq-int3: the packed low-bit formats) and row count
T (1 is a decode step's GEMV, large T a prefill GEMM), weights rotated over
copies larger than the last-level cache. Then it times whole decode steps of
the model with each KV format at each context, split into linear layers,
attention and the rest. Every figure is judged against this machine's read
ceiling and fp32 peak (clock x SIMD width), measured in the same run.

example:
  bitdecode bench linear --model ../shared/models/gocoder-23m --rows 1,512 --kv fp16,int4 --ctx 1024,8192
`

func runBenchLinear(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench linear", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchLinearHelp) }
	dir := fs.String("model", "", "checkpoint directory (its config gives the shapes; its weights the decode steps)")
	formats := fs.String("formats", strings.Join(bench.LinearFormats, ","), "comma-separated weight formats for the layer timings (empty: none)")
	rows := fs.String("rows", "1,4,512", "comma-separated row counts T")
	kvs := fs.String("kv", "fp16,int4", "comma-separated KV formats for the decode steps (empty: no steps)")
	ctx := fs.String("ctx", "1024,8192", "comma-separated contexts (tokens in the cache) for the decode steps")
	threads := fs.Int("threads", 0, "goroutines per op (default GOMAXPROCS)")
	simd := fs.String("simd", "", "SIMD level to run at: generic, avx2 or avx512 (amd64), neon (arm64) (default: the CPU's)")
	steps := fs.Int("steps", 30, "timed decode steps per row (median reported)")
	reps := fs.Int("reps", 50, "timed calls per layer row (median reported)")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := resolveModel(dir, stderr, false); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if *dir == "" {
		return usageErrorf("--model DIR is required")
	}
	Ts, err := intList("--rows", *rows)
	if err != nil {
		return err
	}
	ctxs, err := intList("--ctx", *ctx)
	if err != nil {
		return err
	}
	var fl []string
	for _, f := range strings.Split(*formats, ",") {
		if f = strings.TrimSpace(f); f != "" {
			fl = append(fl, f)
		}
	}
	var specs []kv.Spec
	for _, s := range strings.Split(*kvs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sp, err := parseSpecChecked(s)
			if err != nil {
				return err
			}
			specs = append(specs, sp)
		}
	}
	if *simd != "" {
		lvl, err := cpufeat.ParseLevel(*simd)
		if err != nil {
			return usageErrorf("--simd: %v", err)
		}
		_, restore := cpufeat.Force(lvl)
		defer restore()
	}
	cfg, err := model.LoadConfig(*dir + "/config.json")
	if err != nil {
		return err
	}
	n := *threads
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	m := bench.MeasureCPU(n)
	fmt.Fprintf(stdout, "cpu: %d threads, %s, clock %.2f GHz, fp32 peak %.0f GFLOP/s, read ceiling %.1f GB/s\n", m.Threads, m.Level, m.ClockGHz, m.PeakGFLOPs, m.ReadCeilGBps)
	load, err := bench.LoadCPU(*dir, n, 5)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "load %s: %.1f ms (median of 5)\n", *dir, load.Seconds()*1e3)
	out := struct {
		LoadMs  float64              `json:"load_ms"`
		Machine bench.MachineCPU     `json:"machine"`
		Linear  []bench.LinearRowCPU `json:"linear"`
		Steps   []bench.StepRowCPU   `json:"steps"`
	}{LoadMs: load.Seconds() * 1e3, Machine: m}
	if len(fl) > 0 {
		if out.Linear, err = bench.LinearCPU(cfg, fl, Ts, n, *reps, m, stdout); err != nil {
			return err
		}
	}
	if len(specs) > 0 {
		if out.Steps, err = bench.StepCPU(*dir, specs, ctxs, n, *steps, m, stdout); err != nil {
			return err
		}
	}
	return writeJSON(*jsonPath, out)
}

// intList parses a comma-separated list of positive ints for flag name.
func intList(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, usageErrorf("%s %q: want positive integers", name, f)
		}
		out = append(out, v)
	}
	return out, nil
}

package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/model"
)

// benchGEMVHelp is the help of 'bitdecode bench gemv'.
const benchGEMVHelp = `usage: bitdecode bench gemv [--preset NAME] [--rows T,...] [--algos] [--variants] [--json FILE]

Times the GPU's fp16 linear layers on the shapes of a preset model, weights
cold in L2, at each row count T: linear.cu (the batch-invariant tensor-core
kernel; q/k/v and gate/up as one grouped launch each; with the backend's
launch settings, BITDECODE_BATCH_INVARIANT=1 and its knobs included),
gemv.cu (one launch per weight, T <= 8) and cuBLASLt (x to fp16, one GEMM per weight; for a
group also one GEMM over its weights joined in one allocation, then the
copy of each weight's columns to its output, as the backend runs it). Each
figure comes with its fraction of the read ceiling on the weight bytes,
measured in the same run. Each shape's one GEMM over all its channels
also prints the cuBLASLt algorithm GEMM chose, that GEMM's time alone (x
already fp16), and at T <= 128 skinny.cu's over the same weights (at its
split, with early weight loads, and at every split). With --algos GEMM's tuning
is on (the cuBLASLt columns run its choice; the backend runs the
heuristic's first) and every algorithm it considers is timed on that GEMM
alone. With --variants it times gemv.cu instead, at every split-K factor
and ring depth, on the launches a decode step makes at T <= 2 rows (o and
down alone, q|k|v with RoPE, gate|up with SwiGLU): one launch alone, and
per launch in a graph of programmatic dependents over weight copies, with
and without early weight loads; * marks the backend's choice. A tool for
kernel work (docs/perf/decode-step.md).

example:
  bitdecode bench gemv --rows 1,4,8,16,64,256
  bitdecode bench gemv --rows 1 --variants
`

func runBenchGEMV(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench gemv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchGEMVHelp) }
	preset := fs.String("preset", "llama-3.1-8b", "model shapes: "+strings.Join(bench.PresetNames(), ", "))
	rows := fs.String("rows", "1,4,8,16,64,256", "comma-separated row counts T")
	algos := fs.Bool("algos", false, "tune cuBLASLt GEMMs and time every algorithm the tuning considers")
	variants := fs.Bool("variants", false, "time gemv.cu's split-K factors and ring depths at T <= 2 instead")
	jsonPath := fs.String("json", "", "also write the rows as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	Ts, err := intList("--rows", *rows)
	if err != nil {
		return err
	}
	if len(Ts) == 0 {
		return usageErrorf("--rows: want at least one row count")
	}
	js, ok := bench.Presets[*preset]
	if !ok {
		return usageErrorf("--preset %q: have %s", *preset, strings.Join(bench.PresetNames(), ", "))
	}
	mc, err := model.ParseConfig([]byte(js))
	if err != nil {
		return err
	}
	if err := needGPU("bench gemv"); err != nil {
		return err
	}
	if *variants {
		for _, T := range Ts {
			if T < 1 || T > 2 {
				return usageErrorf("--variants: --rows %d: want 1 or 2", T)
			}
		}
		out, err := bench.SweepGEMVVariants(mc, Ts, stdout)
		if err != nil {
			return err
		}
		return writeJSON(*jsonPath, out)
	}
	gpuSettings, err := bench.GPUSettings(lookupEnv)
	if err != nil {
		return err
	}
	out, err := bench.SweepLinearF16(mc, Ts, *algos, gpuSettings, stdout)
	if err != nil {
		return err
	}
	return writeJSON(*jsonPath, out)
}

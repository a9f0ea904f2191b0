package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/model"
)

// benchGEMVQHelp is the help of 'bitdecode bench gemvq'.
const benchGEMVQHelp = `usage: bitdecode bench gemvq [--preset NAME] [--rows T] [--bits 4,3,8] [--shapes L,...] [--splits S,...] [--variants V;V;...] [--json FILE]
       bitdecode bench gemvq --diag [--diag-runs N] [--bits 4,8,3] [--preset NAME] [--shapes L,...] [--splits S,...] [--variants V;V;...] [--json FILE]

Times gemvq.cu (v2), at 1-2 rows gemvq3.cu (v3) and at one row gemvq4.cu
(v4), the decode GEMVs over packed low-bit weights, on the linear-layer
shapes of a preset model (weights cold in L2), alternated at every split
(warps per CTA; v3: per row group, 1, 2 or 4; v4: 1, 2, 4 or 8) and each
compile-time variant: a variant is a space-separated list of the knobs
(GEMVQ_PIPE, GEMVQ_UNROLL, GEMVQ_WARPS_SM, GEMVQ3_MIN_BLOCKS,
GEMVQ4_MIN_BLOCKS), variants are
separated by ';', and "" is the defaults. Each line gives the time, GB/s on
the packed bytes, the fraction of the read ceiling, and the kernel's
registers and local (spill) bytes. At one row, v8 is v6.1 (gemv_q5's LEAN
step) over each cold copy's tiled layout, packed on the device (int4,
int3 since session 15d, int8 since session 16), and v9 v6.2 (gemv_q7:
v6.1 with x split once a CTA, session 23; LaunchV6's default). A tool for
kernel work (docs/perf).

--diag times instead the int4 (or, with --bits 8, int8) forms of
gemvq4.cu's gemv_q5 that tell the access pattern from a kernel's fixed
cost (docs/perf/gemvq.md, sessions 15 and 16): v5.1, its copies alone
over wq's layout and over the tiled one, v6 (v5.1 over the tiled layout),
v5.2 and v6.1 (their LEAN step, session 15b), v4.1 (gemv_q4, int8's
route before session 16) and v6.2 (gemv_q7, session 23; int3, --bits 3:
v6.1 and v6.2 only), on gate/up, down and "gate/up x4" (four
times gate/up's rows), one launch a timed region and four back to back
(with and without early loads), for each variant of gemvq4.cu's knobs
(GEMVQ5_STAGES, GEMVQ5_MIN_BLOCKS; GEMVQ7_DEEP=n: v6.2's deepest ring n). --diag-runs 1 runs each point once, with
no warm-up and no back-to-back: for a profiler (ncu).

example:
  bitdecode bench gemvq --variants ';GEMVQ_PIPE=0;GEMVQ_UNROLL=8'
`

func runBenchGEMVQ(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench gemvq", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchGEMVQHelp) }
	preset := fs.String("preset", "llama-3.1-8b", "model shapes: "+strings.Join(bench.PresetNames(), ", "))
	rows := fs.Int("rows", 1, "rows of x (tokens), 1..16")
	bitsFlag := fs.String("bits", "4", "comma-separated code widths (3, 4, 8)")
	variants := fs.String("variants", "", "';'-separated variants of gemvq.cu's knobs (\"\" = defaults)")
	shapes := fs.String("shapes", "", "comma-separated layer names to keep (q/o proj, k/v proj, q|k|v (the joined group), gate/up, down); empty: all")
	splitsFlag := fs.String("splits", "", "comma-separated warps per CTA to time (1, 2, 4, 8, 16); empty: all")
	jsonPath := fs.String("json", "", "also write the rows as JSON to this file")
	diag := fs.Bool("diag", false, "time the gemv_q5 forms (int4, int8) that tell the access pattern from the fixed cost")
	diagRuns := fs.Int("diag-runs", 20, "with --diag: timed runs of each point (1: once, no warm-up, for a profiler)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	var bits []int
	for _, s := range strings.Split(*bitsFlag, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || (b != 3 && b != 4 && b != 8) {
			return usageErrorf("--bits %q: want 3, 4 or 8", s)
		}
		bits = append(bits, b)
	}
	var shapeList []string
	for _, s := range strings.Split(*shapes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			shapeList = append(shapeList, s)
		}
	}
	var splits []int
	for _, s := range strings.Split(*splitsFlag, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 16 || n&(n-1) != 0 {
			return usageErrorf("--splits %q: want 1, 2, 4, 8 or 16", s)
		}
		splits = append(splits, n)
	}
	js, ok := bench.Presets[*preset]
	if !ok {
		return usageErrorf("--preset %q: have %s", *preset, strings.Join(bench.PresetNames(), ", "))
	}
	mc, err := model.ParseConfig([]byte(js))
	if err != nil {
		return err
	}
	if err := needGPU("bench gemvq"); err != nil {
		return err
	}
	if *diag {
		out, err := bench.SweepGEMVQDiag(mc, strings.Split(*variants, ";"), bits, shapeList, splits, *diagRuns, stdout)
		if err != nil {
			return err
		}
		return writeJSON(*jsonPath, out)
	}
	out, err := bench.SweepGEMVQ(mc, *rows, strings.Split(*variants, ";"), bits, shapeList, splits, stdout)
	if err != nil {
		return err
	}
	return writeJSON(*jsonPath, out)
}

package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/wq"
)

// benchMoEHelp is the help of 'bitdecode bench moe'.
const benchMoEHelp = `usage: bitdecode bench moe [--preset NAME,...] [--tokens T,...] [--weights SPEC,...] [--paths P,...] [--layers N] [--reps N] [--json FILE]

Times one mixture-of-experts layer of a model's shapes on the GPU: the
router's top-k and the chosen experts' SwiGLU MLPs summed, for T tokens, in
fp16 or packed low-bit experts (random weights, std 0.02; packed ones random
codes with plausible scales: the bytes and kernels of a real quantized
model). A flush is --layers such layers, each of its own experts (so that
the weights are cold in L2), routed from the same random router logits;
a row gives the median flush's time a layer, the chosen experts' bytes (the
least a layer reads: codes and (scale, zero) pairs for packed weights), GB/s
on those bytes and their fraction of the read ceiling probed before and
after the rows. The paths, timed in turn and then again (the second round's
times reported; each path's outputs the same bits both rounds):

  device  the engine's route on the device (RouteExperts, MixExperts: fp16
          experts by per-token GEMVs or grouped GEMMs, BITDECODE_MOE_GROUP_ROWS;
          packed ones by the indexed one-row GEMVs up to the batch they take,
          16 tokens at most), replayed as a CUDA graph
  host    the model's host route (the route of packed experts before session
          19, and now of their batches over that limit, or with
          BITDECODE_NO_MOE_PACKED=1): the router's logits downloaded, the
          top-k on the host, per chosen expert its tokens' rows gathered,
          gate/up, SwiGLU and down, its output downloaded and summed, the sum
          uploaded
  route   the device's top-k alone

The device path's output is checked against the host path's (vs host: the
same experts' sums; bitwise at T = 1 for packed experts but for the routing
weights' last bit); a difference over 1e-3 fails the run. The backend's
BITDECODE_* options (docs/gpu.md) apply.

Presets: %s

example:
  bitdecode bench moe --preset mixtral-8x7b,qwen3-30b-a3b --tokens 1,4,16 --weights fp16,int4
  BITDECODE_MOE_GROUP_ROWS=off bitdecode bench moe --weights fp16 --tokens 16,64,256 --paths device
`

// benchMoEDefaultTokens is --tokens's default.
const benchMoEDefaultTokens = "1,4,8,16,64,256"

func runBenchMoE(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench moe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, benchMoEHelp, strings.Join(bench.MoEPresetNames(), ", ")) }
	presets := fs.String("preset", strings.Join(bench.MoEPresetNames(), ","), "comma-separated MoE layer shapes: "+strings.Join(bench.MoEPresetNames(), ", "))
	tokens := fs.String("tokens", benchMoEDefaultTokens, "comma-separated tokens a layer (T)")
	weights := fs.String("weights", "fp16,int4", "comma-separated expert weight formats (fp16, int8, int4, int3; groups of 128 unless the spec says, e.g. int4:g64)")
	paths := fs.String("paths", bench.MoEPathDevice+","+bench.MoEPathHost, "comma-separated paths: device, host, route")
	layers := fs.Int("layers", 8, "sparse layers a flush, each of its own experts")
	reps := fs.Int("reps", 0, "timed flushes a row (default: as many as 0.3 s takes, 5 to 50)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := bench.MoEConfig{Layers: *layers, Reps: *reps, Progress: stdout}
	if *layers <= 0 || *reps < 0 {
		return usageErrorf("--layers %d --reps %d: want a positive number of layers and reps >= 0", *layers, *reps)
	}
	for _, s := range splitList(*presets) {
		if _, ok := bench.MoEPresets[s]; !ok {
			return usageErrorf("--preset %q: have %s", s, strings.Join(bench.MoEPresetNames(), ", "))
		}
		cfg.Presets = append(cfg.Presets, s)
	}
	for _, s := range splitList(*tokens) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return usageErrorf("--tokens %q: want positive numbers of tokens", s)
		}
		cfg.Tokens = append(cfg.Tokens, n)
	}
	for _, s := range splitList(*weights) {
		spec, err := wq.ParseSpec(s)
		if err != nil {
			return usageErrorf("--weights %q: %v", s, err)
		}
		if spec.IsQuantized() && spec.Method != wq.RTN {
			return usageErrorf("--weights %q: random packed weights are RTN's format (the method changes the values, not the bytes)", s)
		}
		cfg.Weights = append(cfg.Weights, spec)
	}
	for _, s := range splitList(*paths) {
		if s != bench.MoEPathDevice && s != bench.MoEPathHost && s != bench.MoEPathRoute {
			return usageErrorf("--paths %q: want device, host or route", s)
		}
		cfg.Paths = append(cfg.Paths, s)
	}
	if len(cfg.Presets) == 0 || len(cfg.Tokens) == 0 || len(cfg.Weights) == 0 || len(cfg.Paths) == 0 {
		return usageErrorf("--preset, --tokens, --weights and --paths each need at least one value")
	}
	var err error
	if cfg.GPU, err = bench.GPUSettings(lookupEnv); err != nil {
		return err
	}
	if err := needGPU("bench moe"); err != nil {
		return err
	}
	rep, err := bench.RunMoE(cfg)
	if err != nil {
		return err
	}
	bench.WriteMoEReport(stdout, rep)
	return writeJSON(*jsonPath, rep)
}

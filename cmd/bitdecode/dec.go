package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// DEC on the command line: the --dec-k values of run and eval, 'bench dec'
// and 'tune dec'.

// decTunedPrefix starts a --dec-k value that names a tuned slowdown.
const decTunedPrefix = "tuned:"

// decChoice is one --dec-k value: k_chunk for every linear layer,
// tuned:P%, the per-shape k_chunk and n_tb that 'tune dec' saved in the
// model's bitdecode.json for a slowdown of P percent, or k_chunk by
// projection (down_proj:32+v_proj:256: model.DECAlloc).
type decChoice struct {
	k     int
	tuned float64        // percent; 0: not tuned
	alloc model.DECAlloc // by projection; nil: not
}

// String returns the value as typed canonically: "32", "tuned:5%" or
// "v_proj:256+o_proj:64+down_proj:32".
func (d decChoice) String() string {
	switch {
	case d.alloc != nil:
		return d.alloc.String()
	case d.tuned > 0:
		return decTunedPrefix + formatPct(d.tuned)
	}
	return strconv.Itoa(d.k)
}

// on reports whether the value asks for DEC.
func (d decChoice) on() bool { return d.k > 0 || d.tuned > 0 || d.alloc.On() }

func formatPct(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) + "%" }

// parsePct parses a percentage ("5%", "2.5%" or "5") into percent.
func parsePct(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !(v > 0) || v > 1000 {
		return 0, fmt.Errorf("%q is not a positive percentage", s)
	}
	return v, nil
}

// decKUsage is the help of --dec-k.
const decKUsage = "DEC: k_chunk, the input channels per 1024 whose residual rows are added (0: off), tuned:P% for the k_chunk and n_tb per layer shape that 'bitdecode tune dec' saved in the model's bitdecode.json for a P% slowdown, or k_chunk by projection (down_proj:32,v_proj:256,o_proj:64: the others off; " + decAllocPreset + " is an allocation that brings back half of int3 RTN's perplexity loss: docs/weights.md)"

// decAllocPreset names an allocation of docs/perf/dec.md's sessions 22-23
// (gocoder-23m, int3 RTN): one that recovers half of int3's perplexity loss
// with few residual rows, and the cheapest such on the GPU measured.
const decAllocPreset = "half3"

// decAllocHalf3 is decAllocPreset's allocation: down 16, v 256, o 32, gate
// 32, up 32 (9.0841 on the CPU's float path, 9.0825 on its int3 integer
// path, against int3 RTN's 9.6044, fp16's 8.5682 and the half-way line
// 9.0863; the 8B step +33-34% on the H100, session 23, the same as down 32
// + v 256 + o 64, whose 9.0906 misses the line by 0.004).
const decAllocHalf3 = "down_proj:16+v_proj:256+o_proj:32+gate_proj:32+up_proj:32"

// parseDECChoice parses one --dec-k value.
func parseDECChoice(s string) (decChoice, error) {
	s = strings.TrimSpace(s)
	if s == decAllocPreset {
		s = decAllocHalf3
	}
	if model.IsDECAllocEntry(s) {
		a, err := model.ParseDECAlloc(s)
		if err != nil {
			return decChoice{}, usageErrorf("--dec-k: %v", err)
		}
		return decChoice{alloc: a}, nil
	}
	if rest, ok := strings.CutPrefix(s, decTunedPrefix); ok {
		p, err := parsePct(rest)
		if err != nil {
			return decChoice{}, usageErrorf("--dec-k %q: after tuned: %v (e.g. tuned:5%%)", s, err)
		}
		return decChoice{tuned: p}, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 {
		return decChoice{}, usageErrorf("--dec-k %q: want a non-negative k_chunk or tuned:P%% (e.g. 32, tuned:5%%)", s)
	}
	return decChoice{k: k}, nil
}

// parseDECChoices parses a comma-separated list of --dec-k values. The
// entries of a by-projection value may be joined by '+' or by commas:
// consecutive name:k entries form one value, until a name repeats, which
// starts the next ("0,down_proj:32,v_proj:256,down_proj:16,v_proj:256,64"
// is four values).
func parseDECChoices(s string) ([]decChoice, error) {
	var out []decChoice
	var fields []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			continue
		case model.IsDECAllocEntry(f) && len(fields) > 0 && model.IsDECAllocEntry(fields[len(fields)-1]) && !allocNames(fields[len(fields)-1], f):
			fields[len(fields)-1] += "+" + f
		default:
			fields = append(fields, f)
		}
	}
	for _, f := range fields {
		d, err := parseDECChoice(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--dec-k: empty list")
	}
	return out, nil
}

// allocNames reports whether the by-projection value have ("a:1+b:2")
// names a projection that entries ("b:3+c:4") name too.
func allocNames(have, entries string) bool {
	for _, e := range strings.Split(entries, "+") {
		name, _, _ := strings.Cut(e, ":")
		for _, h := range strings.Split(have, "+") {
			if hn, _, _ := strings.Cut(h, ":"); strings.TrimSpace(hn) == strings.TrimSpace(name) {
				return true
			}
		}
	}
	return false
}

// engine returns the choice as engine.Options.DEC.
func (d decChoice) engine() engine.DEC {
	return engine.DEC{KChunk: d.k, TunedPct: d.tuned, ByLayer: d.alloc}
}

// decLabel describes a model's DEC for tables: "32", "down_proj:4 ...",
// or "-".
func decLabel(wm model.WeightMemory) string {
	if wm.DECKChunk > 0 {
		return strconv.Itoa(wm.DECKChunk)
	}
	if len(wm.DECPerLayer) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(wm.DECPerLayer))
	for k := range wm.DECPerLayer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, wm.DECPerLayer[k])
	}
	return strings.Join(parts, " ")
}

// decShapes resolves --model DIR or --shapes (a preset name or NxK,...)
// into the shapes to time.
func decShapes(dir, shapes string) ([]bench.DECShape, error) {
	switch {
	case dir != "" && shapes != "":
		return nil, usageErrorf("give --model DIR or --shapes, not both")
	case dir != "":
		cfg, err := model.LoadConfig(filepath.Join(dir, "config.json"))
		if err != nil {
			return nil, err
		}
		return bench.DECShapesOf(cfg)
	case shapes == "":
		return nil, usageErrorf("give --model DIR, or --shapes with a preset (%s) or NxK,...", strings.Join(bench.PresetNames(), ", "))
	}
	if _, ok := bench.Presets[shapes]; ok {
		cfg, err := bench.PresetConfig(shapes)
		if err != nil {
			return nil, err
		}
		return bench.DECShapesOf(cfg)
	}
	var out []bench.DECShape
	for _, f := range strings.Split(shapes, ",") {
		f = strings.TrimSpace(f)
		nk, part, hasPart := strings.Cut(f, "@")
		n, k, ok := strings.Cut(strings.ToLower(nk), "x")
		N, err1 := strconv.Atoi(n)
		K, err2 := strconv.Atoi(k)
		if !ok || err1 != nil || err2 != nil || N <= 0 || K <= 0 {
			return nil, usageErrorf("--shapes %q: want a preset (%s) or NxK,... (e.g. 4096x4096,14336x4096; NxK@LO+N gives DEC to outputs [LO, LO+N) only, --v6)", shapes, strings.Join(bench.PresetNames(), ", "))
		}
		s := bench.DECShape{Name: f, N: N, K: K}
		if hasPart {
			lo, dn, ok := strings.Cut(part, "+")
			var err1, err2 error
			s.Lo, err1 = strconv.Atoi(lo)
			s.DECN, err2 = strconv.Atoi(dn)
			if !ok || err1 != nil || err2 != nil || s.Lo < 0 || s.DECN <= 0 || s.Lo+s.DECN > N {
				return nil, usageErrorf("--shapes %q: after @ want LO+N, the outputs with DEC within the shape's %d (e.g. 6144x4096@5120+1024)", f, N)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// decFlags are the flags 'bench dec' and 'tune dec' share.
type decFlags struct {
	modelDir, shapes, weights, residual, kChunks, blocks, device, mode, at *string
	activations                                                            *string
	tokens, runs                                                           *int
	listCost                                                               *bool
}

func addDECFlags(fs *flag.FlagSet, kDefault string) decFlags {
	return decFlags{
		modelDir:    fs.String("model", "", "time the linear-layer shapes of this checkpoint (config.json)"),
		shapes:      fs.String("shapes", "", "or: a preset ("+strings.Join(bench.PresetNames(), ", ")+") or NxK,... (N outputs, K inputs)"),
		weights:     fs.String("weights", "int4", "base weight format (int4, int3, int8: packed, gemvq.cu)"),
		mode:        fs.String("mode", "", "how DEC runs beside the base GEMV: serial, concurrent (a second stream) or fused (one launch); default: $"+bench.EnvDECMode+", else fused (serial for int8 and fp16 residuals), as the CUDA backend"),
		residual:    fs.String("residual", "int4", "residual format: int4, int8 or fp16"),
		at:          fs.String("residual-at", "", "where the residual lives: host (mapped, read over PCIe) or device; default: $"+bench.EnvDECResidual+", else host, as the CUDA backend"),
		kChunks:     fs.String("k-chunk", kDefault, "k_chunk values to time, increasing"),
		blocks:      fs.String("n-tb", "4,8,16,32,66,132", "thread-block counts (n_tb) to time; clamped to each shape's range"),
		device:      fs.String("device", "cuda", "cuda (or auto): the timings need a GPU"),
		tokens:      fs.Int("tokens", 1, "rows of x per step (1: single-sequence decode; at most 8)"),
		runs:        fs.Int("runs", 30, "timed runs per point (median reported)"),
		listCost:    fs.Bool("list-cost", true, "with the lists made where x is produced: charge each list's ranking (its producer's time over the plain kernel's, shared among the GEMVs that read it) to the list-given step; false: session 20's picks"),
		activations: fs.String("activations", bench.DECOutliers, "how x is drawn: outliers (Gaussian with outlier channels) or narrow (every |x| within 1% of 1: the selection's worst case for v6's histogram)"),
	}
}

// config turns the flags into a bench.DECConfig, after checking that a GPU
// is there to run it.
func (f decFlags) config(progress io.Writer) (bench.DECConfig, error) {
	var cfg bench.DECConfig
	if *f.device != "cuda" && *f.device != "auto" {
		return cfg, usageErrorf("--device %q: DEC timings run on a GPU (cuda)", *f.device)
	}
	shapes, err := decShapes(*f.modelDir, *f.shapes)
	if err != nil {
		return cfg, err
	}
	for _, s := range shapes {
		if s.DECN > 0 {
			return cfg, usageErrorf("--shapes %s: DEC on part of the outputs (@LO+N) is timed by 'bench dec --v6' only", s.Name)
		}
	}
	ws, err := parseWeightSpec(*f.weights)
	if err != nil {
		return cfg, err
	}
	if !ws.IsQuantized() {
		return cfg, usageErrorf("--weights %s: DEC compensates quantized weights (int8, int4, int3)", ws.Short())
	}
	res, err := wq.ParseSpec(*f.residual)
	if err != nil || res.Elem == wq.Int3 || res.Group != 0 && res.Group != wq.DefaultGroup {
		return cfg, usageErrorf("--residual %q: want int4, int8 or fp16", *f.residual)
	}
	ks, err := parseIntList("k-chunk", *f.kChunks)
	if err != nil {
		return cfg, err
	}
	if !slices.IsSorted(ks) || ks[0] < 1 {
		return cfg, usageErrorf("--k-chunk %q: want positive values in increasing order", *f.kChunks)
	}
	blocks, err := parseIntList("n-tb", *f.blocks)
	if err != nil {
		return cfg, err
	}
	if *f.tokens < 1 || *f.tokens > 8 || *f.runs < 1 {
		return cfg, usageErrorf("--tokens %d, --runs %d: want 1..8 tokens and at least one run", *f.tokens, *f.runs)
	}
	modeName := *f.mode
	if modeName == "" {
		modeName, _ = lookupEnv(bench.EnvDECMode)
	}
	if modeName == "" {
		// The backend's default: fused where it runs (packed weights, int4
		// residuals), serial otherwise.
		modeName = "serial"
		if b := ws.Elem.Bits(); res.Elem == wq.Int4 && ws.Elem.IsInt() && (b == 3 || b == 4 || b == 8) {
			modeName = "fused"
		}
	}
	mode, err := bench.ParseDECMode(modeName)
	if err != nil {
		return cfg, usageErrorf("--mode %q: want serial, concurrent or fused", modeName)
	}
	at := *f.at
	if at == "" {
		at, _ = lookupEnv(bench.EnvDECResidual)
	}
	if at != "" && at != "host" && at != "device" {
		return cfg, usageErrorf("--residual-at %q: want host or device", at)
	}
	if *f.activations != bench.DECOutliers && *f.activations != bench.DECNarrow {
		return cfg, usageErrorf("--activations %q: want %s or %s", *f.activations, bench.DECOutliers, bench.DECNarrow)
	}
	if err := needGPU("DEC timing"); err != nil {
		return cfg, err
	}
	q3 := false
	if v, ok := lookupEnv(bench.EnvDECQ3); ok && strings.TrimSpace(v) != "" {
		if q3, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return cfg, usageErrorf("$%s=%q: want 1, t, true, 0, f or false", bench.EnvDECQ3, v)
		}
	}
	// The lists made where x is produced (the CUDA backend's default):
	// pick on the list-given step, unless they are turned off.
	noLists := false
	if v, ok := lookupEnv(bench.EnvNoDECNormSelect); ok && strings.TrimSpace(v) != "" {
		if noLists, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return cfg, usageErrorf("$%s=%q: want 1, t, true, 0, f or false", bench.EnvNoDECNormSelect, v)
		}
	}
	cfg = bench.DECConfig{Shapes: shapes, Weights: ws, Residual: res.Elem, Tokens: *f.tokens, KChunks: ks, Blocks: blocks,
		Runs: *f.runs, Mode: mode, ResidualOnDevice: at == "device", Activations: *f.activations, Q3: q3, ListGiven: !noLists,
		NoListCost: !*f.listCost, Progress: progress}
	return cfg, nil
}

// benchDECHelp is the help of 'bitdecode bench dec'.
const benchDECHelp = `usage: bitdecode bench dec [--shapes PRESET|NxK,...|--model DIR] [--weights int4] [--residual int4] [--mode fused|serial|concurrent] [--residual-at host|device] [--k-chunk K,...] [--n-tb B,...] [--tokens T] [--runs R] [--json FILE]
       bitdecode bench dec --v6 [--v6-diag] [--shapes NxK,...] [--weights int4,int3] [--k-chunk K,...] [--runs R]

Times dynamic error compensation (DEC) on the GPU for each linear-layer
shape (default: Llama-3.1-8B's 4096x4096, 1024x4096, 14336x4096 and
4096x14336, N x K): the base GEMV alone, then for each k_chunk and n_tb the
selection kernel and the compensation kernel alone (reading the selected
residual rows from pinned host memory mapped into the GPU, or from device
memory with --residual-at device) and the whole step as the backend runs it
in --mode (fused, the default: one launch; serial: base, selection,
compensation), each run after L2 has been flushed. The read GB/s column is the residual bytes the compensation reads
(codes and params of the selected rows) over its time: the achieved
zero-copy PCIe rate, next to the pinned-copy rate measured in the same run.
In fused mode at one row with the residual in device memory, a shape whose
base v6.1 reads runs as the backend runs it (session 19): the base is v6.1
over the tiled layout, the step a selection launch then gemv_q6_dec (v6.1
with a DEC warp a CTA; no n_tb), the list-given step gemv_q6_dec alone
($BITDECODE_DEC_Q3=1: gemv_q3_dec beside v3.2 over wq's layout, as before).

--v6 prints gemv_q6_dec's kernel table instead: per shape (default: the 8B
shapes and the joined q|k|v and gate|up) and base width (--weights, int4
and int3 by default), v6.1 at its split, gemv_q6_dec with no rows, each
--k-chunk (default 1,8,16,32,64) with the list given, the selection launch
alone and ahead of the largest k_chunk, and the largest at every split.
--v6-diag prints the diagnostic forms instead (the default, which picks by
the list's length and the split; the DEC warp summing every row, as in sessions 18-22;
every row in the tail after the base; those two with the base warps idle;
a copier and a summer warp; k_chunk 0 and each --k-chunk; default shapes
q/o and down).

example:
  bitdecode bench dec --json dec.json
  bitdecode bench dec --shapes 4096x4096 --k-chunk 8,32,128 --n-tb 8,16,32
`

func runBenchDEC(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench dec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchDECHelp); fs.PrintDefaults() }
	f := addDECFlags(fs, "8,16,32,64,128,256")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	v6 := fs.Bool("v6", false, "print gemv_q6_dec's kernel table (v6.1 with a DEC warp, list given) per shape, width and k_chunk instead")
	v6Diag := fs.Bool("v6-diag", false, "with --v6: its diagnostic builds instead")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *v6 || *v6Diag {
		return runBenchDECV6(fs, f, *v6Diag, stdout)
	}
	if _, err := resolveModel(f.modelDir, stderr, false); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if *f.modelDir == "" && *f.shapes == "" {
		*f.shapes = "llama-3.1-8b"
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	rep, err := bench.RunDEC(cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, stderr, rep, *jsonPath)
}

var tuneCmd = &command{
	name:    "tune",
	usage:   "dec (--model DIR | --shapes PRESET|NxK,...) [--weights int4|int3] [--slowdown 2.5%,5%,10%,20%] [--out FILE] [--device cuda]",
	summary: "measure on the GPU the largest DEC k_chunk per layer shape within a decode slowdown, for --dec-k tuned:P%",
	help: `'tune dec' measures, for each distinct linear-layer shape of the model (or
of --shapes), the base GEMV time of a decode step and the time of the same
step with DEC (in --mode, by default fused as the backend runs it; the
residual where --residual-at says) for k_chunk 1, 2, 4, 8, 16, ... and each n_tb in --n-tb, every run after an
L2 flush, medians of --runs runs. For each --slowdown target it picks the
largest k_chunk whose step is at most that much slower than the base, with
the n_tb that was fastest for it (k_chunk 0 if even the smallest is too
slow), prints the measurements and the picks, and saves them under "dec" in
the model's bitdecode.json (or --out FILE), keyed by weight format, beside
the file's other settings. 'run' and 'eval ppl' then take --dec-k tuned:5%:
each layer gets its shape's k_chunk and n_tb for a 5% slowdown. A shape's
cost is its step with the list given, where fused mode times one (the CUDA
backend makes the lists where x is produced, no selection launch;
docs/perf/dec.md sessions 19b-20), plus the shape's share of its lists'
ranking (session 21: each list's producer, timed as the step chains it,
over the plain kernel it replaces, split among the GEMVs that read the
list; --list-cost=false leaves it out); $BITDECODE_NO_DEC_NORM_SELECT=1
turns the lists off there and makes the cost the step with its selection.

Without --model, --shapes times a preset's shapes on random weights
(llama-3.1-8b, llama-3.2-1b) or a list NxK,...; nothing is saved unless
--out names a file. The timings need a GPU; without one the command fails.

examples:
  bitdecode tune dec --model DIR --weights int4 --slowdown 2.5%,5%,10%,20%
  bitdecode tune dec --shapes llama-3.1-8b --out llama8b-dec.json
  bitdecode run --model DIR --weights int4 --dec-k tuned:5% "prompt"`,
}

func init() {
	flagSets["tune"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("tune", flag.ContinueOnError)
		addTuneFlags(fs)
		return fs
	}
	tuneCmd.run = runTune
	register(tuneCmd)
}

type tuneFlags struct {
	decFlags
	slowdown, out *string
}

func addTuneFlags(fs *flag.FlagSet) tuneFlags {
	return tuneFlags{
		decFlags: addDECFlags(fs, "1,2,4,8,16,32,64,128,256,512,1024"),
		slowdown: fs.String("slowdown", "2.5%,5%,10%,20%", "decode slowdown targets (percent over the base GEMV)"),
		out:      fs.String("out", "", "settings file to update (default: DIR/bitdecode.json with --model)"),
	}
}

func runTune(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "dec" {
		return usageErrorf("what to tune: dec")
	}
	fs := newFlagSet(tuneCmd, stdout)
	f := addTuneFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	var targets []float64
	for _, s := range strings.Split(*f.slowdown, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		p, err := parsePct(s)
		if err != nil {
			return usageErrorf("--slowdown: %v", err)
		}
		if !slices.Contains(targets, p) {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return usageErrorf("--slowdown: empty list")
	}
	sort.Float64s(targets)
	out := *f.out
	if out == "" && *f.modelDir != "" {
		out = filepath.Join(*f.modelDir, model.SettingsFile)
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	cfg.StopPct = targets[len(targets)-1]
	rep, err := bench.RunDEC(cfg)
	if err != nil {
		return err
	}
	tu := rep.Tuning(targets, "bitdecode tune dec "+strings.Join(args[1:], " "))
	fmt.Fprintln(stdout)
	rep.WriteTable(stdout)
	fmt.Fprintln(stdout)
	writeTuneTable(stdout, tu)
	if out == "" {
		fmt.Fprintln(stderr, "not saved (no --model or --out)")
		return nil
	}
	key := model.DECSettingsKey(cfg.Weights)
	if err := model.SaveDECTuning(out, key, tu); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "saved the %s tuning to %s; use it with --dec-k tuned:%s\n", key, out, formatPct(targets[len(targets)/2]))
	return nil
}

// writeTuneTable prints the picks: a row per shape, a column per target.
func writeTuneTable(w io.Writer, tu *model.DECTuning) {
	fmt.Fprint(w, "| layers | N x K | base us |")
	sep := "|---|---|---|"
	for _, p := range tu.Targets {
		fmt.Fprintf(w, " <= +%s: k_chunk / n_tb (us) |", formatPct(p))
		sep += "---|"
	}
	fmt.Fprintf(w, "\n%s\n", sep)
	for _, s := range tu.Shapes {
		name := strings.Join(s.Layers, "/")
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(w, "| %s | %dx%d | %.1f |", name, s.N, s.K, s.BaseUS)
		for _, p := range s.Picks {
			if p.KChunk == 0 {
				fmt.Fprint(w, " 0 (off) |")
				continue
			}
			fmt.Fprintf(w, " %d / %d (%.1f, %+.1f%%) |", p.KChunk, p.Blocks, p.US, p.OverheadPct)
		}
		fmt.Fprintln(w)
	}
}

// runBenchDECV6 is 'bench dec --v6': gemv_q6_dec's kernel table, or with
// diag its diagnostic builds.
func runBenchDECV6(fs *flag.FlagSet, f decFlags, diag bool, stdout io.Writer) error {
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := bench.DECV6Config{Diag: diag, Runs: *f.runs, Out: stdout}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["shapes"] || set["model"] {
		shapes, err := decShapes(*f.modelDir, *f.shapes)
		if err != nil {
			return err
		}
		cfg.Shapes = shapes
	} else if diag {
		cfg.Shapes = []bench.DECShape{bench.DefaultDECV6Shapes[0], bench.DefaultDECV6Shapes[3]}
	}
	if set["weights"] {
		for _, w := range strings.Split(*f.weights, ",") {
			ws, err := parseWeightSpec(strings.TrimSpace(w))
			if err != nil {
				return err
			}
			if b := ws.Elem.Bits(); !ws.Elem.IsInt() || (b != 3 && b != 4) || ws.Group != 128 {
				return usageErrorf("--weights %s: --v6 times int4 and int3 bases in groups of 128", w)
			}
			cfg.Bits = append(cfg.Bits, ws.Elem.Bits())
		}
	}
	if set["k-chunk"] {
		ks, err := parseIntList("k-chunk", *f.kChunks)
		if err != nil {
			return err
		}
		if !slices.IsSorted(ks) || ks[0] < 1 {
			return usageErrorf("--k-chunk %q: want positive values in increasing order", *f.kChunks)
		}
		cfg.KChunks = ks
	}
	if *f.runs < 1 {
		return usageErrorf("--runs %d: want at least one run", *f.runs)
	}
	if err := needGPU("DEC timing"); err != nil {
		return err
	}
	return bench.RunDECV6(cfg)
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/eval"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// variantName names an eval configuration: "int4:gptq+dec16 kv int4",
// "int4+dec(tuned:5%) kv fp16", "int3+dec(v_proj:256+down_proj:32) kv fp16".
func variantName(ws wq.Spec, d decChoice, sp *kv.Spec) string {
	s := ws.Short()
	switch {
	case d.tuned > 0 || d.alloc.On():
		s += "+dec(" + d.String() + ")"
	case d.k > 0:
		s += fmt.Sprintf("+dec%d", d.k)
	}
	if sp != nil {
		s += " kv " + sp.String()
	}
	return s
}

var evalCmd = &command{
	name:    "eval",
	usage:   "ppl|needle --model DIR --file TEXT [--device auto|cpu|cuda] [--tp N] [--ctx N] [--windows W] [--first-window I] [--kv SPEC,...] [--weights SPEC,...] [--dec-k K|tuned:P%|NAME:K,...] [--calib FILE] [--chunk C] [--reuse-gap N] [--json FILE]",
	summary: "accuracy of KV and weight formats: perplexity, KL divergence and top-1 agreement against the first",
	help: `'eval ppl' tokenizes TEXT (no BOS), cuts it into windows of --ctx tokens
starting at token 0, ctx, 2·ctx, ... and scores every next token with each KV
format in --kv. The first format is the baseline for the mean KL divergence
(nats per token) and the share of positions whose most likely token agrees.

By default (--pack-all) every scored token attends to a fully packed
context, as the fake-quantized reference does: chunks are whole blocks of
every format (--chunk is rounded up) and each window's last block is
completed with the text that follows it, so no format looks better for
keeping its newest tokens in fp16; the table's "packed" column says so
(100%). --pack-all=false --chunk 1 decodes token by token instead, exactly
as generation uses the cache (the newest up to Nr-1 tokens read in fp16); a
larger chunk is faster and slightly harsher. The KV column gives each
format as resolved for the model's head dim.

--weights lists weight formats of the linear layers ('int4', 'int3:gptq',
...; see the grammar on a bad spec) and --dec-k the DEC k_chunk values
(channels per 1024 inputs whose residual rows are added back; 0: no DEC;
tuned:5%: per layer shape from the model's bitdecode.json, 'bitdecode tune
dec'; down_proj:32+v_proj:256+o_proj:64 or half3: k_chunk by projection, the
others off; commas also join one value's entries until a name repeats).
Every weight format is scored with every k (fp16 only with 0) and every KV
format; the first combination is the baseline. GPTQ formats calibrate on
--calib FILE (its first --calib-tokens tokens), which must not overlap TEXT's
scored windows. All models are held in memory at once.

Bit-plane formats (bw, read-time precision tiers) re-tier every R tokens
(spec option rN) between forward calls; --chunk R reproduces token-by-token
decoding under the policy. Their rows add the bytes read against an fp16
cache. Adjustment terms a spec leaves open come from the model's settings
(DIR/bitdecode.json or the built-in table).

--reuse-gap N adds a long-range retrieval check: identifiers (6+ characters)
that reappear at least N tokens after their previous occurrence in the
window, with none in between; the column gives the top-1 accuracy of their
tokens after the first (the model must recall the name from far back).

'eval needle' is long-context recall: a line binding a random name to a
random 5-digit number is put into TEXT at each of --depths of a context of
--ctx tokens, the binding begins again at the end, and the model must copy
the number from that far back (teacher-forced; a probe counts when every
token of the number is the top-1). --trials probes per depth, the same
probes for every configuration; --kv, --weights, --chunk and --pack-all as
for ppl.

--tp N scores on N GPUs (tensor parallelism, 'bitdecode help run'): every
variant shares the one group; the scores should equal --tp 1's within the
rounding of sums taken in another order. Not with --kv-reference.

examples:
  bitdecode eval needle --model ../shared/models/gocoder-23m --file heldout.txt --ctx 8192 --kv fp16,int4,int2 --trials 8
  bitdecode eval ppl --model ../shared/models/gocoder-23m --file heldout.txt --ctx 2048 --windows 4 --kv fp16,int8,int4,int2
  bitdecode eval ppl --model DIR --file heldout.txt --windows 2 --kv fp16 --weights fp16,int4,int4:gptq --dec-k 0,32 --calib calib.txt`,
}

type evalFlags struct {
	modelDir, file, kvs, device, jsonPath *string
	weights, decK, calib                  *string
	ctx, windows, first, chunk, reuseGap  *int
	tp                                    *int
	calibTokens, trials                   *int
	depths                                *string
	packAll, reference                    *bool
}

func addEvalFlags(fs *flag.FlagSet) evalFlags {
	return evalFlags{
		modelDir:    fs.String("model", "", modelHelp),
		file:        fs.String("file", "", "text file to score"),
		kvs:         fs.String("kv", "fp16,int8,int4,int2", "comma-separated KV format specs; the first is the baseline"),
		device:      fs.String("device", "auto", "auto, cpu or cuda (cuda runs the layers and the KV cache on the GPU)"),
		tp:          addTPFlag(fs),
		jsonPath:    fs.String("json", "", "also write the results as JSON to this file"),
		ctx:         fs.Int("ctx", 2048, "window length in tokens"),
		windows:     fs.Int("windows", 0, "windows to score (0: all that fit)"),
		first:       fs.Int("first-window", 0, "index of the first window to score"),
		chunk:       fs.Int("chunk", 256, "tokens per forward call (1: token by token, as in decoding)"),
		reuseGap:    fs.Int("reuse-gap", 0, "score long-range identifier reuse at least N tokens back (0: off)"),
		weights:     fs.String("weights", "fp16", "comma-separated weight format specs of the linear layers"),
		decK:        fs.String("dec-k", "0", "comma-separated --dec-k values: k_chunk (channels per 1024 inputs; 0: off) or tuned:P%"),
		calib:       fs.String("calib", "", "calibration text for GPTQ weight formats"),
		calibTokens: fs.Int("calib-tokens", 16384, "calibration tokens at most (from the start of --calib)"),
		depths:      fs.String("depths", "0.05,0.25,0.5,0.75,0.95", "needle: where the needles go, as fractions of the context (comma-separated)"),
		trials:      fs.Int("trials", 8, "needle: probes per depth"),
		reference:   fs.Bool("kv-reference", false, "after each integer KV format, a row with the same quantization but float32 scales and zeros (the format's :ref), to tell what the format costs from what its 16-bit parameters cost (runs in a host cache)"),
		packAll:     fs.Bool("pack-all", true, "score every token against a fully packed context (chunks of whole blocks, each window's last block completed from the following text), as the fake-quantized reference does; false: the last positions of a window read the fp16 residual block, as in decoding"),
	}
}

func init() {
	flagSets["eval"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("eval", flag.ContinueOnError)
		addEvalFlags(fs)
		return fs
	}
	evalCmd.run = runEval
	register(evalCmd)
}

func runEval(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "ppl" && args[0] != "needle") {
		return usageErrorf("the evaluation to run: ppl or needle")
	}
	which := args[0]
	fs := newFlagSet(evalCmd, stdout)
	f := addEvalFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if _, err := resolveModel(f.modelDir, stderr, false); err != nil {
		return err
	}
	if *f.modelDir == "" || *f.file == "" {
		return usageErrorf("--model DIR and --file TEXT are required")
	}
	var specs []kv.Spec
	for _, s := range strings.Split(*f.kvs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sp, err := parseSpecChecked(s)
			if err != nil {
				return err
			}
			specs = append(specs, sp)
			if *f.reference && !sp.Planes.On && !sp.Reference && (sp.K.Elem.IsInt() || sp.V.Elem.IsInt()) {
				ref := sp
				ref.Reference = true
				specs = append(specs, ref)
			}
		}
	}
	var wspecs []wq.Spec
	for _, s := range strings.Split(*f.weights, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sp, err := parseWeightSpec(s)
			if err != nil {
				return err
			}
			wspecs = append(wspecs, sp)
		}
	}
	if len(wspecs) == 0 {
		return usageErrorf("--weights: empty list")
	}
	decKs, err := parseDECChoices(*f.decK)
	if err != nil {
		return err
	}
	if err := checkDevice(*f.device); err != nil {
		return err
	}
	if err := checkTP(*f.tp); err != nil {
		return err
	}
	if *f.tp > 1 && *f.reference {
		return usageErrorf("--kv-reference simulates the formats in a host cache on one device: run it with --tp 1")
	}
	text, err := os.ReadFile(*f.file)
	if err != nil {
		return err
	}
	// One backend, tokenizer and calibration for every variant: the first
	// open makes them, the others share them.
	var first *engine.Model
	var hessians map[string]*wq.Hessian
	var variants []eval.PPLVariant
	for _, ws := range wspecs {
		quant := map[string]*wq.Matrix{} // one quantization per format, shared by its DEC variants
		for _, k := range decKs {
			if k.on() && !ws.IsQuantized() {
				continue
			}
			if ws.Method == wq.GPTQ && *f.calib == "" {
				return usageErrorf("GPTQ needs a calibration text: --calib FILE")
			}
			start := time.Now()
			o := engine.Options{Device: *f.device, Env: lookupEnv, Weights: ws, DEC: k.engine(), Quantized: quant, Hessians: hessians,
				Calib: engine.Calib{File: *f.calib, MaxTokens: *f.calibTokens}, Progress: model.StderrProgress(), Log: stderr}
			if first != nil {
				o.Backend = first.Backend // the group too, with --tp
			} else {
				o.TP = *f.tp
			}
			lm, err := engine.Open(*f.modelDir, o)
			if err != nil {
				return err
			}
			defer lm.Close()
			if first == nil {
				first = lm
			}
			if lm.Hessians != nil {
				hessians = lm.Hessians
			}
			fmt.Fprintf(stderr, "loaded %s in %v\n", variantName(ws, k, nil), time.Since(start).Round(time.Millisecond))
			for _, sp := range specs {
				sp = lm.ResolveSpec(sp)
				variants = append(variants, eval.PPLVariant{Name: variantName(ws, k, &sp), Model: lm.Model, KV: sp})
			}
		}
	}
	tok, be, dev := first.Tokenizer, first.Backend, first.Device
	ids := tok.Encode(string(text), false)
	fmt.Fprintf(stderr, "%s: %d tokens; ctx %d, chunk %d, on %s\n", *f.file, len(ids), *f.ctx, *f.chunk, dev)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	newCache := func(m model.Model, sp kv.Spec) (kvcache.Cache, error) {
		if sp.Reference { // simulated on the host, whatever the device
			return kvcache.NewPaged(be, m.Config(), sp, kvcache.Options{})
		}
		return kvcache.New(be, m.Config(), sp, kvcache.Options{MaxSeqs: 1, MaxLen: *f.ctx + kv.MaxResidual, MaxChunk: *f.chunk + kv.MaxResidual})
	}
	if which == "needle" {
		depths, err := parseFloatList("depths", *f.depths)
		if err != nil {
			return err
		}
		res, err := eval.Needle(ctx, be, variants, tok, ids, eval.NeedleOptions{Ctx: *f.ctx, Depths: depths, Trials: *f.trials, Chunk: *f.chunk,
			PackAll: *f.packAll, Seed: 1, NewCache: newCache, Progress: stderr})
		if err != nil {
			return err
		}
		writeNeedleTable(stdout, res, *f.ctx)
		return writeJSON(*f.jsonPath, map[string]any{"file": *f.file, "ctx": *f.ctx, "chunk": *f.chunk, "pack_all": *f.packAll, "device": dev,
			"trials": *f.trials, "results": res})
	}
	opts := eval.PPLOptions{Ctx: *f.ctx, Windows: *f.windows, First: *f.first, Chunk: *f.chunk, PackAll: *f.packAll, Progress: stderr, NewCache: newCache}
	if *f.reuseGap > 0 {
		opts.Probes = func(_ int, win []int) []int {
			pieces := make([]string, len(win))
			for i, t := range win {
				pieces[i] = tok.Decode([]int{t})
			}
			return eval.ReuseProbes(pieces, *f.reuseGap)
		}
	}
	res, err := eval.PPLVariants(ctx, be, variants, ids, opts)
	if err != nil {
		return err
	}
	writePPLTable(stdout, res)
	return writeJSON(*f.jsonPath, map[string]any{"file": *f.file, "ctx": *f.ctx, "chunk": *f.chunk, "pack_all": *f.packAll, "device": dev,
		"calib": *f.calib, "calib_tokens": *f.calibTokens, "results": res})
}

// writeJSON writes v as indented JSON to path ("" : nothing).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeNeedleTable prints needle recall: a row per configuration, a column
// per depth.
func writeNeedleTable(w io.Writer, res []eval.NeedleResult, ctx int) {
	fmt.Fprintf(w, "| configuration | recall, all depths |")
	sep := "|---|---|"
	for _, d := range res[0].Depths {
		fmt.Fprintf(w, " needle at %.0f%% (%d tokens back) |", 100*d, int((1-d)*float64(ctx)))
		sep += "---|"
	}
	fmt.Fprintf(w, " probes |\n%s---|\n", sep)
	for _, r := range res {
		fmt.Fprintf(w, "| %s | %.1f%% |", r.Name, 100*r.All)
		for _, v := range r.Recall {
			fmt.Fprintf(w, " %.0f%% |", 100*v)
		}
		fmt.Fprintf(w, " %d |\n", r.Probes)
	}
}

// parseFloatList parses a comma-separated list of numbers in [0, 1].
func parseFloatList(flagName, s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || v > 1 {
			return nil, usageErrorf("--%s %q: want fractions in [0, 1] separated by commas", flagName, s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--%s: empty list", flagName)
	}
	return out, nil
}

// writePPLTable prints eval results as a Markdown table: weights, DEC and
// KV format per row; bw rows add the bytes read against fp16 and, with
// probes, the retrieval column appears.
func writePPLTable(w io.Writer, res []eval.PPLResult) {
	probes, reads := res[0].Probes > 0, false
	for _, r := range res {
		reads = reads || r.Read != nil
	}
	fmt.Fprint(w, "| weights | DEC k_chunk | KV | KV bits | PPL | vs first | KLD vs first (nats/token) | top-1 agreement | weight MiB (fp16) | DEC residual MiB |")
	sep := "|---|---|---|---|---|---|---|---|---|---|"
	if reads {
		fmt.Fprint(w, " read vs fp16 |")
		sep += "---|"
	}
	if probes {
		fmt.Fprintf(w, " reuse top-1 (%d probes) |", res[0].Probes)
		sep += "---|"
	}
	fmt.Fprintf(w, " packed | tokens |\n%s---|---|\n", sep)
	for _, r := range res {
		dec, decMiB := decLabel(r.Weight), "-"
		if r.Weight.DECBytes > 0 {
			decMiB = fmt.Sprintf("%.2f", float64(r.Weight.DECBytes)/(1<<20))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.4f | %+.2f%% | %.5f | %.2f%% | %.2f (%.2f) | %s |", r.Weight.Format, dec, r.Resolved, r.KVBits, r.PPL, 100*(r.PPL/res[0].PPL-1),
			r.KLD, 100*r.Top1, float64(r.Weight.Bytes)/(1<<20), float64(r.Weight.FP16Bytes)/(1<<20), decMiB)
		if reads {
			if r.Read != nil {
				fmt.Fprintf(w, " %.1f%% |", 100*r.Traffic)
			} else {
				fmt.Fprint(w, " - |")
			}
		}
		if probes {
			fmt.Fprintf(w, " %.1f%% |", 100*r.ProbeTop1)
		}
		fmt.Fprintf(w, " %.1f%% | %d |\n", 100*r.PackedShare, r.Tokens)
	}
}

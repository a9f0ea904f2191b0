package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
	"github.com/bitdecode/bitdecode/wq"
)

var runCmd = &command{
	name:    "run",
	usage:   "[--model DIR] [--kv SPEC] [--weights SPEC [--calib FILE] [--dec-k K|tuned:P%|NAME:K,...]] [--compare-fp16] [--device auto|cpu|cuda] [--tp N] [sampling flags] PROMPT | - | --prompt-file FILE",
	summary: "generate text from a Hugging Face checkpoint with a low-bit KV cache",
	help: `Loads config.json, *.safetensors and tokenizer.json from DIR (without
--model: the embedded default model, a 2 MB Llama trained on the Go standard
library, model/gotiny; --model org/name[@revision] takes a Hugging Face Hub
repository from the Hugging Face cache, downloading what is missing, with
HF_TOKEN for gated models and HF_HUB_OFFLINE=1 to stay offline), encodes PROMPT
(with the model's chat template when --chat is given), and streams the
generated text to stdout. The KV cache is stored in the --kv format ('bitdecode
inspect kv' explains the specs); the last line on stderr gives the prompt and
decode speed, the KV memory used and the weight memory, each next to what
fp16 would take.

--weights quantizes the linear layers at load (int8, int4, int3; ':gptq'
calibrates on --calib FILE; the LM head goes to int8, ':head=fp16' keeps it
16-bit; embeddings stay 16-bit), and
--dec-k K adds dynamic error compensation: per step, the K input channels
per 1024 with the largest activations add their residual rows back;
--dec-k tuned:5% takes k_chunk (and the GPU's thread blocks) per layer shape
from the model's bitdecode.json, as 'bitdecode tune dec' measured them for a
5% slower decode step; --dec-k down_proj:32,v_proj:256,o_proj:64 sets k_chunk
by projection (the others without DEC; half3 names an allocation that brings
back half of int3 RTN's perplexity loss on gocoder-23m: docs/weights.md). On
the GPU the residuals stay in host memory unless BITDECODE_DEC_RESIDUAL=device.

The embedded model decodes with --repeat-penalty 1.3 unless the flag is
given: a 2 MB model repeats one line forever under plain greedy decoding.

--compare-fp16 (on by default with the embedded model) then generates again,
without printing, with an fp16 KV cache and once more with the chosen one, so
that both speeds are measured the same way (the streamed generation above
runs first in the process and writes to the terminal), and prints both side
by side: speed, KV memory now and at the model's full context, and how many
tokens agree.

With --device cuda (or auto on a machine with a GPU) everything runs on the
GPU: fp16 weights (GEMV kernels for decode, cuBLASLt for prefill), and the KV
cache in GPU memory, packed by the fused quantize/pack kernel and read by the
tensor-core decode attention; decode steps replay as CUDA graphs. --device
auto without a GPU says so in one line and runs on the CPU.

` + tpHelp + `

PROMPT is one argument (quote it); - reads it from standard input and
--prompt-file FILE from a file. Flags may come before or after it.
--ctx-size N caps the context (prompt plus new tokens) below the model's.
--json makes the output one JSON object and --json-schema one document of
a JSON Schema, by constrained decoding (docs/serving.md, "Structured
output": the same grammars as the server's response_format).

examples:
  bitdecode run --kv int4 "func main() {"
  git diff | bitdecode run --model DIR --chat --max-tokens 200 -
  bitdecode run --model ../shared/models/gocoder-23m --kv int4 "func main() {"
  bitdecode run --model DIR --device cuda --tp 2 --kv int4 "func main() {"
  bitdecode run --model DIR --chat --json-schema person.json "Describe a person"`,
}

type runFlags struct {
	weightFlags
	modelDir, kvSpec, device, stop        *string
	promptFile                            *string
	chatTemplate, jsonSchema              *string
	maxTokens, topK, chunk, ctx           *int
	tp                                    *int
	temperature, topP, minP, repeatPenalt *float64
	seed                                  *uint64
	chat, quiet, compare, json            *bool
}

func addRunFlags(fs *flag.FlagSet) runFlags {
	return runFlags{
		weightFlags:  addWeightFlags(fs),
		modelDir:     fs.String("model", "", modelHelp),
		kvSpec:       fs.String("kv", "int4", "KV cache format spec"),
		device:       fs.String("device", "auto", "auto, cpu or cuda"),
		tp:           addTPFlag(fs),
		stop:         fs.String("stop", "", "stop when the output ends with this string (\\n escapes allowed)"),
		maxTokens:    fs.Int("max-tokens", 128, "new tokens at most (>= 1)"),
		ctx:          fs.Int("ctx-size", 0, "cap the context (prompt plus new tokens) and the KV memory it reserves, in tokens (0: the model's context)"),
		promptFile:   fs.String("prompt-file", "", "read the prompt from this file instead of the PROMPT argument"),
		topK:         fs.Int("top-k", 0, "sample from the K most likely tokens (0: all)"),
		chunk:        fs.Int("prefill-chunk", 0, "prompt tokens per prefill step (0: 512 on the CPU, 2048 on the GPU)"),
		temperature:  fs.Float64("temperature", 0, "sampling temperature (0: greedy)"),
		topP:         fs.Float64("top-p", 0, "nucleus sampling mass (0: off)"),
		minP:         fs.Float64("min-p", 0, "drop tokens below this fraction of the best one's probability (0: off)"),
		repeatPenalt: fs.Float64("repeat-penalty", 1, "penalty for tokens already in the context (1: off)"),
		seed:         fs.Uint64("seed", 0, "sampler seed"),
		chat:         fs.Bool("chat", false, "wrap PROMPT as a user message in the model's chat template"),
		chatTemplate: fs.String("chat-template", "", chatTemplateHelp),
		json:         fs.Bool("json", false, "constrain the output to one JSON object"),
		jsonSchema:   fs.String("json-schema", "", "constrain the output to a JSON document of this JSON Schema (a file, or the schema itself if it starts with {)"),
		quiet:        fs.Bool("quiet", false, "no progress bar or statistics on stderr"),
		compare:      fs.Bool("compare-fp16", false, "also generate with an fp16 KV cache and compare speed, memory and tokens (default on with the embedded model)"),
	}
}

func init() {
	flagSets["run"] = func() *flag.FlagSet {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		addRunFlags(fs)
		return fs
	}
	runCmd.run = runRun
	register(runCmd)
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(runCmd, stdout)
	f := addRunFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := resolveModel(f.modelDir, stderr, *f.quiet); err != nil {
		return err
	}
	prompt, err := readPrompt(fs, *f.promptFile)
	if err != nil {
		return err
	}
	if *f.maxTokens < 1 {
		return usageErrorf("--max-tokens %d: want at least 1", *f.maxTokens)
	}
	if *f.ctx < 0 || *f.chunk < 0 {
		return usageErrorf("--ctx-size %d, --prefill-chunk %d: want a non-negative context and chunk", *f.ctx, *f.chunk)
	}
	compare := *f.compare || (*f.modelDir == "" && !flagSet(fs, "compare-fp16") && !*f.quiet)
	spec, err := parseSpecChecked(*f.kvSpec)
	if err != nil {
		return err
	}
	o, err := openOptions(*f.modelDir, *f.device, *f.tp, f.weightFlags, stderr, *f.quiet)
	if err != nil {
		return err
	}
	if *f.modelDir == "" && !flagSet(fs, "repeat-penalty") {
		*f.repeatPenalt = embeddedRepeatPenalty
	}
	opts := engine.GenerateOptions{
		MaxTokens:   *f.maxTokens,
		ChunkTokens: *f.chunk,
		Sample: engine.SampleOptions{Temperature: *f.temperature, TopK: *f.topK, TopP: *f.topP, MinP: *f.minP,
			RepeatPenalty: *f.repeatPenalt, Seed: *f.seed},
	}
	if err := opts.Sample.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if *f.stop != "" {
		opts.Stop = []string{strings.ReplaceAll(*f.stop, `\n`, "\n")}
	}
	if opts.Constraint, err = jsonConstraint(*f.json, *f.jsonSchema); err != nil {
		return err
	}
	lm, err := engine.Open(*f.modelDir, o)
	if err != nil {
		return err
	}
	defer lm.Close()
	if opts.ChunkTokens == 0 {
		opts.ChunkTokens = defaultRunChunk(lm.Device)
	}
	if err := useChatTemplate(lm, *f.chatTemplate); err != nil {
		return err
	}
	if *f.chat && !*f.quiet {
		if ct := lm.Tokenizer.ChatTemplate(); ct.Format == tokenizer.ChatPlain {
			fmt.Fprintf(stderr, "--chat: the model has no chat template (%s): using the plain fallback \"user: PROMPT\\n\\nassistant:\"\n", ct.Reason)
		}
	}
	ids, err := lm.Encode(prompt, *f.chat)
	if err != nil {
		return err
	}
	if limit := contextLimit(lm.Config().MaxPositions, *f.ctx); limit > 0 {
		if len(ids) >= limit {
			return fmt.Errorf("the prompt has %d tokens, the context %d (raise --ctx-size or shorten the prompt)", len(ids), limit)
		}
		opts.MaxTokens = min(opts.MaxTokens, limit-len(ids))
	}
	// The cache is sized to this run: the prompt plus the new tokens.
	cache, err := lm.NewCache(spec, lm.SoloCacheOptions(len(ids), opts))
	if err != nil {
		return err
	}
	defer cache.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := lm.Config()
	if !*f.quiet {
		arch := cfg.Architecture
		if cfg.Wrapper != "" {
			arch = fmt.Sprintf("%s (the text model of %s; images are not supported)", arch, cfg.WrapperArchitecture)
		}
		fmt.Fprintf(stderr, "model %s (%d layers, %d/%d heads, head dim %s) on %s, KV cache %s\n",
			arch, cfg.Layers, cfg.Heads, cfg.KVHeads, headDim(cfg), lm.Backend.Name(), cache.Format().Spec.String())
	}
	fmt.Fprint(stdout, prompt)
	st, err := engine.Generate(ctx, lm.Model, lm.Tokenizer, cache, 0, ids, opts, func(s string) { fmt.Fprint(stdout, s) })
	fmt.Fprintln(stdout)
	if err != nil {
		return err
	}
	if !*f.quiet {
		ratio := float64(st.KVBytesFP16) / float64(max(st.KVBytes, 1))
		note := fmt.Sprintf("%.1fx smaller", ratio)
		switch {
		case cache.Format().Planes.On:
			note = "bw stores fp16 bit planes, in blocks allocated whole; it saves reads, not memory"
			if ts, ok := cache.TierStats(); ok && ts.Read.FP16Bytes > 0 {
				note += fmt.Sprintf("; decode read %.1f%% of fp16's bytes", 100*ts.Read.Traffic())
			}
		case ratio < 1:
			note = "short contexts are dominated by the fp16 residual block of each layer"
		}
		fmt.Fprintf(stderr, "%d prompt tokens in %v (%.0f tok/s), %d new tokens at %.1f tok/s (%s); KV cache %s: %s (fp16 would be %s; %s); %s\n",
			st.PromptTokens, st.Prefill.Round(time.Millisecond), float64(st.PromptTokens)/st.Prefill.Seconds(),
			st.GeneratedTokens, st.DecodeTokensPerSecond(), st.StopReason, cache.Format().Spec.String(),
			humanBytes(st.KVBytes), humanBytes(st.KVBytesFP16), note, weightLine(model.WeightMemoryOf(lm.Model)))
	}
	if compare && cache.Format().Spec.String() != "fp16" {
		// Both formats are timed again the same way: after the streamed
		// generation has warmed the process up, and without writing to the
		// terminal (the streamed run above pays for both, and runs first).
		runs, err := lm.CompareFormats(ctx, ids, []kv.Spec{kv.MustParseSpec("fp16"), spec}, opts)
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr)
		writeCompareTable(stderr, runs, cfg.MaxPositions)
	}
	return nil
}

// tpUsage is the --tp flag's usage, the same on every command that opens
// a model.
const tpUsage = "tensor parallelism: run the model on N GPUs of this host (GPUs 0..N-1, NCCL), each holding 1/N of every weight and the KV heads of its query heads; N must divide the query heads and the intermediate size (1: one device; --device cpu: N CPU ranks in one process, to check the sharding, no faster)"

// tpHelp is the paragraph of the long help on --tp.
const tpHelp = `--tp N (tensor parallelism) runs one model on N GPUs of this host: each
GPU holds a shard of every linear layer (query heads and the MLP split N
ways, the embedding and LM head by vocabulary) and the low-bit KV cache of
its own KV heads, and the GPUs sum their partial results over NCCL twice per
layer. It needs N GPUs (--device cuda); N must divide the query heads and
the intermediate size, and the KV heads must divide by N or N by them (with
fewer KV heads than GPUs, each KV head is kept on N/Hkv GPUs, said in one
line). Memory figures are per GPU. With --device cpu, N CPU ranks run in
one process, sharing its threads: a check of the sharding, not a speed-up.`

// addTPFlag defines --tp on fs.
func addTPFlag(fs *flag.FlagSet) *int { return fs.Int("tp", 1, tpUsage) }

// checkTP returns a usage error unless --tp is a degree of parallelism.
func checkTP(n int) error {
	if n < 1 {
		return usageErrorf("--tp %d: want the number of GPUs to run the model on, at least 1", n)
	}
	return nil
}

// weightFlags are the weight-format flags of the commands that open a model
// for generation (run, chat, serve, bench e2e): --weights, its GPTQ
// calibration and DEC.
type weightFlags struct {
	weights, calib, decK *string
	calibN               *int
}

// addWeightFlags defines fs's weight-format flags.
func addWeightFlags(fs *flag.FlagSet) weightFlags {
	return weightFlags{
		weights: fs.String("weights", "fp16", "weight format of the linear layers (fp16, int8, int4, int3[:gptq][:head=F]; 'bitdecode help run' or docs/weights.md)"),
		calib:   fs.String("calib", "", "calibration text for a :gptq weight format"),
		calibN:  fs.Int("calib-tokens", 16384, "calibration tokens at most"),
		decK:    fs.String("dec-k", "0", decKUsage),
	}
}

// defaultRunChunk is run's prefill chunk on device: 2048 tokens on the GPU,
// where a 31,993-token prompt of Llama-3.1-8B's shapes prefills 1.08x (fp16
// weights) and 1.18x (int4 weights, which each chunk dequantizes) as fast
// as in chunks of 512, and 512 on the CPU, where 2048 measured 0.82-0.88x
// (gocoder-23m, 4,096 tokens: the chunk's activations leave the caches;
// bench/results/2026-11-27-llamacpp-gpu-29 call 8).
func defaultRunChunk(device string) int {
	if device == "cuda" {
		return 2048
	}
	return 512
}

// openOptions turns the flags every model-opening command shares into
// engine.Options: the device and tensor-parallel degree, the weight format
// with its DEC and GPTQ calibration, the progress bar and the log (stderr,
// unless quiet).
func openOptions(dir, device string, tp int, wf weightFlags, stderr io.Writer, quiet bool) (engine.Options, error) {
	weights, decK, calib := *wf.weights, *wf.decK, *wf.calib
	o := engine.Options{Device: device, TP: tp, Env: lookupEnv, Calib: engine.Calib{File: calib, MaxTokens: *wf.calibN}}
	if err := checkDevice(device); err != nil {
		return o, err
	}
	if err := checkTP(tp); err != nil {
		return o, err
	}
	ws, err := parseWeightSpec(weights)
	if err != nil {
		return o, err
	}
	d, err := parseDECChoice(decK)
	if err != nil {
		return o, err
	}
	switch {
	case d.on() && !ws.IsQuantized():
		return o, usageErrorf("--dec-k %s: DEC needs quantized --weights (int8, int4, int3)", d)
	case d.tuned > 0 && dir == "":
		return o, usageErrorf("--dec-k %s reads the model's %s: give --model DIR", d, model.SettingsFile)
	case ws.Method == wq.GPTQ && dir == "":
		return o, usageErrorf("--weights %s calibrates on a checkpoint: give --model DIR", ws.Short())
	case ws.Method == wq.GPTQ && calib == "":
		return o, usageErrorf("GPTQ needs a calibration text: --calib FILE")
	}
	o.Weights, o.DEC = ws, d.engine()
	if !quiet {
		o.Progress, o.Log = model.StderrProgress(), stderr
	}
	return o, nil
}

// readPrompt returns the prompt: the one PROMPT argument, standard input
// for "-", or the --prompt-file.
func readPrompt(fs *flag.FlagSet, file string) (string, error) {
	switch {
	case file != "" && fs.NArg() > 0:
		return "", usageErrorf("give PROMPT or --prompt-file, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--prompt-file: %w", err)
		}
		return string(b), nil
	case fs.NArg() != 1:
		return "", usageErrorf("want exactly one PROMPT argument (quote it; - reads standard input), got %d", fs.NArg())
	case fs.Arg(0) == "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdinPrompt+1))
		if err != nil {
			return "", fmt.Errorf("reading the prompt from standard input: %w", err)
		}
		if len(b) > maxStdinPrompt {
			return "", fmt.Errorf("the prompt on standard input is over %d bytes", maxStdinPrompt)
		}
		return string(b), nil
	}
	return fs.Arg(0), nil
}

// maxStdinPrompt bounds a prompt read from standard input.
const maxStdinPrompt = 64 << 20

// contextLimit is the context a run may use: the model's, capped by
// --ctx-size (0 for either: no cap from it).
func contextLimit(model, ctx int) int {
	switch {
	case model <= 0:
		return ctx
	case ctx <= 0:
		return model
	}
	return min(model, ctx)
}

// embeddedRepeatPenalty is the embedded model's default repetition penalty.
const embeddedRepeatPenalty = 1.3

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// jsonConstraint compiles --json (any JSON object) or --json-schema (a
// file, or the schema itself when it starts with "{"); nil for neither.
func jsonConstraint(object bool, schema string) (*constrain.Grammar, error) {
	switch {
	case object && schema != "":
		return nil, usageErrorf("--json and --json-schema: give one")
	case object:
		return constrain.JSONObject(), nil
	case schema == "":
		return nil, nil
	}
	text := []byte(schema)
	if !strings.HasPrefix(strings.TrimSpace(schema), "{") {
		b, err := os.ReadFile(schema)
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		text = b
	}
	g, err := constrain.JSONSchema(text, constrain.SchemaOptions{})
	if err != nil {
		return nil, fmt.Errorf("--json-schema: %w", err)
	}
	return g, nil
}

// headDim prints a model's head dim: "96 padded to 128" where the loader
// padded its heads for the backend (model.Config.PadHeads).
func headDim(cfg *model.Config) string {
	if cfg.StoredHeadDim != 0 {
		return fmt.Sprintf("%d padded to %d", cfg.StoredHeadDim, cfg.HeadDim)
	}
	return strconv.Itoa(cfg.HeadDim)
}

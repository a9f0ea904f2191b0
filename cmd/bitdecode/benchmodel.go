package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/bench"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// benchModelHelp is the help of 'bitdecode bench model'.
const benchModelHelp = `usage: bitdecode bench model [--preset NAME] [--ctx N,...] [--kv SPEC,...] [--weights SPEC,...] [--dec-k K,...] [--dec-settings DIR] [--batch B|max] [--cache-len N] [--tp N] [--steps S] [--logits token|full] [--no-linears] [--json FILE]

Times whole decode steps of a model with random weights of realistic scale
(std 0.02) on the GPU: embedding, every layer's cuBLASLt GEMMs, norms, RoPE,
the low-bit KV cache (append, pack, tensor-core attention) and the lm_head,
with each sequence's cache first filled to the context with random KV-like
data packed exactly as real tokens are. Each row gives the median step time,
tokens/s, the bytes a step must read (weights once, KV once) and the floor:
those bytes over the read ceiling measured in the same run. A step ends
with each sequence's greedy token picked on the GPU and copied to the host
(R token ids; what a greedy sampler needs); --logits full copies every
row's logits instead (R x vocab float32, 28 MB at 55 rows of Llama-3's
128256), the path of a sampler that needs the whole distribution.

--weights int4,int3,... runs the rows again with the linear layers in those
formats (random packed codes with plausible scales: the bytes and kernels of a
real quantized model, not its values). --dec-k adds DEC to them (random int4
residuals in mapped host memory): fixed k_chunk values, tuned:P%% with the
picks of 'bitdecode tune dec' read from --dec-settings DIR, or k_chunk by
projection (down_proj:32+v_proj:256+o_proj:64, or half3; commas also join
one value's entries until a name repeats). A table of each linear layer's GEMV
time (fp16 gemv.cu, cuBLASLt, and gemvq.cu in int4, int3 and int8) comes
first unless --no-linears.

--cache-len N sizes each cache for N tokens a sequence (default: the context
plus the steps), as serve does for the model's whole context (--ctx-size 0):
decode launches are planned for the length bucket of the longest sequence
(the power of two above it), so a short context in a long cache runs as
fast as in a cache of its own size.

--tp N runs the model on GPUs 0..N-1 with tensor parallelism (NCCL): each
GPU holds 1/N of every linear layer (query heads, the MLP's intermediate
columns and the vocabulary split N ways; a KV head is kept on N/Hkv GPUs
when there are fewer KV heads than GPUs) and the KV cache of its own heads,
and the GPUs sum their partial results twice per layer. Rows then give what
each GPU reads, the floor as those bytes over the GPU's read ceiling (the
lowest of the N, probed in the same run; the all-reduces are not in it) and
each GPU's memory in use; --batch max sizes the batch by each GPU's free
memory. A shape whose weights and one sequence do not fit a GPU's free
memory fails before its weights are made, saying which --tp fits.

Presets (a checkpoint directory's config.json works too): ` + "%s" + `

` + "%s" + `

example:
  bitdecode bench model --preset llama-3.1-8b --ctx 32k,128k --kv fp16,int4,int2
  bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max    # serving throughput
  bitdecode bench model --preset ../shared/models/gocoder-23m --ctx 4k --kv int4 --batch 32   # a checkpoint's shapes
  bitdecode bench model --ctx 1k,32k --kv int4 --weights fp16,int4,int3
  bitdecode bench model --ctx 1k --kv int4 --weights int4 --dec-k 0,tuned:5%%,tuned:20%% --dec-settings DIR
  bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv int4 --tp 2    # against the same run at --tp 1
  bitdecode bench model --preset llama-3.1-70b --ctx 32k --kv fp16,int4 --tp 2
`

func runBenchModel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		var table strings.Builder
		if err := bench.WritePresetTable(&table, bench.TableGPUBytes); err != nil {
			fmt.Fprintf(&table, "(the preset table: %v)\n", err)
		}
		fmt.Fprintf(stderr, benchModelHelp, strings.Join(bench.PresetNames(), ", "), "Sizes, and the least --tp at which the weights and one 32K int4 sequence fit "+
			"GPUs of about 78 GiB free (an 80 GB H100):\n\n"+table.String())
	}
	preset := fs.String("preset", "llama-3.1-8b", "model shapes: "+strings.Join(bench.PresetNames(), ", ")+", or a checkpoint directory (its config.json's shapes, random weights)")
	ctxs := fs.String("ctx", "32k,128k", "comma-separated contexts (tokens cached per sequence; k = 1024)")
	kvs := fs.String("kv", "fp16,int4,int2", "comma-separated KV format specs")
	weights := fs.String("weights", "fp16", "comma-separated linear-layer weight formats (fp16, int8, int4, int3; random packed codes)")
	noLinears := fs.Bool("no-linears", false, "skip the per-layer GEMV timing table")
	logits := fs.String("logits", "token", "what a step copies to the host: token (each sequence's greedy token, picked on the GPU) or full (every row's logits)")
	decK := fs.String("dec-k", "", "comma-separated DEC settings for quantized weights: k_chunk values (0: off) or tuned:P% (with --dec-settings)")
	decSettings := fs.String("dec-settings", "", "directory whose bitdecode.json holds 'bitdecode tune dec' results (for --dec-k tuned:P%)")
	batch := fs.String("batch", "1", "sequences decoded together, or max: as many as fit in GPU memory (per format and context)")
	steps := fs.Int("steps", 16, "timed decode steps per row (median reported)")
	cacheLen := fs.String("cache-len", "", "tokens each sequence's cache is sized for (k = 1024; default: the context plus the steps), e.g. the model's whole context as serve sizes it")
	tp := fs.Int("tp", 1, "tensor parallelism: run on GPUs 0..N-1, each holding 1/N of the weights and its KV heads (1: GPU 0)")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkTP(*tp); err != nil {
		return err
	}
	if *logits != "token" && *logits != "full" {
		return usageErrorf("--logits %q: want token or full", *logits)
	}
	cfg := bench.ModelConfig{Preset: *preset, Steps: *steps, Progress: stderr, SkipLinears: *noLinears, TP: *tp, FullLogits: *logits == "full"}
	js, known := bench.Presets[*preset]
	if !known {
		b, err := os.ReadFile(filepath.Join(*preset, "config.json"))
		if err != nil {
			return usageErrorf("--preset %q: neither a preset (%s) nor a checkpoint directory: %v", *preset, strings.Join(bench.PresetNames(), ", "), err)
		}
		js, cfg.ConfigJSON, cfg.Preset = string(b), b, filepath.Base(filepath.Clean(*preset))
	}
	mc, err := model.ParseConfig([]byte(js))
	if err != nil {
		return fmt.Errorf("--preset %s: %w", *preset, err)
	}
	gpuSettings, err := bench.GPUSettings(lookupEnv)
	if err != nil {
		return err
	}
	cfg.GPU = gpuSettings
	for _, s := range strings.Split(*weights, ",") {
		if s = strings.TrimSpace(s); s != "" {
			ws, err := wq.ParseSpec(s)
			if err != nil {
				return usageErrorf("--weights: %v", err)
			}
			if _, err := bench.RankOf(mc, ws, *tp); err != nil {
				return usageErrorf("%v", err)
			}
			cfg.Weights = append(cfg.Weights, s)
		}
	}
	if *decK != "" {
		choices, err := parseDECChoices(*decK)
		if err != nil {
			return err
		}
		for _, c := range choices {
			if c.tuned > 0 && *decSettings == "" {
				return usageErrorf("--dec-k %s needs --dec-settings DIR (the bitdecode.json that 'bitdecode tune dec --out DIR/bitdecode.json' wrote)", c)
			}
			cfg.DEC = append(cfg.DEC, bench.ModelDEC{KChunk: c.k, Tuned: c.tuned, Alloc: c.alloc})
		}
	}
	if *decSettings != "" {
		st, err := model.LoadSettings(*decSettings)
		if err != nil {
			return err
		}
		cfg.DECTunings = st.DEC
	}
	if *batch != "max" {
		n, err := strconv.Atoi(*batch)
		if err != nil || n < 1 {
			return usageErrorf("--batch %q: want a positive number or max", *batch)
		}
		cfg.Batch = n
	}
	for _, s := range strings.Split(*kvs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, err := parseSpecChecked(s); err != nil {
				return err
			}
			cfg.Formats = append(cfg.Formats, s)
		}
	}
	for _, s := range strings.Split(*ctxs, ",") {
		n, err := parseTokens(strings.ToLower(strings.TrimSpace(s)))
		if err != nil || n < 1 {
			return usageErrorf("--ctx %q: want token counts such as 32k,131072", s)
		}
		cfg.Contexts = append(cfg.Contexts, n)
	}
	if *cacheLen != "" {
		n, err := parseTokens(strings.ToLower(strings.TrimSpace(*cacheLen)))
		if err != nil || n < 1 {
			return usageErrorf("--cache-len %q: want a token count such as 128k", *cacheLen)
		}
		cfg.CacheLen = n
	}
	if err := needGPU("bench model"); err != nil {
		return err
	}
	rep, err := bench.RunModelGPU(cfg)
	if err != nil {
		return err
	}
	return writeReport(stdout, stderr, rep, *jsonPath)
}

package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/backend/tp"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/kvcache/gpukv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// Presets are model configs (Hugging Face config.json) for end-to-end
// benchmarks with random weights: the shapes of checkpoints that cannot be
// downloaded here.
var Presets = map[string]string{
	"llama-3.1-8b": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
		"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
		"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
		"vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
		"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
		"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
		"tie_word_embeddings": false, "bos_token_id": 128000, "eos_token_id": 128001}`,
	// The 70B class: 141 GB of fp16 weights, more than one 80 GB GPU holds
	// (WritePresetTable: needs --tp 2).
	"llama-3.1-70b": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
		"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
		"num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
		"vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
		"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
		"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
		"tie_word_embeddings": false, "bos_token_id": 128000, "eos_token_id": 128001}`,
	"llama-3.2-1b": `{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
		"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
		"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
		"vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
		"rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
		"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
		"tie_word_embeddings": true, "bos_token_id": 128000, "eos_token_id": 128001}`,
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ModelConfig configures RunModelGPU.
type ModelConfig struct {
	// GPU holds the backend's settings and the kernels' tuning
	// (GPUSettings).
	GPU    GPUOptions
	Preset string // a key of Presets, or the name shown for ConfigJSON
	// ConfigJSON, when set, is a checkpoint's config.json (Hugging Face)
	// whose shapes are timed instead of a preset's.
	ConfigJSON []byte
	Formats    []string // KV specs
	// Weights are the linear layers' formats (wq specs); none means fp16.
	// Integer formats are random packed matrices (backend.RandomQuantLoader).
	Weights []string
	// SkipLinears skips the per-layer GEMV table.
	SkipLinears bool
	// DEC lists the DEC settings to time quantized weights with: k_chunk
	// values (0: off) or tuned slowdown targets (DECTuned > 0) picked from
	// DECTunings by weight format (model.DECSettingsKey). None means off.
	DEC        []ModelDEC
	DECTunings map[string]*model.DECTuning
	Contexts   []int // cached tokens per sequence before the timed steps
	Batch      int   // sequences decoded together; 0: as many as fit in GPU memory (per format and context; per rank with TP)
	// TP is the tensor-parallel degree: 0 or 1 runs on GPU 0; N > 1 on
	// GPUs 0..N-1 (gpu.OpenGroup, backend/tp), each rank holding its shard
	// of the weights and of the KV cache.
	TP int
	// FullLogits copies every step's whole logits to the host (R x Vocab
	// float32, 28 MB at 55 rows of 128256), as before v23; otherwise each
	// sequence asks Forward for its greedy token alone (model.OutputToken:
	// picked on the GPU, R int32 copied back; decode-step.md v23).
	FullLogits bool
	Steps      int // timed decode steps (default 16)
	Warmup     int // untimed steps first (default 3)
	// CacheLen, if larger than a row's context plus its steps, is the
	// tokens each sequence's cache is sized for (kvcache.Options.MaxLen):
	// a cache sized for the model's whole context, as serve's by default.
	CacheLen int
	Progress io.Writer
}

// ModelDEC is one DEC setting of the model benchmark: a fixed k_chunk for
// every layer (n_tb the backend's default), the per-shape picks of a
// 'tune dec' run for a slowdown target in percent, or k_chunk by
// projection (Alloc, not nil).
type ModelDEC struct {
	KChunk int
	Tuned  float64
	Alloc  model.DECAlloc
}

// String names the setting as --dec-k takes it.
func (d ModelDEC) String() string {
	if d.Alloc != nil {
		return d.Alloc.String()
	}
	if d.Tuned > 0 {
		return fmt.Sprintf("tuned:%g%%", d.Tuned)
	}
	return fmt.Sprint(d.KChunk)
}

// ModelRow is one (format, context) point of the model benchmark.
type ModelRow struct {
	Weights   string  `json:"weights"`
	DEC       string  `json:"dec,omitempty"` // k_chunk or tuned:P%; "" without DEC
	KV        string  `json:"kv"`
	Context   int     `json:"context"`
	CacheLen  int     `json:"cache_len,omitempty"` // ModelConfig.CacheLen where it sized the cache
	Batch     int     `json:"batch"`
	MsPerStep float64 `json:"ms_per_step"` // median decode step (Batch tokens)
	// MeanMs is the mean of the timed steps: with bw formats, 16 steps (the
	// default) hold one re-tier of period r16, so the mean includes its cost.
	MeanMs       float64 `json:"mean_ms_per_step"`
	TokensPerSec float64 `json:"tokens_per_s"`
	WeightBytes  int64   `json:"weight_bytes_read"`
	KVBytes      int64   `json:"kv_bytes_read"`
	FloorMs      float64 `json:"floor_ms"` // (weights + KV bytes) / read ceiling, per GPU with TP
	OfFloor      float64 `json:"floor_fraction"`
	KVMemory     int64   `json:"kv_memory_bytes"` // the cache's memory, all ranks together
	// TP is the number of GPUs; with TP > 1, WeightBytes and KVBytes are
	// what each GPU reads (the largest rank's). MemUsed is each GPU's
	// memory in use with the model and the filled cache.
	TP      int     `json:"tp"`
	MemUsed []int64 `json:"mem_used_per_gpu_bytes,omitempty"`
	// Steps is every step, the warm-up ones first: its time and how each
	// rank's op queue ran it (CUDA graphs captured, replayed, flushes run
	// op by op), so that a step that captures instead of replaying shows.
	Steps []ModelStep `json:"steps,omitempty"`
}

// ModelStep is one decode step of a ModelRow.
type ModelStep struct {
	Ms     float64          `json:"ms"`
	Warmup bool             `json:"warmup,omitempty"`
	Graphs []gpu.GraphStats `json:"graphs"` // per rank, this step's flushes
	// DECLists is how many of the step's DEC GEMVs (rank 0's) took their
	// list from the op that wrote their x (gpu.Backend.DECListsGiven; none
	// with BITDECODE_NO_DEC_NORM_SELECT): 4 a layer but layer 0's 3 when
	// it works.
	DECLists int64 `json:"dec_lists_given,omitempty"`
}

// GraphLine sums the timed steps' flushes per rank, per step: "rank 0:
// 0.0 captured, 12.0 replayed, 1.0 direct a step; ...".
func (r *ModelRow) GraphLine() string {
	var ranks []string
	for rank := range len(r.Steps[0].Graphs) {
		var sum gpu.GraphStats
		n := 0
		for _, s := range r.Steps {
			if s.Warmup {
				continue
			}
			g := s.Graphs[rank]
			sum.Captured, sum.Replayed, sum.Direct = sum.Captured+g.Captured, sum.Replayed+g.Replayed, sum.Direct+g.Direct
			n++
		}
		f := float64(max(n, 1))
		ranks = append(ranks, fmt.Sprintf("rank %d: %.1f captured, %.1f replayed, %.1f direct a step", rank,
			float64(sum.Captured)/f, float64(sum.Replayed)/f, float64(sum.Direct)/f))
	}
	line := "CUDA graphs over the timed steps: " + strings.Join(ranks, "; ")
	if last := r.Steps[len(r.Steps)-1].Graphs[0]; last.LastDirect != "" {
		line += " (rank 0's last direct flush: " + last.LastDirect + ")"
	}
	return line
}

// StepLine lists every step's time and rank 0's flushes as
// captured/replayed/direct, the warm-up steps in brackets.
func (r *ModelRow) StepLine() string {
	var sb strings.Builder
	sb.WriteString("steps (ms, rank 0's flushes captured/replayed/direct):")
	for _, s := range r.Steps {
		g := s.Graphs[0]
		item := fmt.Sprintf("%.2f %d/%d/%d", s.Ms, g.Captured, g.Replayed, g.Direct)
		if s.Warmup {
			item = "[" + item + "]"
		}
		sb.WriteString(" " + item)
	}
	return sb.String()
}

// ModelReport is the whole run.
type ModelReport struct {
	Device   string  `json:"device"`
	Date     string  `json:"date"`
	Preset   string  `json:"preset"`
	ReadGBps float64 `json:"read_ceiling_gb_per_s"` // the lowest of the GPUs' with TP
	// TP is the number of GPUs and RankGBps each one's read ceiling.
	TP       int       `json:"tp"`
	RankGBps []float64 `json:"read_ceiling_per_gpu_gb_per_s,omitempty"`
	// Logits is what a step copies to the host: "token" (each row's
	// greedy token, picked on the GPU) or "full" (every row's logits).
	Logits  string      `json:"logits"`
	Linears []LinearRow `json:"linears"`
	Rows    []ModelRow  `json:"rows"`
}

// RunModelGPU measures decode steps of a preset model with random weights
// on GPU 0, or with cfg.TP > 1 on GPUs 0..TP-1 (tensor parallelism), with
// the KV cache of each format filled to each context with random KV-like
// data (FillRandom: packed exactly as real tokens are). A step is a whole
// forward pass (embedding, every layer's GEMMs, norms and low-bit
// attention, lm_head; with TP the two all-reduces per layer) plus what
// the host gets back: each sequence's greedy token, picked on the GPU
// (model.OutputToken; a backend without backend.Argmaxer, as TP's,
// downloads the logits instead), or with cfg.FullLogits every row's
// logits. The floor is the bytes a step must read on a
// GPU (its shard of every weight matrix once, its KV heads once) over that
// GPU's read ceiling measured in the same run; with TP the slowest GPU's,
// and the all-reduces are not in it. A shape that does not fit a GPU fails
// before its weights are made, saying at which --tp it fits.
func RunModelGPU(cfg ModelConfig) (*ModelReport, error) {
	js, ok := Presets[cfg.Preset]
	if cfg.ConfigJSON != nil {
		js, ok = string(cfg.ConfigJSON), true
	}
	if !ok {
		return nil, fmt.Errorf("bench: no preset %q (have %v)", cfg.Preset, PresetNames())
	}
	mc, err := model.ParseConfig([]byte(js))
	if err != nil {
		return nil, fmt.Errorf("bench: preset %s: %w", cfg.Preset, err)
	}
	// The GPU runs a head dim its kernels lack padded (model.Config.PadHeads,
	// as the loader pads it): the sizes and fits below are the padded ones.
	if dp, ok := kernels.PadHeadDim(mc.HeadDim); ok {
		if mc, err = mc.PadHeads(dp); err != nil {
			return nil, fmt.Errorf("bench: preset %s: %w", cfg.Preset, err)
		}
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 16
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3
	}
	cfg.TP = max(cfg.TP, 1)
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	weights := cfg.Weights
	if len(weights) == 0 {
		weights = []string{"fp16"}
	}
	// Every weight format must split before a GPU is touched.
	for _, ws := range weights {
		wspec, err := wq.ParseSpec(ws)
		if err != nil {
			return nil, err
		}
		if _, err := RankOf(mc, wspec, cfg.TP); err != nil {
			return nil, err
		}
	}
	g, err := openGPUs(cfg.TP, cfg.GPU)
	if err != nil {
		return nil, err
	}
	defer g.be.Close()
	rep := &ModelReport{Date: time.Now().UTC().Format("2006-01-02"), Preset: cfg.Preset, TP: cfg.TP, Logits: "token"}
	if cfg.FullLogits {
		rep.Logits = "full"
	}
	for r, rank := range g.ranks {
		dev := rank.Device()
		bw, err := dev.ProbeBandwidth()
		if err != nil {
			return nil, fmt.Errorf("bench: GPU %d: %w", r, err)
		}
		if r == 0 || bw.GBps < rep.ReadGBps {
			rep.ReadGBps = bw.GBps
		}
		rep.Device = dev.Name()
		if cfg.TP > 1 {
			rep.RankGBps = append(rep.RankGBps, bw.GBps)
			rep.Device = fmt.Sprintf("%d x %s", cfg.TP, dev.Name())
		}
		fmt.Fprintf(progress, "GPU %d, %s: read ceiling %.0f GB/s\n", r, dev.Name(), bw.GBps)
	}
	if !cfg.SkipLinears {
		// With TP the table times one rank's shard shapes on GPU 0.
		r, err := RankOf(mc, wq.Spec{}, cfg.TP)
		if err != nil {
			return nil, err
		}
		if rep.Linears, err = TimeLinears(g.ranks[0].Device(), r.shardConfig(mc), max(cfg.Batch, 1), progress); err != nil {
			return nil, err
		}
	}
	for _, ws := range weights {
		wspec, err := wq.ParseSpec(ws)
		if err != nil {
			return nil, err
		}
		if err := g.checkFits(cfg, mc, wspec); err != nil {
			return nil, err
		}
		decs := cfg.DEC
		if len(decs) == 0 || !wspec.IsQuantized() {
			decs = []ModelDEC{{}}
		}
		for _, d := range decs {
			decFor, err := decChoices(mc, wspec, d, cfg.DECTunings)
			if err != nil {
				return nil, err
			}
			if err := runWeights(rep, g, mc, wspec, d, decFor, cfg, progress); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// gpus are the GPUs a model benchmark runs on: one backend, or a
// tensor-parallel backend over its ranks.
type gpus struct {
	be    backend.Backend // ranks[0], or the tp.Backend over ranks
	ranks []*gpu.Backend
}

// graphStats returns every rank's CUDA graph counts so far.
func (g *gpus) graphStats() []gpu.GraphStats {
	st := make([]gpu.GraphStats, len(g.ranks))
	for r, b := range g.ranks {
		st[r] = b.GraphStats()
	}
	return st
}

// openGPUs opens GPU 0, or for n > 1 the group of GPUs 0..n-1 and the
// tensor-parallel backend over it.
func openGPUs(n int, o GPUOptions) (*gpus, error) {
	if n == 1 {
		be, err := gpu.Open(0, o)
		if err != nil {
			return nil, err
		}
		return &gpus{be: be, ranks: []*gpu.Backend{be}}, nil
	}
	ranks, comm, err := gpu.OpenGroup(n, o)
	if err != nil {
		return nil, fmt.Errorf("bench: --tp %d: %w", n, err)
	}
	bs := make([]backend.Backend, len(ranks))
	for i, r := range ranks {
		bs[i] = r
	}
	tb, err := tp.New(bs, comm)
	if err != nil {
		errs := []error{fmt.Errorf("bench: --tp %d: %w", n, err), comm.Close()}
		for _, r := range ranks {
			errs = append(errs, r.Close())
		}
		return nil, errors.Join(errs...)
	}
	return &gpus{be: tb, ranks: ranks}, nil
}

// memInfo returns each GPU's free and total memory now.
func (g *gpus) memInfo() (free, total []int64, err error) {
	for r, rank := range g.ranks {
		var f, t uint64
		if err := rank.Do(func(x *cuda.Ctx) error {
			var err error
			f, t, err = x.MemInfo()
			return err
		}); err != nil {
			return nil, nil, fmt.Errorf("bench: GPU %d: %w", r, err)
		}
		free, total = append(free, int64(f)), append(total, int64(t))
	}
	return free, total, nil
}

// resolveKV parses a KV format spec and resolves it for head dimension d.
func resolveKV(spec string, d int) (kv.Spec, kv.Format, error) {
	sp, err := kv.ParseSpec(spec)
	if err != nil {
		return kv.Spec{}, kv.Format{}, err
	}
	f, err := sp.Resolve(d)
	return sp, f, err
}

// checkFits fails, saying at which --tp the shape fits, unless weights w
// and the smallest sequence of the run fit the GPUs' free memory.
func (g *gpus) checkFits(cfg ModelConfig, mc *model.Config, w wq.Spec) error {
	free, _, err := g.memInfo()
	if err != nil {
		return err
	}
	r, err := RankOf(mc, w, cfg.TP)
	if err != nil {
		return err
	}
	var least kv.Format
	leastBytes, leastCtx := int64(-1), 0
	for _, spec := range cfg.Formats {
		_, f, err := resolveKV(spec, mc.HeadDim)
		if err != nil {
			return err
		}
		for _, ctx := range cfg.Contexts {
			if b := r.SeqBytes(mc, f, ctx); leastBytes < 0 || b < leastBytes {
				least, leastBytes, leastCtx = f, b, ctx
			}
		}
	}
	if leastBytes < 0 {
		return nil
	}
	memBytes := slices.Min(free)
	if ok, _ := r.Fits(mc, least, leastCtx, memBytes); !ok {
		return FitError(cfg.Preset, mc, w, least, leastCtx, r, memBytes)
	}
	return nil
}

// runWeights times every (KV format, context) row with the linear layers in
// format wspec.
func runWeights(rep *ModelReport, g *gpus, mc *model.Config, wspec wq.Spec, d ModelDEC, decFor func(N, K int) wq.DEC, cfg ModelConfig, progress io.Writer) error {
	decName := ""
	if decFor != nil || d.Alloc.On() {
		decName = d.String()
	}
	fmt.Fprintf(progress, "building %s with random %s weights (DEC %s)\n", cfg.Preset, wspec, cmp.Or(decName, "off"))
	start := time.Now()
	r, err := RankOf(mc, wspec, cfg.TP)
	if err != nil {
		return err
	}
	var m model.Model
	if d.Alloc != nil {
		m, err = model.NewRandomWeightsAlloc(mc, g.be, 1, wspec, d.Alloc)
	} else {
		m, err = model.NewRandomWeights(mc, g.be, 1, wspec, decFor)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	if err := g.be.Sync(); err != nil {
		return err
	}
	fmt.Fprintf(progress, "weights ready in %v (%.2f GB of matrices read per step per GPU)\n", time.Since(start).Round(time.Millisecond), float64(r.WeightBytesRead)/1e9)
	if err := g.writeMemory(progress, "with the weights"); err != nil {
		return err
	}
	for _, spec := range cfg.Formats {
		sp, f, err := resolveKV(spec, mc.HeadDim)
		if err != nil {
			return err
		}
		for _, ctx := range cfg.Contexts {
			rc := cfg
			if rc.Batch == 0 {
				if rc.Batch, err = g.maxBatch(mc, r, f, ctx+cfg.Steps+cfg.Warmup+1); err != nil {
					return err
				}
			}
			row, err := g.timeModel(m, mc, r, sp, f, ctx, rc)
			if err != nil {
				return fmt.Errorf("bench: %s weights, %s KV at %d tokens: %w", wspec, spec, ctx, err)
			}
			row.Weights = wspec.String()
			row.DEC = decName
			row.WeightBytes = r.WeightBytesRead
			row.FloorMs = float64(row.WeightBytes+row.KVBytes) / (rep.ReadGBps * 1e9) * 1e3
			row.OfFloor = row.FloorMs / row.MsPerStep
			cacheNote := ""
			if row.CacheLen > 0 {
				cacheNote = fmt.Sprintf(" (cache of %d)", row.CacheLen)
			}
			fmt.Fprintf(progress, "%-8s %-8s ctx %6d%s B %d TP %d: %.2f ms/step (%.1f tok/s), floor %.2f ms (%.0f%%)\n",
				wspec.Short(), spec, ctx, cacheNote, rc.Batch, cfg.TP, row.MsPerStep, row.TokensPerSec, row.FloorMs, 100*row.OfFloor)
			fmt.Fprintf(progress, "  %s\n  %s\n", row.GraphLine(), row.StepLine())
			rep.Rows = append(rep.Rows, *row)
		}
	}
	return nil
}

// writeMemory writes one line per GPU: its memory in use and total.
func (g *gpus) writeMemory(w io.Writer, when string) error {
	free, total, err := g.memInfo()
	if err != nil {
		return err
	}
	for r := range g.ranks {
		fmt.Fprintf(w, "GPU %d %s: %.2f GiB in use of %.2f GiB\n", r, when, gib(total[r]-free[r]), gib(total[r]))
	}
	return nil
}

// decChoices returns the DEC of each linear shape for setting d, or nil for
// none.
func decChoices(mc *model.Config, w wq.Spec, d ModelDEC, tunings map[string]*model.DECTuning) (func(N, K int) wq.DEC, error) {
	switch {
	case d.Tuned > 0:
		key := model.DECSettingsKey(w)
		tu := tunings[key]
		if tu == nil {
			return nil, fmt.Errorf("bench: DEC %s: no tuning for %s weights (run bitdecode tune dec --shapes ... --weights %s)", d, key, key)
		}
		choices, err := tu.Choices(d.Tuned)
		if err != nil {
			return nil, fmt.Errorf("bench: DEC %s: %w", d, err)
		}
		shapes, err := model.LinearShapes(mc)
		if err != nil {
			return nil, err
		}
		for _, sh := range shapes {
			if _, ok := choices[sh.Shape]; !ok {
				return nil, fmt.Errorf("bench: DEC %s: shape %s is not tuned", d, sh.Shape)
			}
		}
		return func(N, K int) wq.DEC {
			c := choices[model.Shape{N: N, K: K}]
			return wq.DEC{KChunk: c.KChunk, Blocks: c.Blocks}
		}, nil
	case d.KChunk > 0:
		return func(N, K int) wq.DEC { return wq.DEC{KChunk: d.KChunk} }, nil
	}
	return nil, nil
}

// maxBatch returns how many sequences of l tokens in format f fit in the
// device memory that is free now on every GPU (the weights are loaded), by
// the format's accounting per rank (Rank.SeqBytes), leaving gpuReserve.
func (g *gpus) maxBatch(c *model.Config, r Rank, f kv.Format, l int) (int, error) {
	free, _, err := g.memInfo()
	if err != nil {
		return 0, err
	}
	perSeq := r.SeqBytes(c, f, l)
	n := (slices.Min(free) - gpuReserve) / perSeq
	if n < 1 {
		return 0, fmt.Errorf("bench: one sequence of %d tokens in %s (%d MiB per GPU) does not fit in %d MiB free", l, f.Spec.String(), perSeq>>20, slices.Min(free)>>20)
	}
	return int(n), nil
}

// shardConfig is the model config of one rank's shard: its query and KV
// heads, intermediate columns and vocabulary rows (the shapes its linear
// layers have).
func (r Rank) shardConfig(c *model.Config) *model.Config {
	s := *c
	s.Heads, s.KVHeads, s.Intermediate, s.Vocab = r.Heads, r.KVHeads, r.Intermediate, r.Vocab
	return &s
}

// modelCache is what timeModel needs of a GPU cache filled with random
// tokens: gpukv.Paged, gpukv.Planes for bw formats, or with TP the cache
// over the ranks' caches that kvcache.New builds.
type modelCache interface {
	kvcache.Cache
	FillRandom(id, n int, seed uint32) error
	Bytes(id int) (bytes, fp16Bytes int64)
}

// newCache returns the cache of spec sp for the benchmark's GPUs.
func (g *gpus) newCache(mc *model.Config, sp kv.Spec, opts kvcache.Options) (modelCache, error) {
	if len(g.ranks) == 1 {
		if sp.Planes.On {
			// The bw cache re-tiers every layer at the first (warm-up) step
			// after the fill, then every Period steps.
			return gpukv.NewPlanes(g.ranks[0], mc, sp, opts)
		}
		return gpukv.NewPaged(g.ranks[0], mc, sp.WithDefaultRotation(mc.HeadDim), opts)
	}
	if !sp.Planes.On {
		sp = sp.WithDefaultRotation(mc.HeadDim)
	}
	c, err := kvcache.New(g.be, mc, sp, opts)
	if err != nil {
		return nil, err
	}
	mcache, ok := c.(modelCache)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("bench: the tensor-parallel %s cache (%T) cannot be filled with random tokens (no FillRandom)", sp, c)
	}
	return mcache, nil
}

func (g *gpus) timeModel(m model.Model, mc *model.Config, r Rank, sp kv.Spec, f kv.Format, ctx int, cfg ModelConfig) (*ModelRow, error) {
	steps := cfg.Warmup + cfg.Steps
	// A batch-invariant backend (BITDECODE_BATCH_INVARIANT=1) gets a
	// batch-invariant cache, as serve's default pairs them.
	opts := kvcache.Options{MaxSeqs: cfg.Batch, MaxLen: max(ctx+steps+1, cfg.CacheLen), MaxChunk: 16, BatchInvariant: cfg.GPU.BatchInvariant}
	cache, err := g.newCache(mc, sp, opts)
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	for s := range cfg.Batch {
		if err := cache.FillRandom(s, ctx, uint32(1000+s)); err != nil {
			return nil, err
		}
	}
	var times []float64
	var stepRows []ModelStep
	before := g.graphStats()
	lists := g.ranks[0].DECListsGiven()
	for i := range steps {
		var b model.Batch
		for s := range cfg.Batch {
			b.Add(s, cache.Len(s), int32((i*7919+s*104729)%mc.Vocab))
			if !cfg.FullLogits {
				b.Seqs[s].Output = model.OutputToken
			}
		}
		t0 := time.Now()
		if _, err := m.Forward(&b, cache); err != nil {
			return nil, err
		}
		ms := float64(time.Since(t0).Microseconds()) / 1e3
		if i >= cfg.Warmup {
			times = append(times, ms)
		}
		after := g.graphStats()
		st := ModelStep{Ms: ms, Warmup: i < cfg.Warmup}
		for r := range after {
			st.Graphs = append(st.Graphs, gpu.GraphStats{
				Captured: after[r].Captured - before[r].Captured,
				Replayed: after[r].Replayed - before[r].Replayed,
				Direct:   after[r].Direct - before[r].Direct,
			})
			if st.Graphs[r].Direct > 0 {
				st.Graphs[r].LastDirect = after[r].LastDirect
			}
		}
		n := g.ranks[0].DECListsGiven()
		st.DECLists, lists = n-lists, n
		stepRows = append(stepRows, st)
		before = after
	}
	mean := 0.0
	for _, t := range times {
		mean += t / float64(len(times))
	}
	sort.Float64s(times)
	med := times[len(times)/2]
	kvRead := int64(0)
	for s := range cfg.Batch {
		kvRead += r.KVBytesRead(mc, f, cache.Len(s))
	}
	if ts, ok := cache.TierStats(); ok && ts.Read.FP16Bytes > 0 {
		// bw: the bytes the policy's tiers read (planes and index), in the
		// proportion of every step so far.
		kvRead = int64(float64(kvRead) * float64(ts.Read.PlaneBytes+ts.Read.IndexBytes) / float64(ts.Read.FP16Bytes))
	}
	mem, _ := cache.Bytes(0)
	row := &ModelRow{KV: sp.String(), Context: ctx, Batch: cfg.Batch, MsPerStep: med, MeanMs: mean, TokensPerSec: float64(cfg.Batch) / med * 1e3,
		KVBytes: kvRead, KVMemory: mem * int64(cfg.Batch), TP: cfg.TP, Steps: stepRows}
	if opts.MaxLen > ctx+steps+1 {
		row.CacheLen = opts.MaxLen
	}
	free, total, err := g.memInfo()
	if err != nil {
		return nil, err
	}
	for i := range free {
		row.MemUsed = append(row.MemUsed, total[i]-free[i])
	}
	return row, nil
}

// WriteTable writes the report as Markdown tables.
func (rep *ModelReport) WriteTable(w io.Writer) {
	if len(rep.Linears) > 0 {
		shard := ""
		if rep.TP > 1 {
			shard = fmt.Sprintf(" (one GPU's shard at --tp %d, timed on GPU 0)", rep.TP)
		}
		fmt.Fprintf(w, "Linear layers of one decode step, %s shapes%s, %s, %d rows (weights fp16, cold in L2)\n\n", rep.Preset, shard, rep.Device, rep.Linears[0].T)
		fmt.Fprintln(w, "| layer | N x K | gemv.cu us | of ceiling | cuBLASLt us | int4 gemvq.cu us | GB/s | of ceiling | int3 us | of ceiling | int8 us | of ceiling |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
		pct := func(gbps float64) float64 { return 100 * gbps / rep.ReadGBps }
		for _, r := range rep.Linears {
			fmt.Fprintf(w, "| %s | %dx%d | %.1f | %.0f%% | %.1f | %.1f | %.0f | %.0f%% | %.1f | %.0f%% | %.1f | %.0f%% |\n", r.Name, r.N, r.K, r.GEMVUS, pct(r.GEMVGBps),
				r.CublasUS, r.Int4US, r.Int4GBps, pct(r.Int4GBps), r.Int3US, pct(r.Int3GBps), r.Int8US, pct(r.Int8GBps))
		}
		fmt.Fprintln(w)
	}
	ceiling := fmt.Sprintf("read ceiling %.0f GB/s (same run)", rep.ReadGBps)
	perGPU := ""
	if rep.TP > 1 {
		var each []string
		for _, g := range rep.RankGBps {
			each = append(each, fmt.Sprintf("%.0f", g))
		}
		ceiling = fmt.Sprintf("tensor parallelism over %d GPUs; read ceilings %s GB/s (same run), the floor is the bytes each GPU reads over the lowest, without the all-reduces", rep.TP, strings.Join(each, ", "))
		perGPU = " per GPU"
	}
	logits := "each row's greedy token picked on the GPU (R int32 to the host)"
	if rep.Logits == "full" {
		logits = "every row's logits to the host (--logits full)"
	}
	fmt.Fprintf(w, "Decode step, %s shapes with random weights, %s, %s; %s; a step returns %s\n\n", rep.Preset, rep.Device, rep.Date, ceiling, logits)
	fmt.Fprintf(w, "| weights | DEC k_chunk | KV | context | batch | TP | ms/step | mean ms | tokens/s | weights read%s | KV read%s | floor ms | floor/time | KV memory | GPU memory in use |\n", perGPU, perGPU)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		var mem []string
		for _, b := range r.MemUsed {
			mem = append(mem, fmt.Sprintf("%.1f", gib(b)))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %.2f | %.2f | %.1f | %.2f GB | %.2f GB | %.2f | %.0f%% | %.2f GB | %s GiB |\n", r.Weights, cmp.Or(r.DEC, "-"), r.KV, r.Context, r.Batch, max(r.TP, 1), r.MsPerStep, r.MeanMs, r.TokensPerSec,
			float64(r.WeightBytes)/1e9, float64(r.KVBytes)/1e9, r.FloorMs, 100*r.OfFloor, float64(r.KVMemory)/1e9, cmp.Or(strings.Join(mem, ", "), "-"))
	}
}

// WriteJSON writes the report to path.
func (rep *ModelReport) WriteJSON(path string) error {
	return writeJSON(path, rep)
}

package bench

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
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
	Batch      int   // sequences decoded together; 0: as many as fit in GPU memory (per format and context)
	Steps      int   // timed decode steps (default 16)
	Warmup     int   // untimed steps first (default 3)
	Progress   io.Writer
}

// ModelDEC is one DEC setting of the model benchmark: a fixed k_chunk for
// every layer (n_tb the backend's default), or the per-shape picks of a
// 'tune dec' run for a slowdown target in percent.
type ModelDEC struct {
	KChunk int
	Tuned  float64
}

// String names the setting as --dec-k takes it.
func (d ModelDEC) String() string {
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
	Batch     int     `json:"batch"`
	MsPerStep float64 `json:"ms_per_step"` // median decode step (Batch tokens)
	// MeanMs is the mean of the timed steps: with bw formats, 16 steps (the
	// default) hold one re-tier of period r16, so the mean includes its cost.
	MeanMs       float64 `json:"mean_ms_per_step"`
	TokensPerSec float64 `json:"tokens_per_s"`
	WeightBytes  int64   `json:"weight_bytes_read"`
	KVBytes      int64   `json:"kv_bytes_read"`
	FloorMs      float64 `json:"floor_ms"` // (weights + KV bytes) / read ceiling
	OfFloor      float64 `json:"floor_fraction"`
	KVMemory     int64   `json:"kv_memory_bytes"`
}

// ModelReport is the whole run.
type ModelReport struct {
	Device   string      `json:"device"`
	Date     string      `json:"date"`
	Preset   string      `json:"preset"`
	ReadGBps float64     `json:"read_ceiling_gb_per_s"`
	Linears  []LinearRow `json:"linears"`
	Rows     []ModelRow  `json:"rows"`
}

// RunModelGPU measures decode steps of a preset model with random weights
// on GPU 0, with the KV cache of each format filled to each context with
// random KV-like data (GPUCache.FillRandom: packed exactly as real tokens
// are). A step is a whole forward pass (embedding, 32 layers of GEMMs,
// norms and low-bit attention, lm_head) plus the logits' copy to the host.
// The floor is the bytes a step must read (every weight matrix once, the
// KV cache once) over the read ceiling measured in the same run.
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
	if cfg.Steps <= 0 {
		cfg.Steps = 16
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	be, err := gpu.Open(0, cfg.GPU)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	dev := be.Device()
	bw, err := dev.ProbeBandwidth()
	if err != nil {
		return nil, err
	}
	rep := &ModelReport{Device: dev.Name(), Date: time.Now().UTC().Format("2006-01-02"), Preset: cfg.Preset, ReadGBps: bw.GBps}
	fmt.Fprintf(progress, "%s: read ceiling %.0f GB/s\n", dev.Name(), bw.GBps)
	if !cfg.SkipLinears {
		if rep.Linears, err = TimeLinears(dev, mc, max(cfg.Batch, 1), progress); err != nil {
			return nil, err
		}
	}
	weights := cfg.Weights
	if len(weights) == 0 {
		weights = []string{"fp16"}
	}
	for _, ws := range weights {
		wspec, err := wq.ParseSpec(ws)
		if err != nil {
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
			if err := runWeights(rep, be, mc, wspec, d, decFor, cfg, progress); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// runWeights times every (KV format, context) row with the linear layers in
// format wspec.
func runWeights(rep *ModelReport, be *gpu.Backend, mc *model.Config, wspec wq.Spec, d ModelDEC, decFor func(N, K int) wq.DEC, cfg ModelConfig, progress io.Writer) error {
	decName := ""
	if decFor != nil {
		decName = d.String()
	}
	fmt.Fprintf(progress, "building %s with random %s weights (DEC %s)\n", cfg.Preset, wspec, cmp.Or(decName, "off"))
	start := time.Now()
	m, err := model.NewRandomWeights(mc, be, 1, wspec, decFor)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := be.Sync(); err != nil {
		return err
	}
	weightBytes := linearWeightBytes(mc, wspec)
	fmt.Fprintf(progress, "weights ready in %v (%.2f GB of matrices read per step)\n", time.Since(start).Round(time.Millisecond), float64(weightBytes)/1e9)
	for _, spec := range cfg.Formats {
		sp, err := kv.ParseSpec(spec)
		if err != nil {
			return err
		}
		f, err := sp.Resolve(mc.HeadDim)
		if err != nil {
			return err
		}
		for _, ctx := range cfg.Contexts {
			rc := cfg
			if rc.Batch == 0 {
				if rc.Batch, err = maxBatch(be, mc, f, ctx+cfg.Steps+cfg.Warmup+1); err != nil {
					return err
				}
			}
			row, err := timeModel(be, m, mc, sp, f, ctx, rc)
			if err != nil {
				return fmt.Errorf("bench: %s weights, %s KV at %d tokens: %w", wspec, spec, ctx, err)
			}
			row.Weights = wspec.String()
			row.DEC = decName
			row.WeightBytes = weightBytes
			row.FloorMs = float64(row.WeightBytes+row.KVBytes) / (rep.ReadGBps * 1e9) * 1e3
			row.OfFloor = row.FloorMs / row.MsPerStep
			fmt.Fprintf(progress, "%-8s %-8s ctx %6d B %d: %.2f ms/step (%.1f tok/s), floor %.2f ms (%.0f%%)\n",
				wspec.Short(), spec, ctx, rc.Batch, row.MsPerStep, row.TokensPerSec, row.FloorMs, 100*row.OfFloor)
			rep.Rows = append(rep.Rows, *row)
		}
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

// maxBatchReserve is the device memory maxBatch leaves for activations,
// split-KV workspaces and the CUDA context.
const maxBatchReserve = 3 << 30

// maxBatch returns how many sequences of l tokens in format f fit in the
// device memory that is free now (the weights are loaded), by the format's
// accounting: packed blocks plus one residual slot per sequence and layer,
// and the decode workspace (about 2 KiB per 512-token split and KV head).
func maxBatch(be *gpu.Backend, c *model.Config, f kv.Format, l int) (int, error) {
	var free uint64
	if err := be.Do(func(x *cuda.Ctx) error {
		var err error
		free, _, err = x.MemInfo()
		return err
	}); err != nil {
		return 0, err
	}
	nr := f.Residual
	blocks := int64((l + nr - 1) / nr)
	perSeq := int64(c.Layers*c.KVHeads)*(blocks*int64(f.BlockBytes())+int64(nr*c.HeadDim*2*2)) +
		int64(c.KVHeads)*int64((l+511)/512)*8*int64(c.HeadDim)*4
	n := (int64(free) - maxBatchReserve) / perSeq
	if n < 1 {
		return 0, fmt.Errorf("bench: one sequence of %d tokens in %s (%d MiB) does not fit in %d MiB free", l, f.Spec.String(), perSeq>>20, free>>20)
	}
	return int(n), nil
}

// linearWeightBytes is the bytes of every matrix a decode step reads: the
// projections of each layer in format w (codes and scale pairs) and the
// fp16 lm_head (the embedding lookup reads one row per token).
func linearWeightBytes(c *model.Config, w wq.Spec) int64 {
	H, I, qd, kvd := c.Hidden, c.Intermediate, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	mat := func(n, k int) int64 {
		if w.IsQuantized() {
			return wq.Bytes(w.Elem, w.Group, n, k)
		}
		return 2 * int64(n) * int64(k)
	}
	perLayer := mat(qd, H) + 2*mat(kvd, H) + mat(H, qd) + 2*mat(I, H) + mat(H, I)
	return int64(c.Layers)*perLayer + 2*int64(c.Vocab)*int64(H)
}

// modelCache is what timeModel needs of a GPU cache filled with random
// tokens: gpukv.Paged, or gpukv.Planes for bw formats.
type modelCache interface {
	kvcache.Cache
	FillRandom(id, n int, seed uint32) error
	Bytes(id int) (bytes, fp16Bytes int64)
}

func timeModel(be *gpu.Backend, m model.Model, mc *model.Config, sp kv.Spec, f kv.Format, ctx int, cfg ModelConfig) (*ModelRow, error) {
	steps := cfg.Warmup + cfg.Steps
	opts := kvcache.Options{MaxSeqs: cfg.Batch, MaxLen: ctx + steps + 1, MaxChunk: 16}
	var cache modelCache
	var err error
	if sp.Planes.On {
		// The bw cache re-tiers every layer at the first (warm-up) step
		// after the fill, then every Period steps.
		cache, err = gpukv.NewPlanes(be, mc, sp, opts)
	} else {
		cache, err = gpukv.NewPaged(be, mc, sp.WithDefaultRotation(), opts)
	}
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
	for i := range steps {
		var b model.Batch
		for s := range cfg.Batch {
			b.Add(s, cache.Len(s), int32((i*7919+s*104729)%mc.Vocab))
		}
		t0 := time.Now()
		if _, err := m.Forward(&b, cache); err != nil {
			return nil, err
		}
		if i >= cfg.Warmup {
			times = append(times, float64(time.Since(t0).Microseconds())/1e3)
		}
	}
	mean := 0.0
	for _, t := range times {
		mean += t / float64(len(times))
	}
	sort.Float64s(times)
	med := times[len(times)/2]
	kvRead := int64(0)
	for s := range cfg.Batch {
		kvRead += int64(mc.Layers*mc.KVHeads) * f.ReadBytes(cache.Len(s))
	}
	if ts, ok := cache.TierStats(); ok && ts.Read.FP16Bytes > 0 {
		// bw: the bytes the policy's tiers read (planes and index), in the
		// proportion of every step so far.
		kvRead = int64(float64(kvRead) * float64(ts.Read.PlaneBytes+ts.Read.IndexBytes) / float64(ts.Read.FP16Bytes))
	}
	mem, _ := cache.Bytes(0)
	return &ModelRow{KV: sp.String(), Context: ctx, Batch: cfg.Batch, MsPerStep: med, MeanMs: mean, TokensPerSec: float64(cfg.Batch) / med * 1e3,
		KVBytes: kvRead, KVMemory: mem * int64(cfg.Batch)}, nil
}

// WriteTable writes the report as Markdown tables.
func (rep *ModelReport) WriteTable(w io.Writer) {
	if len(rep.Linears) > 0 {
		fmt.Fprintf(w, "Linear layers of one decode step, %s shapes, %s, %d rows (weights fp16, cold in L2)\n\n", rep.Preset, rep.Device, rep.Linears[0].T)
		fmt.Fprintln(w, "| layer | N x K | gemv.cu us | of ceiling | cuBLASLt us | int4 gemvq.cu us | GB/s | of ceiling | int3 us | of ceiling | int8 us | of ceiling |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
		pct := func(gbps float64) float64 { return 100 * gbps / rep.ReadGBps }
		for _, r := range rep.Linears {
			fmt.Fprintf(w, "| %s | %dx%d | %.1f | %.0f%% | %.1f | %.1f | %.0f | %.0f%% | %.1f | %.0f%% | %.1f | %.0f%% |\n", r.Name, r.N, r.K, r.GEMVUS, pct(r.GEMVGBps),
				r.CublasUS, r.Int4US, r.Int4GBps, pct(r.Int4GBps), r.Int3US, pct(r.Int3GBps), r.Int8US, pct(r.Int8GBps))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Decode step, %s shapes with random weights, %s, %s; read ceiling %.0f GB/s (same run)\n\n", rep.Preset, rep.Device, rep.Date, rep.ReadGBps)
	fmt.Fprintln(w, "| weights | DEC k_chunk | KV | context | batch | ms/step | mean ms | tokens/s | weights read | KV read | floor ms | floor/time | KV memory |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.2f | %.2f | %.1f | %.2f GB | %.2f GB | %.2f | %.0f%% | %.2f GB |\n", r.Weights, cmp.Or(r.DEC, "-"), r.KV, r.Context, r.Batch, r.MsPerStep, r.MeanMs, r.TokensPerSec,
			float64(r.WeightBytes)/1e9, float64(r.KVBytes)/1e9, r.FloorMs, 100*r.OfFloor, float64(r.KVMemory)/1e9)
	}
}

// WriteJSON writes the report to path.
func (rep *ModelReport) WriteJSON(path string) error {
	return writeJSON(path, rep)
}

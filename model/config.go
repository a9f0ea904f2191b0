package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/internal/fileio"
	"github.com/bitdecode/bitdecode/internal/half"
)

// Family names (config.json "model_type") and the architectures
// ("architectures") that this package runs.
var supported = []struct{ modelType, architecture string }{
	{"llama", "LlamaForCausalLM"},
	{"mistral", "MistralForCausalLM"},
	{"qwen2", "Qwen2ForCausalLM"},
	{"qwen3", "Qwen3ForCausalLM"},
	{"phi3", "Phi3ForCausalLM"},
	{"gemma", "GemmaForCausalLM"},
	{"granite", "GraniteForCausalLM"},
	{"olmo2", "Olmo2ForCausalLM"},
	{"gemma2", "Gemma2ForCausalLM"},
	{"gemma3_text", "Gemma3ForCausalLM"},
	{"mixtral", "MixtralForCausalLM"},
	{"qwen2_moe", "Qwen2MoeForCausalLM"},
	{"qwen3_moe", "Qwen3MoeForCausalLM"},
	{"smollm3", "SmolLM3ForCausalLM"},
	{"olmo3", "Olmo3ForCausalLM"},
	{"seed_oss", "SeedOssForCausalLM"},
	{"glm4", "Glm4ForCausalLM"},
	{"exaone4", "Exaone4ForCausalLM"},
	{"ernie4_5", "Ernie4_5ForCausalLM"},
	{"helium", "HeliumForCausalLM"},
	{"ministral", "MinistralForCausalLM"},
	{"cwm", "CwmForCausalLM"},
}

// unsupportedFamilies are families that real checkpoints often name and
// that this package refuses, with what it lacks for each: the error then
// says why rather than only that the name is unknown.
var unsupportedFamilies = map[string]string{
	"phi":    "Phi-1/Phi-2 use LayerNorm, a parallel attention/MLP block, partial rotary embeddings and biased projections",
	"phimoe": "Phi-3.5-MoE's router is sparsemixer with jitter, and its attention and MLP carry LayerNorm and biases",
	"phi4mm": "Phi-4-multimodal has vision and audio towers and LoRA adapters",
	// Mixtures of experts whose routing or attention this package lacks
	// (Mixtral, Qwen2-MoE and Qwen3-MoE run: moe.go).
	"deepseek_v2": "DeepSeek-V2 uses multi-head latent attention (MLA) and grouped (device-limited) top-k routing with shared experts",
	"deepseek_v3": "DeepSeek-V3 uses multi-head latent attention (MLA), sigmoid routing with a score-correction bias and grouped top-k",
	"qwen3_next":  "Qwen3-Next mixes gated DeltaNet linear-attention layers with gated attention",
	"gpt_oss":     "gpt-oss has attention sinks, biased experts with a clamped SwiGLU, and MXFP4 expert weights",
	"granitemoe":  "Granite-MoE needs Granite's multipliers over a mixture of experts (not implemented)",
	"olmoe":       "OLMoE's q/k norms span the whole projections with a mixture of experts (not implemented)",
	"dbrx":        "DBRX stores fused qkv with clipping, LayerNorm and its own expert layout",
	// Families of 2025-2026 with pieces this package lacks.
	"gemma4":           "Gemma 4 adds per-layer input embeddings, global layers with their own head dim and proportional RoPE, keys shared as values and KV shared across layers",
	"gemma3n":          "Gemma 3n adds per-layer input embeddings, AltUp and Laurel blocks and KV shared across layers",
	"llama4":           "Llama 4 uses chunked attention with NoPE layers, attention temperature tuning and a mixture of experts with a shared expert",
	"cohere":           "Command R uses LayerNorm and a parallel attention/MLP block with a logit scale",
	"cohere2":          "Command R7B/A uses LayerNorm and a parallel attention/MLP block with sliding and NoPE global layers",
	"glm4_moe":         "GLM-4.5's mixture of experts routes by sigmoid scores with a correction bias and group-limited top-k",
	"ernie4_5_moe":     "ERNIE 4.5's mixture of experts routes with a correction bias and shared experts",
	"hunyuan_v1_dense": "Hunyuan normalizes q and k after RoPE, and scales RoPE by a dynamic alpha",
	"apertus":          "Apertus uses the xIELU activation in a non-gated MLP",
	"arcee":            "AFM uses a non-gated ReLU² MLP",
	"falcon_h1":        "Falcon-H1 mixes Mamba-2 state-space layers with attention",
	"lfm2":             "LFM2 mixes short convolution layers with attention",
	"granitemoehybrid": "Granite 4 mixes Mamba-2 layers with attention and a mixture of experts",
}

// unsupportedArchitectures maps the architectures of unsupportedFamilies
// to their model types.
var unsupportedArchitectures = map[string]string{
	"PhiForCausalLM": "phi", "PhiMoEForCausalLM": "phimoe", "Phi4MMForCausalLM": "phi4mm",
	"DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
	"Qwen3NextForCausalLM": "qwen3_next", "GptOssForCausalLM": "gpt_oss",
	"GraniteMoeForCausalLM": "granitemoe", "OlmoeForCausalLM": "olmoe", "DbrxForCausalLM": "dbrx",
}

// multimodal are the multimodal checkpoints whose text model this package
// runs, the vision tower and projector left unread: the wrapper's
// model_type and architecture, its text model's (text_config's) family,
// and that family's config defaults for the fields a nested text_config
// may leave out (transformers 4.5x saved only those that differ from its
// config class's defaults: gemma-3-4b-it's text_config names six).
var multimodal = []struct {
	modelType, architecture string
	textType, textArch      string
	// textTypes are the model_type values text_config may carry (textType
	// where empty: the family's own).
	textTypes []string
	// flat: a config without text_config is the text model's, at the top
	// level beside vision_config (Qwen2.5-VL as 4.5x saved it).
	flat     bool
	defaults string
}{
	// Gemma3Config: Gemma3TextConfig's defaults.
	{"gemma3", "Gemma3ForConditionalGeneration", "gemma3_text", "Gemma3ForCausalLM", nil, false, `{"vocab_size": 262208,
		"hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
		"num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
		"max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "attention_bias": false,
		"query_pre_attn_scalar": 256, "sliding_window": 4096, "final_logit_softcapping": null,
		"attn_logit_softcapping": null, "rope_scaling": null, "rope_local_base_freq": 10000.0,
		"sliding_window_pattern": 6, "tie_word_embeddings": true, "bos_token_id": 2, "eos_token_id": 1}`},
	// Mistral3Config (Mistral Small 3.1, 3.2): MistralConfig's defaults.
	{"mistral3", "Mistral3ForConditionalGeneration", "mistral", "MistralForCausalLM", nil, false, `{"vocab_size": 32000,
		"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
		"num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
		"rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false, "bos_token_id": 1,
		"eos_token_id": 2}`},
	// Qwen2.5-VL and Qwen3-VL: Qwen2's and Qwen3's decoders. Their
	// multimodal RoPE (mrope_section: the rotary pairs split between the
	// temporal, height and width positions) is 1-D RoPE on text alone,
	// where the three positions are equal; so its sections are ignored and
	// 4.5x's rope type "mrope" reads as "default". Their published configs
	// are complete: no defaults are filled in.
	{"qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", "qwen2", "Qwen2ForCausalLM", []string{"qwen2_5_vl_text", "qwen2_5_vl"}, true, `{}`},
	{"qwen3_vl", "Qwen3VLForConditionalGeneration", "qwen3", "Qwen3ForCausalLM", []string{"qwen3_vl_text"}, false, `{}`},
}

// multimodalWrapper reports whether raw is one of the multimodal
// checkpoints' configs (by model_type or architecture), and which.
func multimodalWrapper(raw *rawConfig) (int, bool) {
	for i, m := range multimodal {
		if raw.ModelType != nil && *raw.ModelType == m.modelType || slices.Contains(raw.Architectures, m.architecture) {
			return i, true
		}
	}
	return 0, false
}

// parseTextConfig parses the text model of multimodal[w] from the
// wrapper's config.json keys: text_config over its family's defaults, the
// checkpoint's dtype from the top level where text_config has none, and
// the text model's architecture. Config.Wrapper records the wrapper.
func parseTextConfig(w int, keys map[string]json.RawMessage) (*Config, error) {
	m := multimodal[w]
	var merged map[string]json.RawMessage
	if err := json.Unmarshal([]byte(m.defaults), &merged); err != nil {
		panic("model: multimodal defaults: " + err.Error())
	}
	var tc map[string]json.RawMessage
	text, ok := keys["text_config"]
	switch {
	case ok && !isNull(text):
		if err := json.Unmarshal(text, &tc); err != nil {
			return nil, &ConfigError{Field: "text_config", Err: fmt.Errorf("want an object: %w", err)}
		}
	case m.flat:
		tc = maps.Clone(keys)
		delete(tc, "vision_config")
		delete(tc, "text_config")
		delete(tc, "model_type")
	default:
		return nil, &ConfigError{Field: "text_config", Err: fmt.Errorf("missing: %s (%s) nests its text model's config there", m.architecture, m.modelType)}
	}
	if t, ok := tc["model_type"]; ok {
		types := m.textTypes
		if types == nil {
			types = []string{m.textType}
		}
		var typ string
		if json.Unmarshal(t, &typ) != nil || !slices.Contains(types, typ) {
			return nil, &ConfigError{Field: "text_config.model_type", Err: fmt.Errorf("%s, want %q (%s's text model)", t, types, m.architecture)}
		}
	}
	for _, k := range []string{"rope_scaling", "rope_parameters"} {
		// Qwen2.5-VL's "mrope" (4.5x's spelling) is 1-D RoPE on text.
		var r map[string]json.RawMessage
		if json.Unmarshal(tc[k], &r) != nil {
			continue
		}
		for _, tk := range []string{"type", "rope_type"} {
			if string(r[tk]) == `"mrope"` {
				r[tk] = json.RawMessage(`"default"`)
				tc[k], _ = json.Marshal(r)
			}
		}
	}
	// The top level's dtype and special tokens where text_config has none
	// (over the family's defaults).
	for _, k := range []string{"torch_dtype", "dtype", "bos_token_id", "eos_token_id"} {
		if v, ok := keys[k]; ok {
			merged[k] = v
		}
	}
	maps.Copy(merged, tc)
	if _, ok := tc["rope_parameters"]; ok {
		// transformers 5 writes rope_parameters (with rope_theta inside):
		// the 4.5x defaults' rope_theta and rope_scaling must not add to it.
		delete(merged, "rope_scaling")
	}
	merged["model_type"], _ = json.Marshal(m.textType)
	merged["architectures"], _ = json.Marshal([]string{m.textArch})
	data, err := json.Marshal(merged)
	if err != nil {
		return nil, &ConfigError{Field: "text_config", Err: err}
	}
	c, err := ParseConfig(data)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Field != "" && !strings.HasPrefix(ce.Field, "text_config") {
			ce.Field = "text_config." + ce.Field
		}
		return nil, err
	}
	c.Wrapper, c.WrapperArchitecture = m.modelType, m.architecture
	return c, nil
}

// classDefaults are the values of the families whose config classes
// default a field otherwise than transformers' base ones (or than
// hidden/heads for head_dim), used where config.json leaves the field out.
var classDefaults = map[string]struct {
	headDim int     // head_dim (0: hidden_size / num_attention_heads)
	theta   float64 // default_theta, the RoPE base (0: defaultRopeTheta)
	window  int     // sliding_window where absent, not null (0: none)
}{
	"gemma2":      {window: defaultGemmaSlidingWindow},
	"gemma3_text": {window: defaultGemmaSlidingWindow},
	"olmo3":       {theta: 500000, window: 4096},
	"exaone4":     {window: 4096},
	"ministral":   {window: 4096},
	"cwm":         {theta: 1000000, window: 8192},
	"smollm3":     {theta: 2000000},
	"helium":      {headDim: 128, theta: 100000},
	"ernie4_5":    {headDim: 128, theta: 500000},
	"glm4":        {headDim: 128},
	"seed_oss":    {headDim: 128},
}

// supportedList names the supported families for error messages.
func supportedList() string {
	var s []string
	for _, f := range supported {
		s = append(s, f.architecture+" ("+f.modelType+")")
	}
	return strings.Join(s, ", ")
}

// Limits on config values: far above any real model, low enough that a
// hostile config cannot make the loader allocate absurd buffers or overflow
// an int computing a size.
const (
	maxDim    = 1 << 20 // hidden_size, intermediate_size, head_dim, heads
	maxVocab  = 1 << 24
	maxLayers = 1 << 12
	// maxExperts bounds num_experts (DeepSeek-V3's 256, Qwen3-30B-A3B's 128).
	maxExperts = 1 << 12
	// glm4PartialRotary is Glm4Config's partial_rotary_factor where
	// config.json has none.
	glm4PartialRotary = 0.5
	// olmo3WindowPattern is Olmo3Config's (and Exaone4Config's) layer
	// pattern without layer_types (every fourth layer full), and
	// cwmWindowPattern CwmConfig's (layers 0, 4, 8, ... full).
	olmo3WindowPattern = 4
	cwmWindowPattern   = 4
	// smolLM3NoRoPEInterval is SmolLM3Config's no_rope_layer_interval
	// default: every fourth layer without RoPE.
	smolLM3NoRoPEInterval = 4
	// defaultRopeTheta is transformers' default when a config has none.
	defaultRopeTheta = 10000.0
	// defaultQueryPreAttnScalar is Gemma2Config's and Gemma3TextConfig's
	// default query_pre_attn_scalar.
	defaultQueryPreAttnScalar = 256.0
	// defaultGemmaSlidingWindow is Gemma2Config's and Gemma3TextConfig's
	// sliding_window where config.json has none (null: no window).
	defaultGemmaSlidingWindow = 4096
	// Gemma2Config's soft-caps where config.json has none (null: off).
	defaultGemma2AttnSoftcap  = 50.0
	defaultGemma2FinalSoftcap = 30.0
	// gemma2WindowPattern: Gemma2Config's layers without layer_types
	// alternate, sliding first (every second layer global).
	gemma2WindowPattern = 2
	// maxConfigSize bounds the size of config.json read into memory.
	maxConfigSize = 16 << 20
)

// Config holds the hyperparameters of a Llama-family model, read from a
// Hugging Face config.json. Field names use the shape letters of the project:
// Hq query heads, Hkv key/value heads, D head dimension.
type Config struct {
	ModelType    string // a model_type of supported: "llama", "mistral", ..., "mixtral", "qwen2_moe", "qwen3_moe"
	Architecture string // e.g. "LlamaForCausalLM"; "" if the config names none
	// Wrapper and WrapperArchitecture name the multimodal checkpoint whose
	// text model this is ("gemma3", "Gemma3ForConditionalGeneration"; see
	// multimodal), "" for a text checkpoint. ModelType and Architecture
	// are then its text model's, and the loader reads the text model's
	// tensors under the wrapper's prefix (textTensors).
	Wrapper, WrapperArchitecture string

	Hidden       int // hidden_size
	Intermediate int // intermediate_size of the SwiGLU MLP
	Layers       int // num_hidden_layers
	Heads        int // num_attention_heads (Hq)
	KVHeads      int // num_key_value_heads (Hkv); Heads if absent
	HeadDim      int // head_dim (D); Hidden/Heads if absent
	Vocab        int // vocab_size
	MaxPositions int // max_position_embeddings (0 if absent); informational

	RMSNormEps float64 // rms_norm_eps
	// RopeTheta is the RoPE base, from "rope_parameters".rope_theta or the
	// top-level "rope_theta" (10000 if neither is present).
	RopeTheta float64
	// RopeScaling is the RoPE frequency scaling, nil for none ("default").
	// For Gemma 3, RopeTheta and RopeScaling are the global layers'.
	RopeScaling *RopeScaling
	// LocalRopeTheta, if not 0, is the RoPE base of the sliding-window
	// layers (those with a LayerWindows entry), which then have no scaling
	// (Gemma 3's rope_local_base_freq, or rope_parameters'
	// sliding_attention); the other layers use RopeTheta and RopeScaling.
	LocalRopeTheta float64
	// NoRoPE, where not nil, holds one entry a layer: true for a layer
	// that applies no RoPE at all (SmolLM3's no_rope_layers 0: NoPE).
	NoRoPE []bool
	// RopeInterleaved: RoPE rotates each head's dimension pairs (2i, 2i+1)
	// of its rotary part, not (i, i + R/2) (GLM-4's apply_rotary_pos_emb);
	// the loader lays them out as the backends' pairs (headLayout).
	RopeInterleaved bool
	// RotaryDim is R, the number of each head's dimensions that RoPE
	// rotates (int(head_dim·partial_rotary_factor), Phi-4-mini's 96 of
	// 128); 0 means the whole head (RotaryDims returns D then). See
	// RotaryDims for how the loader lays the other D − R out.
	RotaryDim int

	TieWordEmbeddings bool // lm_head shares model.embed_tokens.weight
	QKVBias           bool // q_proj, k_proj, v_proj have biases (Qwen2; attention_bias)
	OBias             bool // o_proj has a bias (attention_bias of Llama and Qwen3)
	MLPBias           bool // gate, up and down projections have biases (Llama mlp_bias)
	QKNorm            bool // per-head RMSNorm of q and k before RoPE (Qwen3)
	// FusedQKV: q, k and v are rows of one stored qkv_proj (q|k|v), and
	// gate and up rows of one gate_up_proj (gate|up) (Phi-3). The loader
	// splits them into the usual weights.
	FusedQKV bool
	// FusedGateUp: gate and up alone are rows of one gate_up_proj
	// (GLM-4's; q, k and v apart).
	FusedGateUp bool
	// GeGLU: the MLP's gate activation is gelu_pytorch_tanh (Gemma's
	// hidden_activation) instead of silu.
	GeGLU bool
	// NormPlusOne: every RMSNorm scales by 1 + w, w the stored weight
	// (GemmaRMSNorm); the loader adds the 1 (in float32, as transformers).
	NormPlusOne bool
	// EmbedScale, if not 0, multiplies the token embeddings (Gemma: √hidden
	// rounded to the checkpoint's dtype, as transformers rounds it;
	// Granite: embedding_multiplier in float32).
	EmbedScale float32
	// AttnScale, if not 0, is the softmax scale of the attention scores in
	// place of 1/√D (Granite's attention_multiplier). The attention
	// computes with 1/√D; the loader folds AttnScale·√D into q's rows and
	// bias (attnFolds).
	AttnScale float64
	// ResidualScale, if not 0, multiplies each attention and MLP block's
	// output before its residual add (Granite's residual_multiplier); the
	// loader folds it into o_proj's and down_proj's rows and biases.
	ResidualScale float64
	// LogitScale, if not 0, multiplies the logits (Granite's
	// 1/logits_scaling); the loader folds it into the final norm's weight
	// (the LM head is linear, and may be the tied embedding).
	LogitScale float64
	// PostNorms: each block's output is normalized before its residual
	// add, h = h + RMSNorm(block(h)) (post_attention_layernorm,
	// post_feedforward_layernorm). OLMo 2's blocks have no norm before
	// them; Gemma 3's have theirs too (SandwichNorms).
	PostNorms bool
	// SandwichNorms: Gemma 3's four norms a layer, input_layernorm before
	// the attention, post_attention_layernorm after it (before the
	// residual add), pre_feedforward_layernorm before the MLP and
	// post_feedforward_layernorm after it; PostNorms is set too.
	SandwichNorms bool
	// QKNormFull: RMSNorm of q over all Hq·D values of a token and of k over
	// all Hkv·D before RoPE (OLMo 2), not per head as QKNorm.
	QKNormFull bool
	// AttnSoftcap, if not 0, soft-caps every attention score s (after the
	// softmax scale, before the mask) to AttnSoftcap·tanh(s/AttnSoftcap)
	// (Gemma 2's attn_logit_softcapping, 50 in its checkpoints). The KV
	// cache applies it (attn.Params.Softcap on the CPU, the GPU's paged
	// caches through kernels.DecodeShape.Softcap); a cache whose kernels
	// have none refuses the model (RefuseAttnSoftcap: the bw caches).
	AttnSoftcap float64
	// FinalSoftcap, if not 0, soft-caps the logits the same way
	// (final_logit_softcapping, 30 in Gemma 2's checkpoints); Forward
	// applies it to every row it returns (on the device before its greedy
	// pick where the backend is a backend.Softcapper, the CUDA backend).
	FinalSoftcap float64

	// StoredHeadDim, if not 0, is the checkpoint's head dim where the
	// loader padded each head to HeadDim for the backend's kernels
	// (PadHeads; backend.HeadDimPadder): HeadDim is then what the backend,
	// its KV cache and the attention compute with, StoredHeadDim what
	// config.json says.
	StoredHeadDim int

	// SlidingWindow is the attention window in tokens of the layers that use
	// one (Mistral's sliding_window; Qwen's when use_sliding_window), 0 if
	// no layer does. A query at position p sees keys at positions > p-W.
	SlidingWindow int
	// LayerWindows holds each layer's window (0: full causal attention).
	LayerWindows []int

	DType       string // torch_dtype or dtype of the checkpoint ("bfloat16", ...); may be ""
	BOSTokenID  int    // bos_token_id, -1 if absent
	EOSTokenIDs []int  // eos_token_id (one or a list), nil if absent

	// Quant describes low-bit weights stored in the checkpoint
	// ("quantization_config"), nil for plain float weights.
	Quant *QuantConfig

	// MoE is the mixture of experts that replaces the MLP of some layers
	// (Mixtral, Qwen2-MoE, Qwen3-MoE), nil for a dense model.
	MoE *MoEConfig
}

// RopeScaling is a RoPE frequency scaling rule of transformers.
type RopeScaling struct {
	// Type is "linear" (positions divided by Factor), "llama3" (Llama 3.1
	// and 3.2: low frequencies divided by Factor, high ones kept, a smooth
	// blend between), "longrope" (Phi-3) or "yarn" (YaRN: InvFreq).
	Type   string
	Factor float64
	// The llama3 parameters.
	LowFreqFactor        float64
	HighFreqFactor       float64
	OriginalMaxPositions int // llama3, longrope and yarn
	// The yarn parameters: the ramp between BetaFast and BetaSlow
	// rotations of the original context (32 and 1 where absent), its ends
	// rounded outwards unless NoTruncate (truncate false).
	BetaFast, BetaSlow float64
	NoTruncate         bool
	// The longrope parameters (Phi-3 128k, Phi-3.5): D/2 divisors of the
	// inverse frequencies for sequences up to OriginalMaxPositions
	// (ShortFactor) and beyond (LongFactor).
	ShortFactor, LongFactor []float64
	// AttentionFactor (longrope and yarn; 1 for the others' 0) multiplies
	// cos and sin, so q·k by its square on the rotated dimensions.
	AttentionFactor float64
}

// ConfigError reports a config.json that cannot be used. It names the file
// (if known) and the JSON field, and wraps the cause.
type ConfigError struct {
	File  string // path of config.json, or ""
	Field string // JSON field, e.g. "num_key_value_heads", or ""
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("model: ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Field != "" {
		b.WriteString("field " + e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrUnsupportedArchitecture is the cause of the error for a config naming an
// architecture or model type this package does not run.
var ErrUnsupportedArchitecture = errors.New("unsupported architecture")

// ErrAttnSoftcap is the cause of a KV cache's refusal of a model whose
// attention scores are soft-capped (Config.AttnSoftcap) where the cache's
// kernels have no soft-cap (RefuseAttnSoftcap).
var ErrAttnSoftcap = errors.New("attention logit soft-capping is not implemented")

// RefuseAttnSoftcap returns nil where c has no attention soft-cap, else an
// error wrapping ErrAttnSoftcap that names where (a cache or device that
// lacks it), the model's cap and the way out, for a cache to return.
func (c *Config) RefuseAttnSoftcap(where string) error {
	if c.AttnSoftcap == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w there (%s's attn_logit_softcapping is %g); the paged and dense caches apply it (a paged format such as int4, on the CPU or the GPU)", where, ErrAttnSoftcap, c.ModelType, c.AttnSoftcap)
}

// rawConfig is config.json as written. Pointers and raw messages tell absent
// and null fields from zero values.
type rawConfig struct {
	Architectures         []string        `json:"architectures"`
	ModelType             *string         `json:"model_type"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	VocabSize             *int            `json:"vocab_size"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	HiddenAct             *string         `json:"hidden_act"`
	HiddenActivation      *string         `json:"hidden_activation"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	OriginalMaxPositions  *int            `json:"original_max_position_embeddings"`
	BidirectionalAttn     *bool           `json:"use_bidirectional_attention"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	AttentionBias         *bool           `json:"attention_bias"`
	MLPBias               *bool           `json:"mlp_bias"`
	SlidingWindow         *int            `json:"sliding_window"`
	UseSlidingWindow      *bool           `json:"use_sliding_window"`
	MaxWindowLayers       *int            `json:"max_window_layers"`
	LayerTypes            []string        `json:"layer_types"`
	// SlidingWindowPatternRaw: a layer count (Gemma 3, EXAONE 4), or
	// EXAONE 4's "LLLG" spelling.
	SlidingWindowPatternRaw json.RawMessage `json:"sliding_window_pattern"`
	RopeLocalBaseFreq       *float64        `json:"rope_local_base_freq"`
	QueryPreAttnScalar      *float64        `json:"query_pre_attn_scalar"`
	AttnLogitSoftcapping    json.RawMessage `json:"attn_logit_softcapping"`
	FinalLogitSoftcapping   json.RawMessage `json:"final_logit_softcapping"`
	EmbeddingMultiplier     *float64        `json:"embedding_multiplier"`
	AttentionMultiplier     *float64        `json:"attention_multiplier"`
	ResidualMultiplier      *float64        `json:"residual_multiplier"`
	LogitsScaling           *float64        `json:"logits_scaling"`
	TorchDType              *string         `json:"torch_dtype"`
	DType                   *string         `json:"dtype"`
	BOSTokenID              json.RawMessage `json:"bos_token_id"`
	EOSTokenID              json.RawMessage `json:"eos_token_id"`
	QuantizationConfig      json.RawMessage `json:"quantization_config"`
	// Mixtures of experts (moe.go).
	NumLocalExperts              *int  `json:"num_local_experts"`
	NumExperts                   *int  `json:"num_experts"`
	NumExpertsPerTok             *int  `json:"num_experts_per_tok"`
	MoEIntermediateSize          *int  `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize *int  `json:"shared_expert_intermediate_size"`
	NormTopKProb                 *bool `json:"norm_topk_prob"`
	DecoderSparseStep            *int  `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int `json:"mlp_only_layers"`
	QKVBias                      *bool `json:"qkv_bias"`
	// SmolLM3's NoPE layers; Seed-OSS's o_proj bias.
	NoRoPELayers        []int `json:"no_rope_layers"`
	NoRoPELayerInterval *int  `json:"no_rope_layer_interval"`
	AttentionOutBias    *bool `json:"attention_out_bias"`
	UseBias             *bool `json:"use_bias"` // ERNIE 4.5's, on every projection

	// present holds the top-level keys config.json has, null or not:
	// Gemma 2's defaults apply to absent fields only.
	present map[string]bool
}

// rawRope is a "rope_scaling" or "rope_parameters" object.
type rawRope struct {
	RopeType                      *string   `json:"rope_type"`
	Type                          *string   `json:"type"` // older spelling of rope_type
	RopeTheta                     *float64  `json:"rope_theta"`
	Factor                        *float64  `json:"factor"`
	LowFreqFactor                 *float64  `json:"low_freq_factor"`
	HighFreqFactor                *float64  `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings *int      `json:"original_max_position_embeddings"`
	ShortFactor                   []float64 `json:"short_factor"`
	LongFactor                    []float64 `json:"long_factor"`
	AttentionFactor               *float64  `json:"attention_factor"`
	PartialRotaryFactor           *float64  `json:"partial_rotary_factor"`
	// YaRN's (yarn).
	BetaFast     *float64 `json:"beta_fast"`
	BetaSlow     *float64 `json:"beta_slow"`
	Mscale       *float64 `json:"mscale"`
	MscaleAllDim *float64 `json:"mscale_all_dim"`
	Truncate     *bool    `json:"truncate"`
}

// LoadConfig reads and validates the config.json at path.
func LoadConfig(path string) (*Config, error) {
	data, err := fileio.ReadFile(path, maxConfigSize)
	if err != nil {
		return nil, &ConfigError{File: path, Err: err}
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.File = path
		}
		return nil, err
	}
	return cfg, nil
}

// ParseConfig parses and validates the contents of a config.json. Errors are
// *ConfigError values naming the field.
func ParseConfig(data []byte) (*Config, error) {
	var raw rawConfig
	var keys map[string]json.RawMessage
	err := json.Unmarshal(data, &raw)
	if err == nil {
		err = json.Unmarshal(data, &keys)
	}
	if err == nil {
		if w, ok := multimodalWrapper(&raw); ok {
			return parseTextConfig(w, keys)
		}
	}
	if err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return nil, &ConfigError{Field: field, Err: err}
	}
	raw.present = make(map[string]bool, len(keys))
	for k := range keys {
		raw.present[k] = true
	}
	c := &Config{BOSTokenID: -1}
	if err := c.family(&raw); err != nil {
		return nil, err
	}
	if err := c.activation(&raw); err != nil {
		return nil, err
	}

	dims := []struct {
		dst   *int
		src   *int
		field string
		max   int
	}{
		{&c.Hidden, raw.HiddenSize, "hidden_size", maxDim},
		{&c.Intermediate, raw.IntermediateSize, "intermediate_size", maxDim},
		{&c.Layers, raw.NumHiddenLayers, "num_hidden_layers", maxLayers},
		{&c.Heads, raw.NumAttentionHeads, "num_attention_heads", maxDim},
		{&c.Vocab, raw.VocabSize, "vocab_size", maxVocab},
	}
	for _, d := range dims {
		if *d.dst, err = positive(d.src, d.field, d.max); err != nil {
			return nil, err
		}
	}
	c.KVHeads = c.Heads
	if raw.NumKeyValueHeads != nil {
		if c.KVHeads, err = positive(raw.NumKeyValueHeads, "num_key_value_heads", maxDim); err != nil {
			return nil, err
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return nil, &ConfigError{Field: "num_key_value_heads", Err: fmt.Errorf("%d query heads are not a multiple of %d key/value heads", c.Heads, c.KVHeads)}
	}
	if raw.HeadDim != nil {
		if c.HeadDim, err = positive(raw.HeadDim, "head_dim", maxDim); err != nil {
			return nil, err
		}
	} else if d := classDefaults[c.ModelType].headDim; d != 0 {
		c.HeadDim = d // the config class's default, not hidden/heads
	} else {
		if c.Hidden%c.Heads != 0 {
			return nil, &ConfigError{Field: "head_dim", Err: fmt.Errorf("absent, and hidden_size %d is not a multiple of num_attention_heads %d", c.Hidden, c.Heads)}
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.HeadDim%2 != 0 {
		return nil, &ConfigError{Field: "head_dim", Err: fmt.Errorf("%d is odd; RoPE needs an even head dimension", c.HeadDim)}
	}
	if c.Heads*c.HeadDim > maxDim {
		return nil, &ConfigError{Field: "head_dim", Err: fmt.Errorf("%d heads of %d exceed the limit of %d", c.Heads, c.HeadDim, maxDim)}
	}
	if raw.MaxPositionEmbeddings != nil {
		if c.MaxPositions = *raw.MaxPositionEmbeddings; c.MaxPositions < 0 {
			return nil, &ConfigError{Field: "max_position_embeddings", Err: fmt.Errorf("negative: %d", c.MaxPositions)}
		}
	}
	if raw.RMSNormEps == nil {
		return nil, &ConfigError{Field: "rms_norm_eps", Err: errors.New("missing")}
	}
	if c.RMSNormEps = *raw.RMSNormEps; !(c.RMSNormEps > 0 && c.RMSNormEps < 1) {
		return nil, &ConfigError{Field: "rms_norm_eps", Err: fmt.Errorf("%g is not in (0, 1)", c.RMSNormEps)}
	}
	if err := c.rope(&raw); err != nil {
		return nil, err
	}
	c.biases(&raw)
	if err := c.noRoPE(&raw); err != nil {
		return nil, err
	}
	if err := c.windows(&raw); err != nil {
		return nil, err
	}
	if c.ModelType == "exaone4" && (raw.SlidingWindow != nil && *raw.SlidingWindow > 0 || !raw.present["sliding_window"]) {
		// Exaone4Attention with a sliding window: RoPE on the sliding
		// layers only, the global ones NoPE (with none, RoPE everywhere).
		c.NoRoPE = make([]bool, c.Layers)
		for i, w := range c.LayerWindows {
			c.NoRoPE[i] = w == 0
		}
	}
	switch {
	case raw.TorchDType != nil:
		c.DType = *raw.TorchDType
	case raw.DType != nil:
		c.DType = *raw.DType
	}
	if err := c.gemma(&raw); err != nil {
		return nil, err
	}
	if err := c.granite(&raw); err != nil {
		return nil, err
	}
	if ids, err := tokenIDs(raw.BOSTokenID, "bos_token_id"); err != nil {
		return nil, err
	} else if len(ids) > 0 {
		c.BOSTokenID = ids[0]
	}
	if c.EOSTokenIDs, err = tokenIDs(raw.EOSTokenID, "eos_token_id"); err != nil {
		return nil, err
	}
	if c.Quant, err = parseQuantConfig(raw.QuantizationConfig); err != nil {
		return nil, err
	}
	if c.MoE, err = parseMoE(c, &raw); err != nil {
		return nil, err
	}
	return c, nil
}

// family sets ModelType and Architecture and rejects what is not supported.
func (c *Config) family(raw *rawConfig) error {
	if raw.ModelType != nil {
		if why, ok := unsupportedFamilies[*raw.ModelType]; ok {
			return &ConfigError{Field: "model_type", Err: fmt.Errorf("%w %q: %s; supported: %s", ErrUnsupportedArchitecture, *raw.ModelType, why, supportedList())}
		}
	}
	for _, a := range raw.Architectures {
		if t, ok := unsupportedArchitectures[a]; ok {
			return &ConfigError{Field: "architectures", Err: fmt.Errorf("%w %q: %s; supported: %s", ErrUnsupportedArchitecture, a, unsupportedFamilies[t], supportedList())}
		}
	}
	archType := ""
	if len(raw.Architectures) > 0 {
		for _, a := range raw.Architectures {
			for _, f := range supported {
				if a == f.architecture {
					c.Architecture, archType = a, f.modelType
				}
			}
		}
		if c.Architecture == "" {
			return &ConfigError{Field: "architectures", Err: fmt.Errorf("%w %q; supported: %s", ErrUnsupportedArchitecture, raw.Architectures, supportedList())}
		}
	}
	switch {
	case raw.ModelType != nil:
		c.ModelType = *raw.ModelType
		if !slices.ContainsFunc(supported, func(f struct{ modelType, architecture string }) bool { return f.modelType == c.ModelType }) {
			return &ConfigError{Field: "model_type", Err: fmt.Errorf("%w %q; supported: %s", ErrUnsupportedArchitecture, c.ModelType, supportedList())}
		}
		if archType != "" && archType != c.ModelType {
			return &ConfigError{Field: "model_type", Err: fmt.Errorf("%q does not match architecture %s", c.ModelType, c.Architecture)}
		}
	case archType != "":
		c.ModelType = archType
	default:
		return &ConfigError{Field: "model_type", Err: fmt.Errorf("missing, and no architectures given; supported: %s", supportedList())}
	}
	return nil
}

// rope reads the RoPE base and scaling from "rope_parameters" (transformers
// 5) or "rope_theta" and "rope_scaling" (earlier versions).
func (c *Config) rope(raw *rawConfig) error {
	c.RopeTheta = c.defaultTheta()
	if raw.RopeTheta != nil {
		c.RopeTheta = *raw.RopeTheta
	}
	if err := c.partialRotary(raw.PartialRotaryFactor, "partial_rotary_factor"); err != nil {
		return err
	}
	field := "rope_scaling"
	msg := raw.RopeScaling
	if !isNull(raw.RopeParameters) {
		field, msg = "rope_parameters", raw.RopeParameters
	}
	if c.ModelType == "gemma3_text" {
		// Gemma3TextConfig's sliding layers: rope_local_base_freq, no
		// scaling (transformers 4.5x's spelling; rope_parameters nested by
		// layer type replaces it in 5.x).
		c.LocalRopeTheta = defaultRopeTheta
		if raw.RopeLocalBaseFreq != nil {
			c.LocalRopeTheta = *raw.RopeLocalBaseFreq
		}
	}
	if !isNull(msg) {
		if err := c.ropeObject(raw, msg, field); err != nil {
			return err
		}
	}
	if c.ModelType == "glm4" && c.RotaryDim == 0 && raw.PartialRotaryFactor == nil && !ropeNames(msg, "partial_rotary_factor") {
		// Glm4Config's default partial_rotary_factor, 0.5.
		half := glm4PartialRotary
		if err := c.partialRotary(&half, "partial_rotary_factor"); err != nil {
			return err
		}
	}
	if c.ModelType == "olmo3" && c.LocalRopeTheta == 0 {
		// Olmo3Config without per-layer-type parameters: rope_theta and
		// rope_scaling are the full layers'; the sliding ones run unscaled
		// RoPE at its default_theta (convert_rope_params_to_dict has
		// popped rope_theta for the full layers by then).
		c.LocalRopeTheta = c.defaultTheta()
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return &ConfigError{Field: "rope_theta", Err: fmt.Errorf("%g is not a finite base > 1", c.RopeTheta)}
	}
	return nil
}

// ropeNames reports whether the RoPE object msg (null or absent: no)
// names key.
func ropeNames(msg json.RawMessage, key string) bool {
	var fields map[string]json.RawMessage
	if isNull(msg) || json.Unmarshal(msg, &fields) != nil {
		return false
	}
	_, ok := fields[key]
	return ok
}

// defaultTheta is the family's RoPE base where config.json gives none
// (its config class's default_theta).
func (c *Config) defaultTheta() float64 {
	if t := classDefaults[c.ModelType].theta; t != 0 {
		return t
	}
	return defaultRopeTheta
}

// ropeObject reads one "rope_scaling" or "rope_parameters" object msg
// (field names it in errors) into RopeTheta and RopeScaling.
func (c *Config) ropeObject(raw *rawConfig, msg json.RawMessage, field string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil {
		return &ConfigError{Field: field, Err: fmt.Errorf("want an object: %w", err)}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if v := bytes.TrimSpace(fields[k]); len(v) > 0 && v[0] == '{' {
			// transformers 5 nests parameters per layer type for models
			// that mix attention kinds (Gemma 3, OLMo 3: ropeByLayerType).
			if c.ModelType == "gemma3_text" || c.ModelType == "olmo3" || c.ModelType == "ministral" {
				return c.ropeByLayerType(raw, fields, field)
			}
			return &ConfigError{Field: field, Err: fmt.Errorf("per-layer-type parameters (%q) are not supported", k)}
		}
	}
	var rr rawRope
	if err := json.Unmarshal(msg, &rr); err != nil {
		return &ConfigError{Field: field, Err: err}
	}
	if rr.RopeTheta != nil {
		c.RopeTheta = *rr.RopeTheta
	}
	typ := "default"
	switch {
	case rr.RopeType != nil:
		typ = *rr.RopeType
	case rr.Type != nil:
		typ = *rr.Type
	}
	if err := c.partialRotary(rr.PartialRotaryFactor, field+".partial_rotary_factor"); err != nil {
		return err
	}
	switch typ {
	case "default":
	case "yarn":
		if c.ModelType == "phi3" {
			// Phi3Config renames its older "su" and "yarn" to longrope.
			s, err := c.longrope(raw, &rr, field)
			if err != nil {
				return err
			}
			c.RopeScaling = s
			break
		}
		// Inside per-layer-type parameters (ropeByLayerType's fields
		// rope_parameters.<type>) transformers reads some keys elsewhere.
		s, err := c.yarn(raw, &rr, field, strings.Count(field, ".") > 0)
		if err != nil {
			return err
		}
		c.RopeScaling = s
	case "longrope", "su":
		s, err := c.longrope(raw, &rr, field)
		if err != nil {
			return err
		}
		c.RopeScaling = s
	case "linear", "llama3":
		s := &RopeScaling{Type: typ}
		if rr.Factor == nil || !(*rr.Factor > 0) || math.IsInf(*rr.Factor, 0) {
			return &ConfigError{Field: field + ".factor", Err: fmt.Errorf("want a finite factor > 0 for %s scaling", typ)}
		}
		s.Factor = *rr.Factor
		if typ == "llama3" {
			if rr.LowFreqFactor == nil || rr.HighFreqFactor == nil || rr.OriginalMaxPositionEmbeddings == nil {
				return &ConfigError{Field: field, Err: errors.New("llama3 scaling needs low_freq_factor, high_freq_factor and original_max_position_embeddings")}
			}
			s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositions = *rr.LowFreqFactor, *rr.HighFreqFactor, *rr.OriginalMaxPositionEmbeddings
			if !(s.LowFreqFactor > 0 && s.HighFreqFactor > s.LowFreqFactor && !math.IsInf(s.HighFreqFactor, 0)) || s.OriginalMaxPositions <= 0 {
				return &ConfigError{Field: field, Err: fmt.Errorf("llama3 scaling needs 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0, got %g, %g, %d", s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositions)}
			}
		}
		c.RopeScaling = s
	default:
		return &ConfigError{Field: field + ".rope_type", Err: fmt.Errorf("RoPE type %q is not supported (supported: default, linear, llama3, longrope, yarn)", typ)}
	}
	return nil
}

// ropeByLayerType reads transformers 5's rope_parameters of Gemma 3 and
// OLMo 3, one object per layer type: "full_attention" gives RopeTheta and
// RopeScaling (the global layers'), "sliding_attention" LocalRopeTheta,
// where scaling is refused (their local layers have none).
func (c *Config) ropeByLayerType(raw *rawConfig, fields map[string]json.RawMessage, field string) error {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		switch k {
		case "full_attention":
			if err := c.ropeObject(raw, fields[k], field+"."+k); err != nil {
				return err
			}
		case "sliding_attention":
			local := &Config{ModelType: c.ModelType, HeadDim: c.HeadDim}
			local.RopeTheta = local.defaultTheta()
			if err := local.ropeObject(raw, fields[k], field+"."+k); err != nil {
				return err
			}
			if local.RopeScaling != nil {
				return &ConfigError{Field: field + "." + k, Err: fmt.Errorf("RoPE scaling (%s) of the sliding layers is not supported", local.RopeScaling.Type)}
			}
			c.LocalRopeTheta = local.RopeTheta
		default:
			return &ConfigError{Field: field, Err: fmt.Errorf("parameters of layer type %q are not supported (want full_attention and sliding_attention)", k)}
		}
	}
	if !(c.LocalRopeTheta > 1) || math.IsInf(c.LocalRopeTheta, 0) {
		return &ConfigError{Field: field + ".sliding_attention.rope_theta", Err: fmt.Errorf("%g is not a finite base > 1", c.LocalRopeTheta)}
	}
	return nil
}

// biases sets which projections carry a bias, per family.
func (c *Config) biases(raw *rawConfig) {
	attn := raw.AttentionBias != nil && *raw.AttentionBias
	switch c.ModelType {
	case "llama":
		c.QKVBias, c.OBias = attn, attn
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
	case "mistral", "ministral":
		// Mistral's and Ministral's projections have no biases.
	case "cwm":
		// CwmConfig drops attention_bias; its MLP's follow mlp_bias.
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
	case "qwen2":
		c.QKVBias = true // Qwen2Attention: q, k, v always biased, o never
	case "qwen3", "qwen3_moe":
		c.QKVBias, c.OBias = attn, attn
		c.QKNorm = true
	case "qwen2_moe":
		// Qwen2MoeAttention: q, k, v biased per qkv_bias (true unless
		// set), o never.
		c.QKVBias = raw.QKVBias == nil || *raw.QKVBias
	case "mixtral":
		// Mixtral's projections have no biases.
	case "phi3":
		c.FusedQKV = true // Phi3Attention's qkv_proj, Phi3MLP's gate_up_proj; no biases
	case "gemma":
		c.QKVBias, c.OBias = attn, attn // GemmaAttention is LlamaAttention
	case "gemma2":
		// Gemma2Attention: biases per attention_bias, no q/k norms;
		// Gemma2DecoderLayer's four norms (Gemma 3's).
		c.QKVBias, c.OBias = attn, attn
		c.PostNorms, c.SandwichNorms = true, true
	case "gemma3_text":
		// Gemma3Attention: biases per attention_bias, per-head q_norm and
		// k_norm; Gemma3DecoderLayer's four norms.
		c.QKVBias, c.OBias = attn, attn
		c.QKNorm, c.PostNorms, c.SandwichNorms = true, true, true
	case "granite":
		// GraniteAttention and GraniteMLP are Llama's.
		c.QKVBias, c.OBias = attn, attn
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
	case "olmo2", "olmo3":
		// OlmoAttention's q, k, v, o biases follow attention_bias; OlmoMLP
		// has none. Olmo2Attention's q_norm and k_norm span the whole
		// projections; Olmo2DecoderLayer's norms follow its blocks (OLMo
		// 3's are OLMo 2's, with sliding layers: windows).
		c.QKVBias, c.OBias = attn, attn
		c.QKNormFull, c.PostNorms = true, true
	case "smollm3":
		// SmolLM3Attention: q, k, v and o biased per attention_bias;
		// SmolLM3MLP per mlp_bias (Llama's).
		c.QKVBias, c.OBias = attn, attn
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
	case "helium":
		// HeliumAttention: Llama's q, k, v (biased per attention_bias), o
		// never biased; LlamaMLP's biases per mlp_bias; RoPE on interleaved
		// pairs of the whole head.
		c.QKVBias = raw.AttentionBias != nil && *raw.AttentionBias
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
		c.RopeInterleaved = true
	case "ernie4_5":
		// Ernie4_5Attention and Ernie4_5MLP: every projection biased per
		// use_bias; RoPE on interleaved pairs of the whole head (GLM's
		// style), computed in float32.
		b := raw.UseBias != nil && *raw.UseBias
		c.QKVBias, c.OBias, c.MLPBias = b, b, b
		c.RopeInterleaved = true
	case "exaone4":
		// Exaone4Attention: no biases, per-head q_norm and k_norm before
		// RoPE; Olmo2DecoderLayer's post-norm blocks.
		c.QKNorm, c.PostNorms = true, true
	case "glm4":
		// Glm4Attention: q, k, v biased per attention_bias (true unless
		// set), o never; Glm4DecoderLayer's four norms are Gemma 3's
		// (post_self_attn_layernorm after the attention,
		// post_attention_layernorm before the MLP, post_mlp_layernorm after
		// it: glm4Norms), without (1 + w); gate and up fused, RoPE on
		// interleaved pairs of the rotary half.
		c.QKVBias = raw.AttentionBias == nil || *raw.AttentionBias
		c.PostNorms, c.SandwichNorms = true, true
		c.FusedGateUp, c.RopeInterleaved = true, true
	case "seed_oss":
		// SeedOssAttention: q, k, v per attention_bias (true unless set),
		// o per attention_out_bias (false unless set); the MLP per
		// mlp_bias.
		c.QKVBias = raw.AttentionBias == nil || *raw.AttentionBias
		c.OBias = raw.AttentionOutBias != nil && *raw.AttentionOutBias
		c.MLPBias = raw.MLPBias != nil && *raw.MLPBias
	}
	c.TieWordEmbeddings = raw.TieWordEmbeddings != nil && *raw.TieWordEmbeddings
	if raw.TieWordEmbeddings == nil && (c.isGemma() || c.ModelType == "ernie4_5") {
		// GemmaConfig's, Gemma2Config's, Gemma3TextConfig's and Ernie4_5Config's default
		// (gemma-7b's and gemma-2-2b's config.json leave it out; their
		// checkpoints hold no lm_head).
		c.TieWordEmbeddings = true
	}
}

// windows sets SlidingWindow and LayerWindows the way transformers does.
func (c *Config) windows(raw *rawConfig) error {
	c.LayerWindows = make([]int, c.Layers)
	w := 0
	// (Qwen2MoeConfig writes a window of 0 where use_sliding_window is
	// off: no window.)
	if sw := raw.SlidingWindow; sw != nil && !(*sw == 0 && c.ModelType == "qwen2_moe") {
		if w = *raw.SlidingWindow; w <= 0 {
			return &ConfigError{Field: "sliding_window", Err: fmt.Errorf("%d is not a positive window", w)}
		}
	} else if sw == nil && !raw.present["sliding_window"] {
		w = classDefaults[c.ModelType].window // absent, not null: the class's
	}
	var sliding func(layer int) bool
	switch {
	case c.ModelType == "smollm3":
		// SmolLM3Attention slides only with use_sliding_window, on the
		// layers layer_types names (by default the NoPE layers).
		if raw.UseSlidingWindow == nil || !*raw.UseSlidingWindow || w == 0 {
			return nil
		}
		if len(raw.LayerTypes) > 0 {
			if err := c.checkLayerTypes(raw.LayerTypes); err != nil {
				return err
			}
			sliding = func(i int) bool { return raw.LayerTypes[i] == "sliding_attention" }
		} else {
			sliding = func(i int) bool { return c.NoRoPE[i] }
		}
	case len(raw.LayerTypes) > 0:
		if err := c.checkLayerTypes(raw.LayerTypes); err != nil {
			return err
		}
		sliding = func(i int) bool { return raw.LayerTypes[i] == "sliding_attention" }
	case c.ModelType == "cwm":
		// CwmConfig without layer_types: layers 0, 4, 8, ... full.
		sliding = func(i int) bool { return i%cwmWindowPattern != 0 }
	case c.ModelType == "olmo3":
		// Olmo3Config without layer_types: every fourth layer full.
		sliding = func(i int) bool { return (i+1)%olmo3WindowPattern != 0 }
	case c.ModelType == "exaone4" && w > 0:
		// Exaone4Config without layer_types: every
		// sliding_window_pattern-th layer global (4 by default). Its
		// "LLLG" string spelling comes with layer_types in the published
		// configs; alone it is refused rather than guessed.
		pattern := olmo3WindowPattern
		if p := raw.SlidingWindowPatternRaw; !isNull(p) {
			if err := json.Unmarshal(p, &pattern); err != nil || pattern <= 0 {
				return &ConfigError{Field: "sliding_window_pattern", Err: fmt.Errorf("%s without layer_types is not supported (want a positive layer count, or layer_types)", p)}
			}
		}
		sliding = func(i int) bool { return (i+1)%pattern != 0 }
	case c.hasSlidingLayers():
		// Gemma3TextConfig without layer_types: every
		// sliding_window_pattern-th layer global, the others sliding;
		// Gemma2Config: every second (it reads no pattern).
		pattern := 6
		if c.ModelType == "gemma2" {
			pattern = gemma2WindowPattern
		} else if p := raw.SlidingWindowPatternRaw; !isNull(p) {
			if err := json.Unmarshal(p, &pattern); err != nil || pattern <= 0 {
				return &ConfigError{Field: "sliding_window_pattern", Err: fmt.Errorf("%s is not a positive pattern", p)}
			}
		}
		sliding = func(i int) bool { return (i+1)%pattern != 0 }
	case c.ModelType == "mistral" || c.ModelType == "phi3" || c.ModelType == "mixtral" || c.ModelType == "ministral":
		// Phi3Model is MistralModel: sliding_window, where set, on every
		// layer (Phi-3-mini-4k's 2047).
		sliding = func(int) bool { return true }
	case c.ModelType == "qwen2_moe" || c.ModelType == "qwen3_moe":
		if raw.UseSlidingWindow == nil || !*raw.UseSlidingWindow {
			return nil
		}
		if c.ModelType == "qwen2_moe" {
			// transformers 5 writes layer_types (handled above); which
			// layers slide without them differs between its versions.
			return &ConfigError{Field: "use_sliding_window", Err: errors.New("a sliding window without layer_types is not supported for qwen2_moe (which layers slide differs between transformers versions)")}
		}
		sliding = func(int) bool { return true } // Qwen3MoeAttention: every layer
	case c.ModelType == "qwen2" || c.ModelType == "qwen3":
		if raw.UseSlidingWindow == nil || !*raw.UseSlidingWindow {
			return nil // sliding_window is ignored unless use_sliding_window
		}
		first := 0
		if raw.MaxWindowLayers != nil {
			first = *raw.MaxWindowLayers
		}
		sliding = func(i int) bool { return i >= first }
	default:
		return nil // Llama has no sliding window
	}
	for i := range c.LayerWindows {
		if sliding(i) {
			if w == 0 {
				if len(raw.LayerTypes) > 0 {
					return &ConfigError{Field: "sliding_window", Err: fmt.Errorf("layer %d is sliding_attention but no window is given", i)}
				}
				continue // Mistral with "sliding_window": null
			}
			c.LayerWindows[i] = w
			c.SlidingWindow = w
		}
	}
	return nil
}

// checkLayerTypes checks a layer_types list: one entry a layer, each
// full_attention or sliding_attention.
func (c *Config) checkLayerTypes(types []string) error {
	if len(types) != c.Layers {
		return &ConfigError{Field: "layer_types", Err: fmt.Errorf("%d entries for %d layers", len(types), c.Layers)}
	}
	for i, t := range types {
		if t != "full_attention" && t != "sliding_attention" {
			return &ConfigError{Field: "layer_types", Err: fmt.Errorf("layer %d: type %q is not supported (want full_attention or sliding_attention)", i, t)}
		}
	}
	return nil
}

// noRoPE reads SmolLM3's NoPE layers into NoRoPE: no_rope_layers (one 0 or
// 1 a layer, 0 for no RoPE) or, where absent, every
// no_rope_layer_interval-th layer (4 by default) without RoPE, as
// SmolLM3Config derives them. Other families have none.
func (c *Config) noRoPE(raw *rawConfig) error {
	if c.ModelType != "smollm3" {
		return nil
	}
	c.NoRoPE = make([]bool, c.Layers)
	if raw.NoRoPELayers != nil {
		if len(raw.NoRoPELayers) != c.Layers {
			return &ConfigError{Field: "no_rope_layers", Err: fmt.Errorf("%d entries for %d layers", len(raw.NoRoPELayers), c.Layers)}
		}
		for i, v := range raw.NoRoPELayers {
			if v != 0 && v != 1 {
				return &ConfigError{Field: "no_rope_layers", Err: fmt.Errorf("layer %d: %d (want 1 for RoPE, 0 for none)", i, v)}
			}
			c.NoRoPE[i] = v == 0
		}
		return nil
	}
	n := smolLM3NoRoPEInterval
	if raw.NoRoPELayerInterval != nil {
		if n = *raw.NoRoPELayerInterval; n <= 0 {
			return &ConfigError{Field: "no_rope_layer_interval", Err: fmt.Errorf("%d is not a positive interval", n)}
		}
	}
	for i := range c.NoRoPE {
		c.NoRoPE[i] = (i+1)%n == 0
	}
	return nil
}

// Activation names of config.json's hidden_act and hidden_activation.
const (
	actSiLU     = "silu"
	actSwish    = "swish" // silu's other name
	actGeluTanh = "gelu_pytorch_tanh"
	actGeluNew  = "gelu_new" // the same tanh approximation
)

// activation reads the MLP's gate activation: silu for every family but
// Gemma, whose gelu_pytorch_tanh makes the MLP a GeGLU. Gemma reads
// hidden_activation where set (transformers 4.x's GemmaMLP ignored
// hidden_act, which early Gemma configs set to "gelu"), else hidden_act.
func (c *Config) activation(raw *rawConfig) error {
	field, act := "hidden_act", actSiLU
	if raw.HiddenAct != nil {
		act = *raw.HiddenAct
	}
	if !c.isGemma() {
		if act != actSiLU && act != actSwish {
			return &ConfigError{Field: field, Err: fmt.Errorf("activation %q is not supported for %s (want silu)", act, c.ModelType)}
		}
		return nil
	}
	act = actGeluTanh // GemmaConfig's default
	switch {
	case raw.HiddenActivation != nil:
		field, act = "hidden_activation", *raw.HiddenActivation
	case raw.HiddenAct != nil:
		act = *raw.HiddenAct
	}
	if act != actGeluTanh && act != actGeluNew {
		return &ConfigError{Field: field, Err: fmt.Errorf("activation %q is not supported for gemma (want %s; the exact erf GELU is not implemented)", act, actGeluTanh)}
	}
	c.GeGLU = true
	return nil
}

// isGemma reports whether c is a Gemma family (gemma, gemma2,
// gemma3_text): 1 + w norms, the embedding scale, GeGLU by
// hidden_activation.
func (c *Config) isGemma() bool {
	return c.ModelType == "gemma" || c.ModelType == "gemma2" || c.ModelType == "gemma3_text"
}

// hasSlidingLayers reports whether c's family alternates sliding and
// global layers without layer_types (Gemma 2 and 3), with a default
// window (defaultGemmaSlidingWindow) where config.json has none.
func (c *Config) hasSlidingLayers() bool {
	return c.ModelType == "gemma2" || c.ModelType == "gemma3_text"
}

// gemma sets Gemma's RMSNorm of 1 + w and its embedding scale, √hidden
// rounded to the checkpoint's dtype (GemmaModel multiplies the embeddings
// by a tensor of that dtype; float32 where the config names none).
//
// Gemma 2 and Gemma 3 (gemma2, gemma3_text) add their attention scale,
// query_pre_attn_scalar^-½ (AttnScale, where that is not 1/√D), and the
// logit soft-caps (softcaps).
func (c *Config) gemma(raw *rawConfig) error {
	if !c.isGemma() {
		return nil
	}
	if c.ModelType != "gemma" {
		if err := c.softcaps(raw); err != nil {
			return err
		}
		qpas := defaultQueryPreAttnScalar
		if raw.QueryPreAttnScalar != nil {
			qpas = *raw.QueryPreAttnScalar
		}
		if !(qpas > 0) || math.IsInf(qpas, 0) {
			return &ConfigError{Field: "query_pre_attn_scalar", Err: fmt.Errorf("%g is not a finite scalar > 0", qpas)}
		}
		if qpas != float64(c.HeadDim) {
			c.AttnScale = 1 / math.Sqrt(qpas)
		}
	}
	if raw.BidirectionalAttn != nil && *raw.BidirectionalAttn {
		return &ConfigError{Field: "use_bidirectional_attention", Err: errors.New("bidirectional attention is not supported (a decoder attends causally)")}
	}
	c.NormPlusOne = true
	s := float32(math.Sqrt(float64(c.Hidden)))
	switch c.DType {
	case "bfloat16":
		s = half.BF16ToFloat32(half.BF16FromFloat32(s))
	case "float16":
		s = half.ToFloat32(half.FromFloat32(s))
	}
	c.EmbedScale = s
	return nil
}

// softcaps reads attn_logit_softcapping and final_logit_softcapping
// (AttnSoftcap, FinalSoftcap): a finite cap > 0, or null for none. Where
// config.json has no such field, Gemma2Config's defaults apply (50 and
// 30); Gemma3TextConfig's are null.
func (c *Config) softcaps(raw *rawConfig) error {
	for _, f := range []struct {
		name string
		v    json.RawMessage
		def  float64
		dst  *float64
	}{
		{"attn_logit_softcapping", raw.AttnLogitSoftcapping, defaultGemma2AttnSoftcap, &c.AttnSoftcap},
		{"final_logit_softcapping", raw.FinalLogitSoftcapping, defaultGemma2FinalSoftcap, &c.FinalSoftcap},
	} {
		switch {
		case !raw.present[f.name]:
			if c.ModelType == "gemma2" {
				*f.dst = f.def
			}
			continue
		case isNull(f.v):
			continue
		}
		var v float64
		if err := json.Unmarshal(f.v, &v); err != nil {
			return &ConfigError{Field: f.name, Err: fmt.Errorf("want a soft-cap (a number) or null: %w", err)}
		}
		if !(v > 0) || math.IsInf(v, 0) || v > math.MaxFloat32 {
			return &ConfigError{Field: f.name, Err: fmt.Errorf("%g is not a finite soft-cap > 0 (null: none)", v)}
		}
		*f.dst = v
	}
	return nil
}

// granite reads Granite's four multipliers (GraniteConfig's defaults 1
// where absent): embedding_multiplier scales the embeddings,
// attention_multiplier is the softmax scale (GraniteAttention.scaling, in
// place of 1/√D), residual_multiplier scales each block's output before
// its residual add, and the logits are divided by logits_scaling.
func (c *Config) granite(raw *rawConfig) error {
	if c.ModelType != "granite" {
		return nil
	}
	mult := func(v *float64, field string) (float64, error) {
		if v == nil {
			return 1, nil
		}
		if !(*v > 0) || math.IsInf(*v, 0) {
			return 0, &ConfigError{Field: field, Err: fmt.Errorf("%g is not a finite multiplier > 0", *v)}
		}
		return *v, nil
	}
	emb, err := mult(raw.EmbeddingMultiplier, "embedding_multiplier")
	if err != nil {
		return err
	}
	if c.AttnScale, err = mult(raw.AttentionMultiplier, "attention_multiplier"); err != nil {
		return err
	}
	if c.ResidualScale, err = mult(raw.ResidualMultiplier, "residual_multiplier"); err != nil {
		return err
	}
	ls, err := mult(raw.LogitsScaling, "logits_scaling")
	if err != nil {
		return err
	}
	c.LogitScale = 1 / ls
	if emb != 1 {
		// GraniteModel multiplies the float32 embeddings by a Python
		// float: a float32 product.
		c.EmbedScale = float32(emb)
	}
	return nil
}

// longrope reads LongRoPE's parameters (transformers'
// _compute_longrope_parameters): short_factor and long_factor of R/2
// entries each (R = RotaryDims(), D but for partial rotary embeddings), original_max_position_embeddings from the RoPE object or
// the config's top level, factor (max_position_embeddings over the
// original where absent) and attention_factor (√(1 + ln factor / ln
// original) where absent, 1 for a factor <= 1).
func (c *Config) longrope(raw *rawConfig, rr *rawRope, field string) (*RopeScaling, error) {
	s := &RopeScaling{Type: "longrope", ShortFactor: rr.ShortFactor, LongFactor: rr.LongFactor}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"short_factor", rr.ShortFactor}, {"long_factor", rr.LongFactor}} {
		if R := c.RotaryDims(); len(f.v) != R/2 {
			what := "head_dim/2"
			if R != c.HeadDim {
				what = "the rotary dimensions/2, int(head_dim·partial_rotary_factor)/2"
			}
			return nil, &ConfigError{Field: field + "." + f.name, Err: fmt.Errorf("%d entries, want %s = %d", len(f.v), what, R/2)}
		}
		for i, x := range f.v {
			if !(x > 0) || math.IsInf(x, 0) {
				return nil, &ConfigError{Field: field + "." + f.name, Err: fmt.Errorf("entry %d is %g: want a finite factor > 0", i, x)}
			}
		}
	}
	switch {
	case rr.OriginalMaxPositionEmbeddings != nil:
		s.OriginalMaxPositions = *rr.OriginalMaxPositionEmbeddings
	case raw.OriginalMaxPositions != nil:
		s.OriginalMaxPositions = *raw.OriginalMaxPositions
	}
	if s.OriginalMaxPositions <= 0 {
		return nil, &ConfigError{Field: "original_max_position_embeddings", Err: errors.New("longrope scaling needs a positive original_max_position_embeddings")}
	}
	var err error
	if s.Factor, err = scalingFactor(raw, rr, field, s); err != nil {
		return nil, err
	}
	switch {
	case rr.AttentionFactor != nil:
		s.AttentionFactor = *rr.AttentionFactor
	case s.Factor <= 1:
		s.AttentionFactor = 1
	default:
		s.AttentionFactor = math.Sqrt(1 + math.Log(s.Factor)/math.Log(float64(s.OriginalMaxPositions)))
	}
	if !(s.AttentionFactor > 0) || math.IsInf(s.AttentionFactor, 0) {
		return nil, &ConfigError{Field: field + ".attention_factor", Err: fmt.Errorf("%g is not a finite factor > 0", s.AttentionFactor)}
	}
	return s, nil
}

// scalingFactor reads the factor of a longrope or yarn scaling s (whose
// OriginalMaxPositions is set): the RoPE object's, else
// max_position_embeddings over the original context, as transformers
// derives it; a finite factor > 0.
func scalingFactor(raw *rawConfig, rr *rawRope, field string, s *RopeScaling) (float64, error) {
	var f float64
	switch {
	case rr.Factor != nil:
		f = *rr.Factor
	case raw.MaxPositionEmbeddings != nil:
		f = float64(*raw.MaxPositionEmbeddings) / float64(s.OriginalMaxPositions)
	default:
		return 0, &ConfigError{Field: field + ".factor", Err: fmt.Errorf("%s scaling needs factor or max_position_embeddings", s.Type)}
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return 0, &ConfigError{Field: field + ".factor", Err: fmt.Errorf("%g is not a finite factor > 0", f)}
	}
	return f, nil
}

// yarn reads YaRN's parameters as transformers 5 does
// (_compute_yarn_parameters after standardize_rope_params):
// original_max_position_embeddings from the config's top level where it
// has one (transformers gives it priority over the RoPE object's, but not
// inside per-layer-type parameters: nested), else the object's, else
// max_position_embeddings; factor (max_position_embeddings over the
// original where absent); attention_factor where given, else
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) where both are
// set (and not 0), else mscale(factor, 1), with mscale(f, m) = 0.1·m·ln f
// + 1 (1 for f <= 1); beta_fast and beta_slow (32 and 1 where absent or
// 0); truncate (true where absent, and always inside per-layer-type
// parameters: transformers reads it from the outer object there).
func (c *Config) yarn(raw *rawConfig, rr *rawRope, field string, nested bool) (*RopeScaling, error) {
	s := &RopeScaling{Type: "yarn", BetaFast: 32, BetaSlow: 1}
	switch {
	case raw.OriginalMaxPositions != nil && !nested:
		s.OriginalMaxPositions = *raw.OriginalMaxPositions
	case rr.OriginalMaxPositionEmbeddings != nil:
		s.OriginalMaxPositions = *rr.OriginalMaxPositionEmbeddings
	case raw.MaxPositionEmbeddings != nil:
		s.OriginalMaxPositions = *raw.MaxPositionEmbeddings
	}
	if s.OriginalMaxPositions <= 0 {
		return nil, &ConfigError{Field: field + ".original_max_position_embeddings", Err: errors.New("yarn scaling needs a positive original_max_position_embeddings (or max_position_embeddings)")}
	}
	var err error
	if s.Factor, err = scalingFactor(raw, rr, field, s); err != nil {
		return nil, err
	}
	mscale := func(f, m float64) float64 {
		if f <= 1 {
			return 1
		}
		return 0.1*m*math.Log(f) + 1
	}
	switch {
	case rr.AttentionFactor != nil:
		s.AttentionFactor = *rr.AttentionFactor
	case rr.Mscale != nil && *rr.Mscale != 0 && rr.MscaleAllDim != nil && *rr.MscaleAllDim != 0:
		s.AttentionFactor = mscale(s.Factor, *rr.Mscale) / mscale(s.Factor, *rr.MscaleAllDim)
	default:
		s.AttentionFactor = mscale(s.Factor, 1)
	}
	if !(s.AttentionFactor > 0) || math.IsInf(s.AttentionFactor, 0) {
		return nil, &ConfigError{Field: field + ".attention_factor", Err: fmt.Errorf("%g is not a finite factor > 0", s.AttentionFactor)}
	}
	if rr.BetaFast != nil && *rr.BetaFast != 0 {
		s.BetaFast = *rr.BetaFast
	}
	if rr.BetaSlow != nil && *rr.BetaSlow != 0 {
		s.BetaSlow = *rr.BetaSlow
	}
	if !(s.BetaFast > 0 && s.BetaSlow > 0) || math.IsInf(s.BetaFast, 0) || math.IsInf(s.BetaSlow, 0) {
		return nil, &ConfigError{Field: field, Err: fmt.Errorf("yarn's beta_fast %g and beta_slow %g must be finite and > 0", s.BetaFast, s.BetaSlow)}
	}
	s.NoTruncate = !nested && rr.Truncate != nil && !*rr.Truncate
	return s, nil
}

// partialRotary reads a partial_rotary_factor (nil: absent) into
// RotaryDim: R = int(D·factor), as transformers' RoPE initializers compute
// it. Only Phi-3 (Phi3ForCausalLM: Phi-4-mini's 0.75) and GLM-4 (0.5)
// apply a partial rotary in transformers' modeling; the other families'
// attention rotates the whole head, so a factor other than 1 is refused
// there. The factor
// may be given at the config's top level and in its RoPE object
// (transformers 5's rope_parameters); a second, different value is an
// error.
func (c *Config) partialRotary(f *float64, field string) error {
	if f == nil {
		return nil
	}
	if !(*f > 0 && *f <= 1) {
		return &ConfigError{Field: field, Err: fmt.Errorf("%g is not in (0, 1]", *f)}
	}
	R := int(float64(c.HeadDim) * *f)
	if c.RotaryDim != 0 && R != c.RotaryDim {
		return &ConfigError{Field: field, Err: fmt.Errorf("%g gives %d rotary dimensions, and another partial_rotary_factor of this config %d", *f, R, c.RotaryDim)}
	}
	if R == c.HeadDim {
		return nil
	}
	if c.ModelType != "phi3" && c.ModelType != "glm4" {
		return &ConfigError{Field: field, Err: fmt.Errorf("%g is not supported for %s: only Phi-3's and GLM-4's modeling (phi3, glm4) apply partial rotary embeddings in transformers; %s's attention rotates the whole head", *f, c.ModelType, c.ModelType)}
	}
	if R <= 0 || R%2 != 0 {
		return &ConfigError{Field: field, Err: fmt.Errorf("%g of head_dim %d gives %d rotary dimensions: RoPE needs an even, positive number (the loader pairs dimension i with i + R/2, and the %d others two by two)", *f, c.HeadDim, R, c.HeadDim-R)}
	}
	c.RotaryDim = R
	return nil
}

// RotaryDims returns R, the number of each head's dimensions that RoPE
// rotates: RotaryDim, or D where that is 0 (the whole head).
//
// transformers (Phi3's apply_rotary_pos_emb) rotates a head's first R
// dimensions, pairing i with i + R/2, and passes the D − R others through;
// the backends' RoPE pairs i with i + D/2 over D/2 frequencies. Where R <
// D the loader permutes each head's rows of q_proj and k_proj (and their
// biases) so that HF's pairs land on the backends' pairs i < R/2 and the
// pass-through dimensions on the others, and InvFreq gives those
// frequency 0: angle 0 rotates by exactly nothing. q·k is the same under
// one permutation of both; v and o do not change.
func (c *Config) RotaryDims() int {
	if c.RotaryDim == 0 {
		return c.HeadDim
	}
	return c.RotaryDim
}

// PadHeads returns the config of the same model with each head padded
// from D = HeadDim to dp dimensions, which the loader builds at load
// (LoadOptions.HeadDim, backend.HeadDimPadder) for a backend whose kernels
// take dp but not D. The padded model computes the same logits, up to
// rounding:
//
//   - q and k: each head's RoPE pairs (i, i + D/2) (after the partial
//     rotary layout, RotaryDims) move to (i, i + dp/2), the new rows are
//     zero (weights and biases), and RotaryDim keeps R, so that InvFreq
//     gives the new pairs frequency 0 (no rotation) and every other pair
//     its own; q·k is unchanged.
//   - v: each head's rows followed by dp − D zero rows; o: each head's
//     input columns followed by dp − D zero columns. The attention output's
//     extra channels are sums of zeros, and meet zero weights.
//   - the attention scale: the backend's is 1/√dp; AttnScale (1/√D where
//     the checkpoint has none) is folded into q's rows or q's norm as
//     Granite's and Gemma 3's are (attnFolds), giving q·k·AttnScale.
//   - per-head q/k norms (QKNorm) and OLMo 2's whole-projection ones
//     (QKNormFull) see dp − D zeros a head: their mean of squares is D/dp
//     of the unpadded one; QKEps gives eps·D/dp, and the loader multiplies
//     the norm weights by √(D/dp), so that each real value comes out as
//     before (the zeros stay zero). q's norm also carries the scale fold,
//     √(dp/D) for 1/√D, and so is unchanged.
//
// The KV cache stores and reads dp values a head: memory and attention
// traffic grow by dp/D (96 → 128: 4/3). dp must be even and at least D;
// dp = D returns c itself.
func (c *Config) PadHeads(dp int) (*Config, error) {
	D := c.HeadDim
	switch {
	case dp == D:
		return c, nil
	case dp < D || dp%2 != 0 || c.Heads*dp > maxDim:
		return nil, fmt.Errorf("model: cannot pad head dim %d to %d (want an even size of at least %d)", D, dp, D)
	case c.StoredHeadDim != 0:
		return nil, fmt.Errorf("model: head dim %d is already padded from %d", D, c.StoredHeadDim)
	}
	p := *c
	p.LayerWindows = slices.Clone(c.LayerWindows)
	p.EOSTokenIDs = slices.Clone(c.EOSTokenIDs)
	p.HeadDim, p.StoredHeadDim, p.RotaryDim = dp, D, c.RotaryDims()
	if p.AttnScale == 0 {
		p.AttnScale = 1 / math.Sqrt(float64(D))
	}
	return &p, nil
}

// CheckpointHeadDim returns the head dim of the checkpoint: StoredHeadDim
// where the heads are padded, else HeadDim.
func (c *Config) CheckpointHeadDim() int {
	if c.StoredHeadDim != 0 {
		return c.StoredHeadDim
	}
	return c.HeadDim
}

// QKEps returns the epsilon of the q and k norms (QKNorm, QKNormFull):
// RMSNormEps, times D/dp where the heads are padded (PadHeads), so that
// the mean of squares over a padded head plus it is D/dp of the unpadded
// one's.
func (c *Config) QKEps() float64 {
	if c.StoredHeadDim == 0 {
		return c.RMSNormEps
	}
	return c.RMSNormEps * float64(c.StoredHeadDim) / float64(c.HeadDim)
}

// positive returns *v checked to be in [1, max].
func positive(v *int, field string, max int) (int, error) {
	if v == nil {
		return 0, &ConfigError{Field: field, Err: errors.New("missing")}
	}
	if *v <= 0 || *v > max {
		return 0, &ConfigError{Field: field, Err: fmt.Errorf("%d is not in [1, %d]", *v, max)}
	}
	return *v, nil
}

// tokenIDs decodes a token id field that is absent, null, a number or a list
// of numbers.
func tokenIDs(msg json.RawMessage, field string) ([]int, error) {
	if isNull(msg) {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(msg, &one); err == nil {
		return []int{one}, nil
	}
	var list []int
	if err := json.Unmarshal(msg, &list); err != nil {
		return nil, &ConfigError{Field: field, Err: fmt.Errorf("want a token id or a list of them: %w", err)}
	}
	return list, nil
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(msg json.RawMessage) bool {
	return len(msg) == 0 || bytes.Equal(bytes.TrimSpace(msg), []byte("null"))
}

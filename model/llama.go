package model

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Llama is the Llama architecture and its close relatives, which differ only
// in the pieces the config switches on:
//
//	Llama 2/3/3.1/3.2  llama3 or linear RoPE scaling; attention_bias, mlp_bias
//	Mistral            sliding-window attention (handled by the Attention)
//	Qwen2, Qwen2.5     q, k, v projection biases
//	Qwen3              per-head RMSNorm of q and k before RoPE; explicit head_dim
//	Phi-3, Phi-3.5     q|k|v and gate|up stored fused (split at load); longrope
//	                   RoPE scaling; a sliding window on every layer
//	Phi-4-mini         Phi-3 with partial rotary embeddings (96 of 128 dims):
//	                   q and k rows permuted at load (rope tags, RotaryDims)
//	Gemma              RMSNorm by 1 + w (added at load), embeddings scaled by
//	                   √hidden, GeGLU (gelu_tanh) MLP; head_dim 256
//	Granite            Llama with four multipliers: the embedding's (a Scale
//	                   op) and, folded into weights at load (attnFolds), the
//	                   attention scale (q), the residual scale (o, down) and
//	                   1/logits_scaling (the final norm)
//	Gemma 2            Gemma 3's layer without q/k norms, one RoPE base; the
//	                   attention scores soft-capped by the KV cache
//	                   (Config.AttnSoftcap) and the logits by Forward
//	                   (FinalSoftcap)
//	OLMo 2             post-norm blocks, h = h + RMSNorm(attn(h)) and
//	                   h = h + RMSNorm(mlp(h)), no input norm; q_norm and
//	                   k_norm over the whole q and k projections
//	Mixtral, Qwen2-MoE, a mixture of experts in place of the MLP of the
//	Qwen3-MoE          sparse layers (Config.MoE, moe.go): a router, top-k
//	                   SwiGLU experts, Qwen2-MoE's gated shared expert
//	OLMo 3             OLMo 2 with sliding layers (layer_types), each kind
//	                   with its RoPE (the full layers' may be yarn-scaled)
//	SmolLM3            Llama with NoPE layers (Config.NoRoPE: zero
//	                   frequencies, so RoPE leaves q and k unchanged)
//	Seed-OSS           Llama with q/k/v biases and none on o by default
//
// Any of them may scale RoPE by yarn (Config.InvFreq; its attention factor
// squared scales q after RoPE on the layers that use those frequencies).
// Every variant may tie lm_head to the token embedding. The fields are the
// weights, tagged with their Hugging Face tensor names; Load fills them. The
// tp tags say how each splits over tensor-parallel ranks (Megatron's
// layout, loader.split): q, k, v, gate and up by output rows (q, k and v by
// whole heads, k and v replicated where there are fewer KV heads than
// ranks), o and down by input columns, the embedding and LM head by
// vocabulary; untagged weights (norms, the o and down biases) are whole on
// every rank.
type Llama struct {
	TokenEmbedding backend.Weight `hf:"model.embed_tokens.weight" shape:"V,H" if:"!qembed" tp:"vocab"` // TiedHead where qembed
	Layers         []LlamaLayer
	Norm           backend.Weight `hf:"model.norm.weight" shape:"H" norm:"rms"`
	Output         backend.Weight `hf:"lm_head.weight" shape:"V,H" if:"!tied" tp:"vocab" quant:"head"` // TokenEmbedding when tied
	// TiedHead is the quantized copy of a tied embedding that serves as
	// the LM head where LoadOptions.Weights quantizes the head
	// (wq.Spec.Head). The token lookup reads its values too: on a
	// backend.QuantEmbedder (the CPU) TokenEmbedding is TiedHead itself
	// (condition qembed: no 16-bit embedding is loaded), elsewhere a
	// 16-bit table of its dequantized values (loader.headValues).
	TiedHead backend.Weight `hf:"model.embed_tokens.weight" shape:"V,H" if:"tied_qhead" quant:"head"`

	cfg     *Config
	be      backend.Backend
	invFreq backend.Weight // RoPE inverse frequencies [D/2]
	// invFreqLong are longrope's frequencies past the original context
	// (nil for other RoPE types); qScale is the attention factor squared
	// of longrope or yarn (Config.RopeAttentionFactor), by which q is
	// scaled after RoPE on the layers that use invFreq (0: none).
	invFreqLong backend.Weight
	// invFreqLocal are the sliding layers' frequencies where they have
	// their own (Gemma 3's and OLMo 3's LocalRopeTheta), nil otherwise.
	invFreqLocal backend.Weight
	// invFreqNone are zeros, the frequencies of the layers that apply no
	// RoPE (Config.NoRoPE: angle 0, cos 1, sin 0, q and k unchanged), nil
	// where every layer applies it.
	invFreqNone backend.Weight
	qScale      float32
	eps         float32
	qkEps       float32 // the q and k norms' (Config.QKEps: eps·D/Dp for padded heads)
	mem         WeightMemory
	ck          *safetensors.Checkpoint // closed in Close: the backend may read its bytes in place
}

// LlamaLayer is one decoder layer's weights.
type LlamaLayer struct {
	AttnNorm backend.Weight `hf:"model.layers.%d.input_layernorm.weight" shape:"H" if:"input_norm" norm:"rms"`
	Q        backend.Weight `hf:"model.layers.%d.self_attn.q_proj.weight" shape:"QD,H" quant:"linear" tp:"rows,heads" rope:"q"`
	QBias    backend.Weight `hf:"model.layers.%d.self_attn.q_proj.bias" shape:"QD" if:"qkv_bias" tp:"rows,heads" rope:"q"`
	K        backend.Weight `hf:"model.layers.%d.self_attn.k_proj.weight" shape:"KVD,H" quant:"linear" tp:"rows,kvheads" rope:"k"`
	KBias    backend.Weight `hf:"model.layers.%d.self_attn.k_proj.bias" shape:"KVD" if:"qkv_bias" tp:"rows,kvheads" rope:"k"`
	V        backend.Weight `hf:"model.layers.%d.self_attn.v_proj.weight" shape:"KVD,H" quant:"linear" tp:"rows,kvheads"`
	VBias    backend.Weight `hf:"model.layers.%d.self_attn.v_proj.bias" shape:"KVD" if:"qkv_bias" tp:"rows,kvheads"`
	QNorm    backend.Weight `hf:"model.layers.%d.self_attn.q_norm.weight" shape:"D" if:"qk_norm" norm:"rms" rope:"dims"`
	KNorm    backend.Weight `hf:"model.layers.%d.self_attn.k_norm.weight" shape:"D" if:"qk_norm" norm:"rms" rope:"dims"`
	// QNormFull and KNormFull are OLMo 2's q_norm and k_norm over the
	// whole projections (QKNormFull).
	QNormFull backend.Weight `hf:"model.layers.%d.self_attn.q_norm.weight" shape:"QD" if:"qk_norm_full" norm:"rms" rope:"dims"`
	KNormFull backend.Weight `hf:"model.layers.%d.self_attn.k_norm.weight" shape:"KVD" if:"qk_norm_full" norm:"rms" rope:"dims"`
	O         backend.Weight `hf:"model.layers.%d.self_attn.o_proj.weight" shape:"H,QD" quant:"linear" tp:"cols,heads"`
	OBias     backend.Weight `hf:"model.layers.%d.self_attn.o_proj.bias" shape:"H" if:"o_bias"`
	MLPNorm   backend.Weight `hf:"model.layers.%d.post_attention_layernorm.weight" shape:"H" if:"!post_norms" norm:"rms"`
	// PostAttnNorm and PostMLPNorm normalize the attention's and the MLP's
	// output before its residual add (OLMo 2's PostNorms).
	PostAttnNorm backend.Weight `hf:"model.layers.%d.post_attention_layernorm.weight" shape:"H" if:"post_norms" norm:"rms"`
	PostMLPNorm  backend.Weight `hf:"model.layers.%d.post_feedforward_layernorm.weight" shape:"H" if:"post_norms" norm:"rms"`
	// PreMLPNorm is Gemma 3's norm before the MLP (SandwichNorms), where
	// the others have MLPNorm.
	PreMLPNorm backend.Weight `hf:"model.layers.%d.pre_feedforward_layernorm.weight" shape:"H" if:"sandwich" norm:"rms"`
	// Gate, Up and Down are the dense MLP, absent from a sparse layer.
	Gate     backend.Weight `hf:"model.layers.%d.mlp.gate_proj.weight" shape:"I,H" if:"dense" quant:"linear" tp:"rows"`
	GateBias backend.Weight `hf:"model.layers.%d.mlp.gate_proj.bias" shape:"I" if:"mlp_bias" tp:"rows"`
	Up       backend.Weight `hf:"model.layers.%d.mlp.up_proj.weight" shape:"I,H" if:"dense" quant:"linear" tp:"rows"`
	UpBias   backend.Weight `hf:"model.layers.%d.mlp.up_proj.bias" shape:"I" if:"mlp_bias" tp:"rows"`
	Down     backend.Weight `hf:"model.layers.%d.mlp.down_proj.weight" shape:"H,I" if:"dense" quant:"linear" tp:"cols"`
	DownBias backend.Weight `hf:"model.layers.%d.mlp.down_proj.bias" shape:"H" if:"mlp_bias"`

	// A sparse layer's mixture of experts (Config.MoE, moe.go): the
	// router [E, H], kept in its stored precision, and the experts (Mixtral's
	// names and transformers 5's fused layout map to these: moeFused).
	Router  backend.Weight `hf:"model.layers.%d.mlp.gate.weight" shape:"E,H" if:"moe"`
	Experts []Expert
	// Qwen2-MoE's shared expert and its gate [1, H].
	SharedGate       backend.Weight `hf:"model.layers.%d.mlp.shared_expert.gate_proj.weight" shape:"IS,H" if:"shared" quant:"linear"`
	SharedUp         backend.Weight `hf:"model.layers.%d.mlp.shared_expert.up_proj.weight" shape:"IS,H" if:"shared" quant:"linear"`
	SharedDown       backend.Weight `hf:"model.layers.%d.mlp.shared_expert.down_proj.weight" shape:"H,IS" if:"shared" quant:"linear"`
	SharedExpertGate backend.Weight `hf:"model.layers.%d.mlp.shared_expert_gate.weight" shape:"ONE,H" if:"shared"`
	// mix is the experts' handle where the backend routes them on the
	// device (backend.ExpertMixer), nil where the model routes on the host.
	mix backend.Experts
}

func init() {
	register(newLlama, "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "granite", "olmo2", "gemma2", "gemma3_text",
		"mixtral", "qwen2_moe", "qwen3_moe", "smollm3", "olmo3", "seed_oss", "glm4", "exaone4", "ernie4_5", "helium", "ministral", "cwm")
}

// newLlama loads the weights of cfg from the loader's checkpoint.
func newLlama(cfg *Config, ld *loader) (Model, error) {
	if cfg.RopeAttentionFactor() != 1 && cfg.RotaryDims() != cfg.HeadDim && (slices.Contains(cfg.NoRoPE, true) || cfg.LocalRopeTheta != 0) {
		// The loader folds the factor into every layer's q rows there
		// (headLayout), where only the layers with scaled RoPE take it.
		return nil, fmt.Errorf("model: %s: a RoPE attention factor with partial rotary embeddings is not supported beside layers without that scaling (NoPE or sliding layers with their own RoPE)", cfg.ModelType)
	}
	if _, tp := ld.be.(backend.SplitLoader); tp && cfg.QKNormFull {
		// Each rank holds some heads of q and k; the norm spans them all.
		return nil, fmt.Errorf("model: %s: q_norm and k_norm over the whole projections are not supported with tensor parallelism", cfg.ModelType)
	}
	if _, tp := ld.be.(backend.SplitLoader); tp && cfg.MoE != nil {
		return nil, fmt.Errorf("model: %s: %w", cfg.ModelType, errMoETP)
	}
	if cfg.Wrapper != "" && ld.ck != nil {
		// A multimodal checkpoint's head is tied where it stores none:
		// transformers 4.5x read text_config's tie_word_embeddings, 5.x
		// the top level's (true by default for Mistral3Config), and each
		// checkpoint stores the head exactly when its model is untied.
		cfg.TieWordEmbeddings = !ld.storesTextHead()
	}
	m := &Llama{cfg: cfg, be: ld.be, eps: float32(cfg.RMSNormEps), qkEps: float32(cfg.QKEps()), Layers: newLayers(cfg)}
	setupLlama(cfg, ld)
	if ld.opts.Weights.HeadQuantized() && !ld.quantHead() && ld.opts.Log != nil {
		fmt.Fprintf(ld.opts.Log, "model: the LM head stays 16-bit (head=%s): tensor parallelism splits it by vocabulary, which a packed weight cannot\n", ld.opts.Weights.Head)
	}
	if err := ld.load(m); err != nil {
		m.Close()
		return nil, err
	}
	switch {
	case m.TiedHead != nil:
		m.Output = m.TiedHead
		if m.TokenEmbedding == nil {
			m.TokenEmbedding = m.TiedHead
		}
	case cfg.TieWordEmbeddings:
		m.Output = m.TokenEmbedding
	}
	if j, ok := ld.be.(backend.WeightJoiner); ok {
		// Each layer's LinearGroups in one allocation each, in Forward's
		// order: one GEMM per group where the backend can.
		for i := range m.Layers {
			l := &m.Layers[i]
			groups := [][]backend.Weight{{l.Q, l.K, l.V}}
			if l.Gate != nil {
				groups = append(groups, []backend.Weight{l.Gate, l.Up})
			}
			if l.SharedGate != nil {
				groups = append(groups, []backend.Weight{l.SharedGate, l.SharedUp})
			}
			for e := range l.Experts {
				groups = append(groups, []backend.Weight{l.Experts[e].Gate, l.Experts[e].Up})
			}
			for _, ws := range groups {
				if err := j.JoinWeights(ws...); err != nil {
					m.Close()
					return nil, fmt.Errorf("model: layer %d: %w", i, err)
				}
			}
		}
	}
	m.loadMixers(ld.opts.Log)
	m.mem = ld.mem
	m.mem.Format, m.mem.DECKChunk = ld.storedFormat(), ld.opts.DECKChunk
	if ld.opts.Weights.IsQuantized() {
		m.mem.Format = ld.opts.Weights.String()
	}
	var err error
	if m.invFreq, err = loadVector(m.be, "rope.inv_freq", cfg.InvFreq()); err != nil {
		m.Close()
		return nil, fmt.Errorf("model: %w", err)
	}
	if cfg.LocalRopeTheta != 0 {
		if m.invFreqLocal, err = loadVector(m.be, "rope.local_inv_freq", cfg.LocalInvFreq()); err != nil {
			m.Close()
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	if long := cfg.InvFreqLong(); long != nil {
		if m.invFreqLong, err = loadVector(m.be, "rope.long_inv_freq", long); err != nil {
			m.Close()
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	if slices.Contains(cfg.NoRoPE, true) {
		if m.invFreqNone, err = loadVector(m.be, "rope.none_inv_freq", make([]float32, cfg.HeadDim/2)); err != nil {
			m.Close()
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	if f := cfg.RopeAttentionFactor(); f != 1 && cfg.RotaryDims() == cfg.HeadDim {
		// (Partial rotary and padded heads: the loader folds f² into
		// q's rotated rows, headLayout. Random weights, NewRandom,
		// have none.)
		m.qScale = float32(f * f)
	}
	return m, nil
}

// newLayers returns cfg's layers to load into, each sparse layer with its
// experts.
func newLayers(cfg *Config) []LlamaLayer {
	layers := make([]LlamaLayer, cfg.Layers)
	if cfg.MoE != nil {
		for i := range layers {
			if cfg.MoE.Sparse[i] {
				layers[i].Experts = make([]Expert, cfg.MoE.Experts)
			}
		}
	}
	return layers
}

// setupLlama sets the shape symbols, tag conditions and ignored tensors of
// a Llama-family checkpoint of config cfg on ld.
func setupLlama(cfg *Config, ld *loader) {
	ld.dims = map[string]int{
		"H": cfg.Hidden, "I": cfg.Intermediate, "V": cfg.Vocab, "D": cfg.HeadDim,
		"QD": cfg.Heads * cfg.HeadDim, "KVD": cfg.KVHeads * cfg.HeadDim,
	}
	dense := make([]bool, cfg.Layers)
	moe := make([]bool, cfg.Layers)
	shared := make([]bool, cfg.Layers)
	for i := range dense {
		dense[i] = cfg.MoE == nil || !cfg.MoE.Sparse[i]
		moe[i] = !dense[i]
		shared[i] = moe[i] && cfg.MoE.SharedIntermediate > 0
	}
	ld.layerConds = map[string][]bool{"dense": dense, "moe": moe, "shared": shared}
	if mc := cfg.MoE; mc != nil {
		ld.dims["E"], ld.dims["IE"], ld.dims["IS"], ld.dims["ONE"] = mc.Experts, mc.Intermediate, mc.SharedIntermediate, 1
		ld.fused = moeFused(cfg, func(name string) bool { _, ok := ld.ck.Info(name); return ok })
	}
	ld.conds = map[string]bool{
		"tied": cfg.TieWordEmbeddings, "qkv_bias": cfg.QKVBias, "o_bias": cfg.OBias,
		"mlp_bias": cfg.MLPBias, "qk_norm": cfg.QKNorm, "qk_norm_full": cfg.QKNormFull,
		"post_norms": cfg.PostNorms, "sandwich": cfg.SandwichNorms,
		"input_norm": !cfg.PostNorms || cfg.SandwichNorms,
		"tied_qhead": cfg.TieWordEmbeddings && ld.quantHead(),
		"qembed":     cfg.TieWordEmbeddings && ld.quantHead() && ld.embedsQuant(),
	}
	ld.ignore = func(name string) bool {
		// Old checkpoints store RoPE's buffer; tied checkpoints may still
		// store lm_head (transformers overwrites it with the embedding).
		return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (cfg.TieWordEmbeddings && name == "lm_head.weight")
	}
	D := cfg.CheckpointHeadDim()
	if D != cfg.HeadDim {
		ld.stored = map[string]int{
			"H": cfg.Hidden, "I": cfg.Intermediate, "V": cfg.Vocab, "D": D,
			"QD": cfg.Heads * D, "KVD": cfg.KVHeads * D,
		}
	}
	ld.normPlusOne = cfg.NormPlusOne
	ld.wrapper = cfg.Wrapper
	if R := cfg.RotaryDims(); R != cfg.HeadDim || cfg.RopeInterleaved {
		ld.heads = newHeadLayout(D, cfg.HeadDim, R, cfg.RopeAttentionFactor(), cfg.RopeInterleaved)
	}
	if cfg.FusedQKV || cfg.FusedGateUp {
		ld.fused = phi3Fused(cfg)
	}
	if cfg.ModelType == "glm4" {
		ld.rename = glm4Norms
	}
	ld.scale = attnFolds(cfg)
	if D != cfg.HeadDim {
		ld.scale = times(ld.scale, padNormFolds(D, cfg.HeadDim))
	}
}

// padNormFolds returns the factor by which the loader multiplies the q and
// k norms' weights (per head, QKNorm, or whole, QKNormFull) of heads padded
// from D to Dp (Config.PadHeads): √(D/Dp), which with Config.QKEps's eps
// gives each real value of a padded head the norm of the unpadded one.
func padNormFolds(D, Dp int) func(name string) float64 {
	f := math.Sqrt(float64(D) / float64(Dp))
	return func(name string) float64 {
		if strings.HasSuffix(name, ".self_attn.q_norm.weight") || strings.HasSuffix(name, ".self_attn.k_norm.weight") {
			return f
		}
		return 1
	}
}

// times returns the product of two loader.scale functions (nil: 1).
func times(a, b func(name string) float64) func(name string) float64 {
	if a == nil {
		return b
	}
	return func(name string) float64 { return a(name) * b(name) }
}

// attnFolds returns the factors by which the loader multiplies weights
// (loader.scale) to fold a family's run-time multipliers into them, nil
// where there are none:
//
//	AttnScale s (Granite's attention_multiplier, Gemma 3's
//	    query_pre_attn_scalar^-½): q_proj's rows and bias by s·√D, so
//	    that the attention's 1/√D gives q·k·s; where q is normalized
//	    (QKNorm: Gemma 3; QKNormFull), q_norm's weight instead (the norm
//	    would undo a scale before it). Padded heads (Config.PadHeads) get
//	    s = 1/√D of the checkpoint's D, D here the padded size.
//	ResidualScale r (residual_multiplier): o_proj's and down_proj's rows
//	    and biases by r, the blocks' outputs before their residual adds
//	LogitScale l (1/logits_scaling): the final norm's weight by l, so
//	    that the LM head (linear; perhaps the tied embedding) gives l·logits
//
// q·k is linear in q, RoPE is linear, and each multiplier follows a
// linear map, so each fold gives the same values up to float32 rounding
// (the products are stored in float32; a norm's after its 1 + w).
func attnFolds(cfg *Config) func(name string) float64 {
	if cfg.AttnScale == 0 && cfg.ResidualScale == 0 && cfg.LogitScale == 0 {
		return nil
	}
	q := 1.0
	if cfg.AttnScale != 0 {
		q = cfg.AttnScale * math.Sqrt(float64(cfg.HeadDim))
	}
	or1 := func(f float64) float64 {
		if f == 0 {
			return 1
		}
		return f
	}
	r, l := or1(cfg.ResidualScale), or1(cfg.LogitScale)
	qWeight, qBias := "self_attn.q_proj.weight", "self_attn.q_proj.bias"
	if cfg.QKNorm || cfg.QKNormFull {
		qWeight, qBias = "self_attn.q_norm.weight", ""
	}
	return func(name string) float64 {
		if name == "model.norm.weight" {
			return l
		}
		rest, ok := strings.CutPrefix(name, "model.layers.")
		if !ok {
			return 1
		}
		_, field, _ := strings.Cut(rest, ".")
		switch field {
		case qWeight, qBias:
			return q
		case "self_attn.o_proj.weight", "self_attn.o_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias":
			return r
		}
		return 1
	}
}

// phi3Fused maps the q, k, v, gate and up weights' names to their rows in
// Phi-3's fused tensors: qkv_proj [QD+2·KVD, H] holds q, k, v one after
// another, gate_up_proj [2·I, H] gate then up (Phi3Attention's slicing,
// Phi3MLP's chunk).
func phi3Fused(cfg *Config) func(name string) (rowSlice, bool) {
	D := cfg.CheckpointHeadDim() // the stored tensor's
	QD, KVD, I := cfg.Heads*D, cfg.KVHeads*D, cfg.Intermediate
	parts := map[string]rowSlice{
		"mlp.gate_proj.weight": {"mlp.gate_up_proj.weight", 0, I, 2 * I, nil},
		"mlp.up_proj.weight":   {"mlp.gate_up_proj.weight", I, 2 * I, 2 * I, nil},
	}
	if cfg.FusedQKV {
		parts["self_attn.q_proj.weight"] = rowSlice{"self_attn.qkv_proj.weight", 0, QD, QD + 2*KVD, nil}
		parts["self_attn.k_proj.weight"] = rowSlice{"self_attn.qkv_proj.weight", QD, QD + KVD, QD + 2*KVD, nil}
		parts["self_attn.v_proj.weight"] = rowSlice{"self_attn.qkv_proj.weight", QD + KVD, QD + 2*KVD, QD + 2*KVD, nil}
	}
	return func(name string) (rowSlice, bool) {
		rest, ok := strings.CutPrefix(name, "model.layers.")
		if !ok {
			return rowSlice{}, false
		}
		layer, field, ok := strings.Cut(rest, ".")
		rs, found := parts[field]
		if !ok || !found {
			return rowSlice{}, false
		}
		rs.Tensor = "model.layers." + layer + "." + rs.Tensor
		return rs, true
	}
}

// glm4Norms maps Gemma 3's names of a layer's four norms (the fields'
// tags, SandwichNorms) to GLM-4's: post_self_attn_layernorm after the
// attention, post_attention_layernorm before the MLP, post_mlp_layernorm
// after it (input_layernorm is the same).
func glm4Norms(name string) string {
	for _, r := range [...][2]string{
		{".post_attention_layernorm.weight", ".post_self_attn_layernorm.weight"},
		{".pre_feedforward_layernorm.weight", ".post_attention_layernorm.weight"},
		{".post_feedforward_layernorm.weight", ".post_mlp_layernorm.weight"},
	} {
		if rest, ok := strings.CutSuffix(name, r[0]); ok {
			return rest + r[1]
		}
	}
	return name
}

// WeightMemory implements WeightReporter.
func (m *Llama) WeightMemory() WeightMemory { return m.mem }

// Config implements Model.
func (m *Llama) Config() *Config { return m.cfg }

// Forward implements Model. With T new tokens, H hidden, each layer computes
//
//	x = RMSNorm(h)
//	q, k, v = x·Wqᵀ (+bq), x·Wkᵀ (+bk), x·Wvᵀ (+bv)  (one LinearGroup)
//	q, k = RMSNorm_head(q), RMSNorm_head(k)       (Qwen3)
//	q, k = RoPE(q, pos), RoPE(k, pos)
//	h = h + Attention(q, k, v)·Woᵀ (+bo)
//	x = RMSNorm(h)
//	h = h + (silu(x·Wgᵀ) ⊙ x·Wuᵀ)·Wdᵀ             (gate and up: one LinearGroup)
//
// with Gemma's embeddings scaled by EmbedScale and gelu_tanh for silu
// (GeGLU), and longrope's q scaled by its attention factor squared after
// RoPE, with the long frequencies where the batch reaches past the
// original context (transformers' choice per forward pass);
// and the logits are RMSNorm(h)·Wlmᵀ for the output rows (soft-capped where
// Config.FinalSoftcap asks, on the device or the host: readOutputs), returned whole or
// as their greedy tokens as each sequence asks (Seq.Output). The small ops
// run fused where the backend has an op for two of them (the same results,
// bitwise but for the ulp AddRMSNorm allows): each residual add with the norm after it (AddRMSNorm; a layer's
// last add carries the next layer's first norm, or the final norm), and the
// q/k norms with both RoPEs (RoPEQK).
func (m *Llama) Forward(b *Batch, attn Attention) (*Logits, error) {
	cfg, be := m.cfg, m.be
	if err := b.Validate(cfg.Vocab); err != nil {
		return nil, err
	}
	if attn == nil {
		return nil, errors.New("model: forward: nil Attention")
	}
	if bs, ok := attn.(BatchStarter); ok {
		if err := bs.Begin(b); err != nil {
			return nil, fmt.Errorf("model: forward: %w", err)
		}
	}
	outRows := b.OutputRows()
	T, R := len(b.Tokens), len(outRows)
	QD, KVD := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim

	a := &arena{be: be}
	defer a.free()
	ids := a.alloc(backend.I32, T)
	pos := a.alloc(backend.I32, T)
	rows := a.alloc(backend.I32, R)
	h := a.alloc(backend.F32, T, cfg.Hidden) // the residual stream
	x := a.alloc(backend.F32, T, cfg.Hidden)
	q := a.alloc(backend.F32, T, QD)
	k := a.alloc(backend.F32, T, KVD)
	v := a.alloc(backend.F32, T, KVD)
	o := a.alloc(backend.F32, T, QD)
	gate := a.alloc(backend.F32, T, cfg.Intermediate)
	up := a.alloc(backend.F32, T, cfg.Intermediate)
	var y, qn, kn backend.Tensor // PostNorms: the normalized block output, q and k
	if cfg.PostNorms {
		y = a.alloc(backend.F32, T, cfg.Hidden)
	}
	if cfg.QKNormFull {
		qn, kn = a.alloc(backend.F32, T, QD), a.alloc(backend.F32, T, KVD)
	}
	var ms *moeState
	if cfg.MoE != nil {
		ms = m.newMoEState(a, T)
	}
	hOut := a.alloc(backend.F32, R, cfg.Hidden)
	logits := a.alloc(backend.F32, R, cfg.Vocab)
	if a.err != nil {
		return nil, fmt.Errorf("model: forward: %w", a.err)
	}
	positions := b.Positions()
	for _, u := range []struct {
		dst backend.Tensor
		src []int32
	}{{ids, b.Tokens}, {pos, positions}, {rows, outRows}} {
		if err := be.UploadInt32(u.dst, u.src); err != nil {
			return nil, fmt.Errorf("model: forward: %w", err)
		}
	}
	if cr, ok := be.(backend.ChunkRows); ok {
		cr.SetChunkRows(T, b.ChunkRuns())
		defer cr.SetChunkRows(0, nil)
	}

	qkv, gateUp := []backend.Tensor{q, k, v}, []backend.Tensor{gate, up} // LinearGroup's outputs
	glu := be.SwiGLU
	if cfg.GeGLU {
		glu = be.GeGLU
	}
	invFreq := m.ropeFreq(positions)
	be.Embedding(h, m.TokenEmbedding, ids)
	if cfg.EmbedScale != 0 {
		be.Scale(h, h, cfg.EmbedScale)
	}
	// in is each block's input: x = RMSNorm(h), or h itself where the
	// block has no norm before it (PostNorms).
	in := x
	if m.Layers[0].AttnNorm != nil {
		be.RMSNorm(x, h, m.Layers[0].AttnNorm, m.eps) // later layers' come with the previous layer's last add
	} else {
		in = h
	}
	for i := range m.Layers {
		l := &m.Layers[i]

		// Self-attention block.
		be.LinearGroup(qkv, in, []backend.Weight{l.Q, l.K, l.V}, []backend.Weight{l.QBias, l.KBias, l.VBias})
		freq, scaled := invFreq, true // scaled: the layer takes qScale
		switch {
		case cfg.NoRoPE != nil && cfg.NoRoPE[i]:
			freq, scaled = m.invFreqNone, false
		case m.invFreqLocal != nil && cfg.LayerWindows[i] > 0:
			freq, scaled = m.invFreqLocal, false
		}
		if l.QNormFull != nil {
			be.RMSNorm(qn, q, l.QNormFull, m.qkEps)
			be.RMSNorm(kn, k, l.KNormFull, m.qkEps)
			be.RoPEQK(qn, kn, pos, freq, nil, nil, m.qkEps)
			qkv[0], qkv[1] = qn, kn
		} else {
			be.RoPEQK(q, k, pos, freq, l.QNorm, l.KNorm, m.qkEps)
		}
		if m.qScale != 0 && scaled {
			be.Scale(qkv[0], qkv[0], m.qScale)
		}
		if err := be.Err(); err != nil {
			return nil, m.fail(i, err)
		}
		if err := attn.Attend(i, b, qkv[0], qkv[1], v, o); err != nil {
			return nil, m.fail(i, err)
		}
		qkv[0], qkv[1] = q, k
		be.Linear(x, o, l.O, l.OBias)
		preMLP := l.MLPNorm
		if l.PreMLPNorm != nil {
			preMLP = l.PreMLPNorm
		}
		in = m.residual(h, x, y, l.PostAttnNorm, preMLP)

		// MLP block: dense, or a mixture of experts.
		mlpOut := x
		switch {
		case l.mixes(T):
			mlpOut = m.moeDevice(ms, l, in)
		case l.Router != nil:
			if err := m.moeHost(ms, l, in, x); err != nil {
				return nil, m.fail(i, err)
			}
		default:
			be.LinearGroup(gateUp, in, []backend.Weight{l.Gate, l.Up}, []backend.Weight{l.GateBias, l.UpBias})
			glu(gate, gate, up)
			be.Linear(x, gate, l.Down, l.DownBias)
		}
		in = m.residualFrom(h, x, mlpOut, y, l.PostMLPNorm, m.nextNorm(i))
	}

	// lm_head on the output rows of the final norm (x).
	be.Rows(hOut, x, rows)
	be.Linear(logits, hOut, m.Output, nil)
	out, err := readOutputs(be, a, b, logits, R, cfg.Vocab, cfg.FinalSoftcap)
	if err != nil {
		return nil, m.fail(-1, err)
	}
	if err := be.Sync(); err != nil {
		return nil, m.fail(-1, err)
	}
	return out, nil
}

// ropeFreq returns the RoPE frequencies of a batch at these positions:
// longrope's long ones where a position reaches OriginalMaxPositions
// (transformers' longrope_frequency_update: max position + 1 > the
// original context), else the usual ones.
func (m *Llama) ropeFreq(positions []int32) backend.Weight {
	if m.invFreqLong == nil {
		return m.invFreq
	}
	for _, p := range positions {
		if int(p) >= m.cfg.RopeScaling.OriginalMaxPositions {
			return m.invFreqLong
		}
	}
	return m.invFreq
}

// residual adds a block's output x to the residual stream h, normalized
// first by post (into y) where post is not nil, and returns the next
// block's input: x = RMSNorm(h) by next (fused with the add), or h where
// next is nil (a block without a norm before it).
func (m *Llama) residual(h, x, y backend.Tensor, post, next backend.Weight) backend.Tensor {
	return m.residualFrom(h, x, x, y, post, next)
}

// residualFrom is residual of the block output delta, which need not be x
// (the device's mixture of experts writes its own tensor); x is still the
// next block's input.
func (m *Llama) residualFrom(h, x, delta, y backend.Tensor, post, next backend.Weight) backend.Tensor {
	be := m.be
	if post != nil {
		be.RMSNorm(y, delta, post, m.eps)
		delta = y
	}
	if next == nil {
		be.Add(h, h, delta)
		return h
	}
	be.AddRMSNorm(h, x, delta, next, m.eps)
	return x
}

// nextNorm returns the norm that follows layer i's MLP: the next layer's
// input norm (nil for a layer without one), or the final norm after the
// last layer.
func (m *Llama) nextNorm(i int) backend.Weight {
	if i+1 < len(m.Layers) {
		return m.Layers[i+1].AttnNorm
	}
	return m.Norm
}

// fail clears the backend's pending error (so the next request starts clean)
// and wraps err with the layer it happened in (-1: after the layers).
func (m *Llama) fail(layer int, err error) error {
	_ = m.be.Sync()
	if layer < 0 {
		return fmt.Errorf("model: forward: %w", err)
	}
	return fmt.Errorf("model: forward: layer %d: %w", layer, err)
}

// keepCheckpoint implements checkpointKeeper.
func (m *Llama) keepCheckpoint(ck *safetensors.Checkpoint) { m.ck = ck }

// Close implements Model. It frees the weights, then closes the checkpoint
// they may have been read from in place.
func (m *Llama) Close() error {
	if mx, ok := m.be.(backend.ExpertMixer); ok {
		for i := range m.Layers {
			if l := &m.Layers[i]; l.mix != nil {
				mx.FreeExperts(l.mix)
				l.mix = nil
			}
		}
	}
	v := reflect.ValueOf(m).Elem()
	freeWeights(m.be, v)
	m.be.FreeWeight(m.invFreq)
	m.be.FreeWeight(m.invFreqLong)
	m.be.FreeWeight(m.invFreqLocal)
	m.be.FreeWeight(m.invFreqNone)
	m.invFreq, m.invFreqLong, m.invFreqLocal, m.invFreqNone = nil, nil, nil, nil
	if m.ck != nil {
		ck := m.ck
		m.ck = nil
		if err := ck.Close(); err != nil {
			return fmt.Errorf("model: close: %w", err)
		}
	}
	return nil
}

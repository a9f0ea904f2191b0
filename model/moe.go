package model

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/backend"
)

// Mixtures of experts: Mixtral, Qwen2-MoE (Qwen1.5-MoE) and Qwen3-MoE.
//
// A sparse layer replaces the MLP by a router and E experts, each a SwiGLU
// MLP of width IE. For each token (transformers' XxxTopKRouter and
// XxxExperts):
//
//	p = softmax(x·Wrᵀ)                  float32, over the E experts
//	(w, e) = top-k of p                 the k largest, in descending order
//	w = w / Σw                          where NormTopK (Mixtral always)
//	y = Σ_j w_j·expert_{e_j}(x)          summed in expert-index order
//	y = y + sigmoid(x·Wsgᵀ)·shared(x)    Qwen2-MoE's shared expert
//
// The attention is untouched: every KV format works as for dense models.

// MoEConfig is the mixture of experts of a model (Config.MoE).
type MoEConfig struct {
	Experts      int // E: num_local_experts (Mixtral) or num_experts (Qwen)
	TopK         int // k: num_experts_per_tok
	Intermediate int // IE: each expert's width (Mixtral's intermediate_size, Qwen's moe_intermediate_size)
	// NormTopK renormalises the k selected probabilities to sum to 1
	// (Mixtral always; Qwen's norm_topk_prob).
	NormTopK bool
	// SharedIntermediate is the width of Qwen2-MoE's shared expert, which
	// every token runs, scaled by sigmoid(shared_expert_gate(x)); 0: none.
	SharedIntermediate int
	// Sparse[i] says whether layer i has the mixture (the others a dense
	// MLP of Config.Intermediate): Qwen's decoder_sparse_step and
	// mlp_only_layers; every layer of Mixtral.
	Sparse []bool
}

// moeFamilies are the model types whose config describes a mixture of
// experts.
var moeFamilies = []string{"mixtral", "qwen2_moe", "qwen3_moe"}

// Defaults of transformers 5.17's config classes where a config.json
// leaves the field out.
const (
	defaultMixtralExperts   = 8    // MixtralConfig.num_local_experts
	defaultMixtralTopK      = 2    // MixtralConfig.num_experts_per_tok
	defaultQwen2MoEExperts  = 60   // Qwen2MoeConfig.num_experts
	defaultQwen2MoETopK     = 4    // Qwen2MoeConfig.num_experts_per_tok
	defaultQwen2MoEWidth    = 1408 // Qwen2MoeConfig.moe_intermediate_size
	defaultQwen2MoEShared   = 5632 // Qwen2MoeConfig.shared_expert_intermediate_size
	defaultQwen3MoEExperts  = 128  // Qwen3MoeConfig.num_experts
	defaultQwen3MoETopK     = 8    // Qwen3MoeConfig.num_experts_per_tok
	defaultQwen3MoEWidth    = 768  // Qwen3MoeConfig.moe_intermediate_size
	defaultDecoderSparseStp = 1    // Qwen's decoder_sparse_step
)

// parseMoE reads the mixture of experts of a Mixtral, Qwen2-MoE or
// Qwen3-MoE config (nil for the other families, which must not set
// num_experts).
func parseMoE(c *Config, raw *rawConfig) (*MoEConfig, error) {
	if !slices.Contains(moeFamilies, c.ModelType) {
		for _, f := range []struct {
			name string
			v    *int
		}{{"num_experts", raw.NumExperts}, {"num_local_experts", raw.NumLocalExperts}} {
			if f.v != nil && *f.v > 0 {
				return nil, &ConfigError{Field: f.name, Err: fmt.Errorf("%d experts: %s is not a mixture-of-experts family here (mixtral, qwen2_moe and qwen3_moe are)", *f.v, c.ModelType)}
			}
		}
		return nil, nil
	}
	m := &MoEConfig{Sparse: make([]bool, c.Layers)}
	experts, topK, width := defaultMixtralExperts, defaultMixtralTopK, c.Intermediate
	switch c.ModelType {
	case "qwen2_moe":
		experts, topK, width, m.SharedIntermediate = defaultQwen2MoEExperts, defaultQwen2MoETopK, defaultQwen2MoEWidth, defaultQwen2MoEShared
	case "qwen3_moe":
		experts, topK, width = defaultQwen3MoEExperts, defaultQwen3MoETopK, defaultQwen3MoEWidth
	}
	// The number of experts: num_local_experts (Mixtral's name, and what
	// transformers 5.17 writes for Qwen3-MoE) or num_experts (Qwen's).
	field := "num_local_experts"
	switch {
	case raw.NumLocalExperts != nil && raw.NumExperts != nil && *raw.NumLocalExperts != *raw.NumExperts:
		return nil, &ConfigError{Field: "num_experts", Err: fmt.Errorf("%d, and num_local_experts %d", *raw.NumExperts, *raw.NumLocalExperts)}
	case raw.NumLocalExperts != nil:
		experts = *raw.NumLocalExperts
	case raw.NumExperts != nil:
		field, experts = "num_experts", *raw.NumExperts
	}
	var err error
	if m.Experts, err = positive(&experts, field, maxExperts); err != nil {
		return nil, err
	}
	if raw.NumExpertsPerTok != nil {
		topK = *raw.NumExpertsPerTok
	}
	if m.TopK, err = positive(&topK, "num_experts_per_tok", m.Experts); err != nil {
		return nil, err
	}
	if c.ModelType == "mixtral" {
		// MixtralTopKRouter always renormalises; experts are
		// intermediate_size wide and every layer is sparse.
		m.Intermediate, m.NormTopK = width, true
		for i := range m.Sparse {
			m.Sparse[i] = true
		}
		return m, nil
	}
	if raw.MoEIntermediateSize != nil {
		width = *raw.MoEIntermediateSize
	}
	if m.Intermediate, err = positive(&width, "moe_intermediate_size", maxDim); err != nil {
		return nil, err
	}
	m.NormTopK = raw.NormTopKProb != nil && *raw.NormTopKProb
	if c.ModelType == "qwen2_moe" {
		if raw.SharedExpertIntermediateSize != nil {
			m.SharedIntermediate = *raw.SharedExpertIntermediateSize
		}
		if m.SharedIntermediate, err = positive(&m.SharedIntermediate, "shared_expert_intermediate_size", maxDim); err != nil {
			return nil, err
		}
	}
	step := defaultDecoderSparseStp
	if raw.DecoderSparseStep != nil {
		step = *raw.DecoderSparseStep
	}
	if step, err = positive(&step, "decoder_sparse_step", maxLayers); err != nil {
		return nil, err
	}
	for _, l := range raw.MLPOnlyLayers {
		if l < 0 || l >= c.Layers {
			return nil, &ConfigError{Field: "mlp_only_layers", Err: fmt.Errorf("layer %d is not in [0, %d)", l, c.Layers)}
		}
	}
	// XxxDecoderLayer: sparse unless listed in mlp_only_layers, on every
	// decoder_sparse_step-th layer.
	for i := range m.Sparse {
		m.Sparse[i] = !slices.Contains(raw.MLPOnlyLayers, i) && (i+1)%step == 0
	}
	return m, nil
}

// moeFused maps the tag names of a mixture's weights (Qwen's spelling,
// "model.layers.L.mlp.gate.weight" and "model.layers.L.mlp.experts.E.
// {gate,up,down}_proj.weight") to where ck stores them (loader.fused):
//
//   - Mixtral's checkpoints: block_sparse_moe.gate, and experts.E.w1 (gate),
//     w3 (up), w2 (down);
//   - transformers 5's in-memory layout, where a checkpoint holds it
//     (experts fused per layer: mlp.experts.gate_up_proj [E, 2·IE, H],
//     gate rows then up rows of each expert, and mlp.experts.down_proj
//     [E, H, IE]; Mixtral's router then under mlp.gate too): an expert's
//     rows are a contiguous view of the 3-D tensor seen as rows.
//
// Qwen's per-expert checkpoints (and what transformers 5.17's
// save_pretrained writes for all three) use the tag names themselves.
func moeFused(cfg *Config, has func(name string) bool) func(name string) (rowSlice, bool) {
	E, IE, H := cfg.MoE.Experts, cfg.MoE.Intermediate, cfg.Hidden
	return func(name string) (rowSlice, bool) {
		rest, ok := strings.CutPrefix(name, "model.layers.")
		if !ok {
			return rowSlice{}, false
		}
		layer, field, _ := strings.Cut(rest, ".")
		prefix := "model.layers." + layer + "."
		expertField, isExpert := strings.CutPrefix(field, "mlp.experts.")
		if !isExpert {
			if field == "mlp.gate.weight" && cfg.ModelType == "mixtral" && !has(name) {
				return rowSlice{Tensor: prefix + "block_sparse_moe.gate.weight", Hi: E, Rows: E}, true
			}
			return rowSlice{}, false
		}
		idx, proj, _ := strings.Cut(expertField, ".")
		e, err := strconv.Atoi(idx)
		if err != nil {
			return rowSlice{}, false
		}
		if gu := prefix + "mlp.experts.gate_up_proj"; has(gu) {
			switch proj {
			case "gate_proj.weight":
				return rowSlice{Tensor: gu, Lo: 2 * e * IE, Hi: (2*e + 1) * IE, Rows: 2 * E * IE, Shape: []int{E, 2 * IE, H}}, true
			case "up_proj.weight":
				return rowSlice{Tensor: gu, Lo: (2*e + 1) * IE, Hi: (2*e + 2) * IE, Rows: 2 * E * IE, Shape: []int{E, 2 * IE, H}}, true
			case "down_proj.weight":
				return rowSlice{Tensor: prefix + "mlp.experts.down_proj", Lo: e * H, Hi: (e + 1) * H, Rows: E * H, Shape: []int{E, H, IE}}, true
			}
			return rowSlice{}, false
		}
		if cfg.ModelType != "mixtral" {
			return rowSlice{}, false
		}
		w := map[string]string{"gate_proj.weight": "w1", "up_proj.weight": "w3", "down_proj.weight": "w2"}[proj]
		if w == "" {
			return rowSlice{}, false
		}
		rows := IE
		if w == "w2" {
			rows = H
		}
		return rowSlice{Tensor: prefix + "block_sparse_moe.experts." + idx + "." + w + ".weight", Hi: rows, Rows: rows}, true
	}
}

// Expert is one expert of a sparse layer: a SwiGLU MLP of width IE.
type Expert struct {
	Gate backend.Weight `hf:"model.layers.%d.mlp.experts.%e.gate_proj.weight" shape:"IE,H" quant:"linear"`
	Up   backend.Weight `hf:"model.layers.%d.mlp.experts.%e.up_proj.weight" shape:"IE,H" quant:"linear"`
	Down backend.Weight `hf:"model.layers.%d.mlp.experts.%e.down_proj.weight" shape:"H,IE" quant:"linear"`
}

// Route is one token's choice of experts: Expert[j] weighted by Weight[j],
// j < k, in descending order of probability.
type Route struct {
	Expert []int
	Weight []float32
}

// RouteTokens computes the routes of T tokens from their router logits
// [T, E] (row-major), as transformers' routers do in float32: p =
// softmax(logits) (max subtracted, exponentials summed in index order),
// the k largest p in descending order, equal values by lower index (torch.topk's
// order among exact ties is the device's; checked on an H100 2026-11-26,
// CPU and CUDA disagree, bench/results/2026-11-26-moe-18), and with
// norm each w divided by their float32 sum (summed in that order).
func RouteTokens(logits []float32, E, k int, norm bool) []Route {
	T := len(logits) / E
	routes := make([]Route, T)
	p := make([]float32, E)
	order := make([]int, E)
	for t := range T {
		row := logits[t*E : (t+1)*E]
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var sum float32
		for i, v := range row {
			p[i] = float32(math.Exp(float64(v - mx)))
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case p[a] > p[b]:
				return -1
			case p[a] < p[b]:
				return 1
			}
			return 0
		})
		r := Route{Expert: slices.Clone(order[:k]), Weight: make([]float32, k)}
		var s float32
		for j, e := range r.Expert {
			r.Weight[j] = p[e]
			s += p[e]
		}
		if norm {
			for j := range r.Weight {
				r.Weight[j] /= s
			}
		}
		routes[t] = r
	}
	return routes
}

// TokensByExpert groups routes by expert: rows[e] the tokens that chose
// expert e and ws[e] their weights for it, in token order (torch.where's
// order, which the host route sums in).
func TokensByExpert(routes []Route, E int) (rows [][]int32, ws [][]float32) {
	rows, ws = make([][]int32, E), make([][]float32, E)
	for t, r := range routes {
		for j, e := range r.Expert {
			rows[e] = append(rows[e], int32(t))
			ws[e] = append(ws[e], r.Weight[j])
		}
	}
	return rows, ws
}

// moeBufs are the tensors of one expert's share of a batch, n rows, reused
// by every expert and layer that gets n rows in one Forward.
type moeBufs struct {
	idx         backend.Tensor // [n] I32: the rows of the batch
	x, gate, up backend.Tensor // [n, H], [n, IE], [n, IE]
	y           backend.Tensor // [n, H]
	host        []float32      // y on the host
}

// moeState is what a Forward's sparse layers share: the router's logits,
// the buffers by row count and the host accumulator.
type moeState struct {
	a       *arena
	T       int
	logits  backend.Tensor // [T, E]
	hostLog []float32
	acc     []float32 // [T, H] the mixture's output on the host
	bufs    map[int]*moeBufs
	// Qwen2-MoE's shared expert: its MLP's [T, IS] and [T, H], and its
	// gate's [T, 1].
	sGate, sUp, sOut, sG backend.Tensor
	hostS, hostSG        []float32
	// The device's routing (backend.ExpertMixer): each token's experts
	// idx [T, k] and weights w [T, k], the experts' activations act
	// [T·k, IE] and the mixture's output out [T, H].
	idx, w, act, out backend.Tensor
}

// newMoEState allocates the per-Forward tensors of T rows.
func (m *Llama) newMoEState(a *arena, T int) *moeState {
	mc := m.cfg.MoE
	s := &moeState{a: a, T: T, bufs: map[int]*moeBufs{}}
	s.logits = a.alloc(backend.F32, T, mc.Experts)
	if slices.ContainsFunc(m.Layers, func(l LlamaLayer) bool { return l.Router != nil && !l.mixes(T) }) {
		s.hostLog = make([]float32, T*mc.Experts)
		s.acc = make([]float32, T*m.cfg.Hidden)
	}
	if slices.ContainsFunc(m.Layers, func(l LlamaLayer) bool { return l.mixes(T) }) {
		s.idx, s.w = a.alloc(backend.I32, T, mc.TopK), a.alloc(backend.F32, T, mc.TopK)
		s.act, s.out = a.alloc(backend.F32, T*mc.TopK, mc.Intermediate), a.alloc(backend.F32, T, m.cfg.Hidden)
	}
	if mc.SharedIntermediate > 0 {
		s.sGate = a.alloc(backend.F32, T, mc.SharedIntermediate)
		s.sUp = a.alloc(backend.F32, T, mc.SharedIntermediate)
		s.sOut = a.alloc(backend.F32, T, m.cfg.Hidden)
		s.sG = a.alloc(backend.F32, T, 1)
		if s.acc != nil {
			s.hostS, s.hostSG = make([]float32, T*m.cfg.Hidden), make([]float32, T)
		}
	}
	return s
}

// bufsOf returns the buffers of n rows.
func (s *moeState) bufsOf(n, H, IE int) *moeBufs {
	if b, ok := s.bufs[n]; ok {
		return b
	}
	a := s.a
	b := &moeBufs{
		idx: a.alloc(backend.I32, n), x: a.alloc(backend.F32, n, H),
		gate: a.alloc(backend.F32, n, IE), up: a.alloc(backend.F32, n, IE), y: a.alloc(backend.F32, n, H),
		host: make([]float32, n*H),
	}
	s.bufs[n] = b
	return b
}

// moeHost computes layer l's mixture of in [T, H] into out [T, H], routing
// on the host: the router's logits are downloaded, each expert runs on the
// rows routed to it (gathered with Rows: a prefill groups its tokens by
// expert), and the weighted outputs are summed on the host in expert order
// (transformers' index_add_ order) and uploaded. Every backend runs it; a
// CPU's downloads and uploads are copies. The shared expert (Qwen2-MoE)
// runs on every row.
func (m *Llama) moeHost(s *moeState, l *LlamaLayer, in, out backend.Tensor) error {
	cfg, be, mc := m.cfg, m.be, m.cfg.MoE
	H, T := cfg.Hidden, s.T
	if s.a.err != nil {
		return s.a.err
	}
	be.Linear(s.logits, in, l.Router, nil)
	if err := be.Download(s.hostLog, s.logits); err != nil {
		return err
	}
	rows, ws := TokensByExpert(RouteTokens(s.hostLog, mc.Experts, mc.TopK, mc.NormTopK), mc.Experts)
	clear(s.acc)
	for e, idx := range rows {
		n := len(idx)
		if n == 0 {
			continue
		}
		b := s.bufsOf(n, H, mc.Intermediate)
		if s.a.err != nil {
			return s.a.err
		}
		if err := be.UploadInt32(b.idx, idx); err != nil {
			return err
		}
		ex := &l.Experts[e]
		be.Rows(b.x, in, b.idx)
		swiGLUMLP(be, b.y, b.gate, b.up, b.x, ex.Gate, ex.Up, ex.Down)
		if err := be.Download(b.host, b.y); err != nil {
			return err
		}
		for j, t := range idx {
			w, y, acc := ws[e][j], b.host[j*H:(j+1)*H], s.acc[int(t)*H:(int(t)+1)*H]
			for i, v := range y {
				acc[i] += float32(v * w) // rounded before the add, as torch's product
			}
		}
	}
	if l.SharedGate != nil {
		m.sharedExpert(s, l, in)
		if err := be.Download(s.hostS, s.sOut); err != nil {
			return err
		}
		if err := be.Download(s.hostSG, s.sG); err != nil {
			return err
		}
		for t := range T {
			g := sigmoid32(s.hostSG[t])
			for i, v := range s.hostS[t*H : (t+1)*H] {
				s.acc[t*H+i] += float32(g * v)
			}
		}
	}
	return be.Upload(out, s.acc)
}

// moeDevice queues layer l's mixture of in [T, H] on a backend that routes
// on the device (backend.ExpertMixer) and returns the tensor it writes:
// the router's logits, RouteExperts's top-k, the shared expert (Qwen2-MoE)
// with the usual ops, and MixExperts. No host round trip: a decode step
// is the same launches whatever its tokens choose.
func (m *Llama) moeDevice(s *moeState, l *LlamaLayer, in backend.Tensor) backend.Tensor {
	be, mc := m.be, m.cfg.MoE
	mx := be.(backend.ExpertMixer)
	be.Linear(s.logits, in, l.Router, nil)
	mx.RouteExperts(s.idx, s.w, s.logits, mc.NormTopK)
	var shared, sharedGate backend.Tensor
	if l.SharedGate != nil {
		m.sharedExpert(s, l, in)
		shared, sharedGate = s.sOut, s.sG
	}
	mx.MixExperts(s.out, in, l.mix, s.idx, s.w, s.act, shared, sharedGate)
	return s.out
}

// sharedExpert queues Qwen2-MoE's shared expert of in [T, H]: its MLP's
// output into s.sOut, its gate's logit into s.sG.
func (m *Llama) sharedExpert(s *moeState, l *LlamaLayer, in backend.Tensor) {
	swiGLUMLP(m.be, s.sOut, s.sGate, s.sUp, in, l.SharedGate, l.SharedUp, l.SharedDown)
	m.be.Linear(s.sG, in, l.SharedExpertGate, nil)
}

// swiGLUMLP queues y = down(silu(x·gateᵀ) ⊙ x·upᵀ), gate and up its
// scratch (an expert's MLP).
func swiGLUMLP(be backend.Backend, y, gate, up, x backend.Tensor, wg, wu, wd backend.Weight) {
	be.LinearGroup([]backend.Tensor{gate, up}, x, []backend.Weight{wg, wu}, nil)
	be.SwiGLU(gate, gate, up)
	be.Linear(y, gate, wd, nil)
}

// loadMixers hands each sparse layer's experts to a backend that routes
// on the device (after JoinWeights, which may move them); a layer it
// refuses (on the CUDA backend: packed experts with DEC, or whose one-row
// GEMV a GEMVQ knob sends to a form with no indexed kernel, or all packed
// experts under BITDECODE_NO_MOE_PACKED) is routed on the host, which log
// says once with the backend's reason; so is a batch over the handle's
// backend.ExpertRows (the CUDA backend's packed experts: prefill chunks and
// large decode batches), whose limit log says once too.
func (m *Llama) loadMixers(log io.Writer) {
	mx, ok := m.be.(backend.ExpertMixer)
	if !ok || m.cfg.MoE == nil {
		return
	}
	said, saidRows := false, false
	for i := range m.Layers {
		l := &m.Layers[i]
		if len(l.Experts) == 0 {
			continue
		}
		E := len(l.Experts)
		gate, up, down := make([]backend.Weight, E), make([]backend.Weight, E), make([]backend.Weight, E)
		for e, ex := range l.Experts {
			gate[e], up[e], down[e] = ex.Gate, ex.Up, ex.Down
		}
		h, err := mx.LoadExperts(gate, up, down, m.cfg.MoE.TopK)
		if err != nil {
			if log != nil && !said {
				fmt.Fprintf(log, "model: layer %d: experts routed on the host (a round trip per sparse layer, no CUDA graph of the step): %v\n", i, err)
				said = true
			}
			continue
		}
		l.mix = h
		if r, ok := h.(backend.ExpertRows); ok && log != nil && !saidRows {
			fmt.Fprintf(log, "model: layer %d: experts routed on the device for batches of up to %d tokens, on the host above (prefill chunks, larger decode batches)\n", i, r.MaxRows())
			saidRows = true
		}
	}
}

// mixes says whether layer l's mixture of T tokens runs on the device
// (moeDevice): its experts were loaded by a backend.ExpertMixer and take T
// rows (backend.ExpertRows: the CUDA backend's packed experts take decode
// batches only).
func (l *LlamaLayer) mixes(T int) bool {
	if l.mix == nil {
		return false
	}
	r, ok := l.mix.(backend.ExpertRows)
	return !ok || T <= r.MaxRows()
}

// sigmoid32 is torch's float32 sigmoid, 1/(1 + e^−x).
func sigmoid32(x float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(x))))
}

// errMoETP refuses a mixture of experts over tensor-parallel ranks.
var errMoETP = errors.New("a mixture of experts is not supported with tensor parallelism (experts are not split over ranks)")

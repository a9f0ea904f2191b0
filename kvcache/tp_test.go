package kvcache

// Tensor parallelism end to end on CPU ranks: a model on 2 and 4 ranks
// (backend/tp over the host communicator) gives the logits and greedy
// tokens of the same model on one rank, through the real caches.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	_ "github.com/bitdecode/bitdecode/backend/cpu" // the cpu device and its groups
	"github.com/bitdecode/bitdecode/backend/tp"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/gotiny"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// tpBackend returns a tensor-parallel backend of n single-thread CPU ranks.
func tpBackend(t *testing.T, n int) *tp.Backend {
	t.Helper()
	ranks, comm, _, err := backend.OpenGroup("cpu", n, backend.OpenOptions{Threads: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	be, err := tp.New(ranks, comm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// synthCheckpoint writes a random F32 checkpoint for a Llama-family cfg:
// matrices N(0, 0.05²), norm weights 1 + N(0, 0.1²), biases N(0, 0.05²), so
// that every bias and norm matters.
func synthCheckpoint(t *testing.T, cfg *model.Config, seed uint64) *safetensors.Checkpoint {
	t.Helper()
	H, I, V, D := cfg.Hidden, cfg.Intermediate, cfg.Vocab, cfg.HeadDim
	QD, KVD := cfg.Heads*D, cfg.KVHeads*D
	shapes := map[string][]int{"model.embed_tokens.weight": {V, H}, "model.norm.weight": {H}}
	if !cfg.TieWordEmbeddings {
		shapes["lm_head.weight"] = []int{V, H}
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		for n, s := range map[string][]int{
			"input_layernorm.weight": {H}, "post_attention_layernorm.weight": {H},
			"self_attn.q_proj.weight": {QD, H}, "self_attn.k_proj.weight": {KVD, H}, "self_attn.v_proj.weight": {KVD, H},
			"self_attn.o_proj.weight": {H, QD}, "mlp.gate_proj.weight": {I, H}, "mlp.up_proj.weight": {I, H}, "mlp.down_proj.weight": {H, I},
		} {
			shapes[p+n] = s
		}
		if cfg.QKVBias {
			shapes[p+"self_attn.q_proj.bias"], shapes[p+"self_attn.k_proj.bias"], shapes[p+"self_attn.v_proj.bias"] = []int{QD}, []int{KVD}, []int{KVD}
		}
		if cfg.OBias {
			shapes[p+"self_attn.o_proj.bias"] = []int{H}
		}
		if cfg.MLPBias {
			shapes[p+"mlp.gate_proj.bias"], shapes[p+"mlp.up_proj.bias"], shapes[p+"mlp.down_proj.bias"] = []int{I}, []int{I}, []int{H}
		}
		if cfg.QKNorm {
			shapes[p+"self_attn.q_norm.weight"], shapes[p+"self_attn.k_norm.weight"] = []int{D}, []int{D}
		}
		if cfg.SandwichNorms {
			shapes[p+"pre_feedforward_layernorm.weight"], shapes[p+"post_feedforward_layernorm.weight"] = []int{H}, []int{H}
		}
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	rng := rand.New(rand.NewPCG(seed, 7))
	header := map[string]any{}
	var data bytes.Buffer
	for _, n := range names {
		cnt := backend.NumElements(shapes[n])
		begin := data.Len()
		for range cnt {
			v := rng.NormFloat64() * 0.05
			if strings.HasSuffix(n, "norm.weight") {
				v = 1 + rng.NormFloat64()*0.1
			}
			binary.Write(&data, binary.LittleEndian, float32(v))
		}
		header[n] = map[string]any{"dtype": "F32", "shape": shapes[n], "data_offsets": []int{begin, data.Len()}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	binary.Write(&file, binary.LittleEndian, uint64(len(h)))
	file.Write(h)
	file.Write(data.Bytes())
	f, err := safetensors.OpenBytes("synth.safetensors", file.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.NewCheckpoint(f)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// run is one model's answers: the logits after the prompt and after each
// greedy decode step, and the tokens picked.
type run struct {
	logits [][]float32
	tokens []int32
}

// greedy prefills prompt into a fresh cache of spec and decodes steps
// tokens greedily.
func greedy(t *testing.T, m model.Model, be backend.Backend, spec string, prompt []int32, steps int) run {
	t.Helper()
	cfg := m.Config()
	c, err := New(be, cfg, kv.MustParseSpec(spec), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out run
	var b model.Batch
	b.Add(0, 0, prompt...)
	pos := len(prompt)
	for step := 0; ; step++ {
		lg, err := m.Forward(&b, c)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		out.logits = append(out.logits, slices.Clone(lg.Data))
		next := int32(model.Argmax(lg.Data))
		out.tokens = append(out.tokens, next)
		if step == steps {
			return out
		}
		b = model.Batch{}
		b.Add(0, pos, next)
		pos++
	}
}

// margin is the gap between the largest and second-largest logit.
func margin(x []float32) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return float64(s[len(s)-1] - s[len(s)-2])
}

// logitTol is the largest logit difference allowed between ranks counts.
// The ranks sum each o and down projection (and the LM head's inputs) in
// another order: rounding differences of a few float32 ulps of h, which
// the fp16 KV cache can turn into one fp16 ulp (2⁻¹¹ relative) of a cached
// key or value. One such ulp moves an attention output by at most 2⁻¹¹ of
// |v|, and through the layers' norms a logit by about that fraction of its
// size: 2⁻¹¹ · max|logit| per layer, twice that as a margin for the sums.
func logitTol(ref []float32, layers int) float64 {
	var m float64
	for _, v := range ref {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return 2 * float64(layers) * m / (1 << 11)
}

// compareTP loads the model with load on 1 rank and on each of ranks and
// checks logits (fp16 KV) and greedy tokens (fp16 and int4 KV).
func compareTP(t *testing.T, load func(be backend.Backend) (model.Model, error), ranks []int, prompt []int32, steps int) {
	t.Helper()
	ref1 := tpBackend(t, 1)
	m1, err := load(ref1)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	want := map[string]run{}
	for _, spec := range []string{"fp16", "int4"} {
		want[spec] = greedy(t, m1, ref1, spec, prompt, steps)
	}
	layers := m1.Config().Layers
	for _, n := range ranks {
		be := tpBackend(t, n)
		m, err := load(be)
		if err != nil {
			t.Fatalf("tp %d: %v", n, err)
		}
		for _, spec := range []string{"fp16", "int4"} {
			got, w := greedy(t, m, be, spec, prompt, steps), want[spec]
			var worst, worstTol float64
			for s := range w.tokens {
				tol := logitTol(w.logits[s], layers)
				if spec == "fp16" {
					for i, v := range got.logits[s] {
						d := math.Abs(float64(v - w.logits[s][i]))
						if !(d <= tol) {
							t.Fatalf("tp %d %s step %d: logit %d = %g, tp 1 %g (|Δ| %g > %g)", n, spec, s, i, v, w.logits[s][i], d, tol)
						}
						if d > worst {
							worst, worstTol = d, tol
						}
					}
				}
				if got.tokens[s] != w.tokens[s] {
					if margin(w.logits[s]) <= 2*tol {
						t.Logf("tp %d %s step %d: a near-tie (top-2 margin %g): tokens compared up to here", n, spec, s, margin(w.logits[s]))
						break
					}
					t.Fatalf("tp %d %s: tokens %v, tp 1 %v", n, spec, got.tokens, w.tokens)
				}
			}
			if spec == "fp16" {
				t.Logf("tp %d: largest logit |Δ| %.3g (tolerance %.3g); tokens %v", n, worst, worstTol, got.tokens)
			}
		}
		m.Close()
	}
}

func TestTPGotiny(t *testing.T) {
	compareTP(t, func(be backend.Backend) (model.Model, error) { return gotiny.Load(be, model.LoadOptions{}) },
		[]int{2, 4}, []int32{5, 17, 33, 2, 90, 41, 7, 64, 3}, 4)
}

func TestTPGocoder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 23M-parameter checkpoint on CPU ranks")
	}
	dir := testmodel.Dir(t)
	compareTP(t, func(be backend.Backend) (model.Model, error) { return model.Load(dir, be, model.LoadOptions{}) },
		[]int{2, 4}, []int32{1, 400, 22, 3071, 95, 8, 700, 12, 5000, 64, 33, 2}, 4)
}

// synthConfig parses a config and fails the test on error.
func synthConfig(t *testing.T, js string) *model.Config {
	t.Helper()
	cfg, err := model.ParseConfig([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// synthLoad loads a random checkpoint of cfg with weight format w ("" for
// the stored F32).
func synthLoad(t *testing.T, cfg *model.Config, w string) func(be backend.Backend) (model.Model, error) {
	ck := synthCheckpoint(t, cfg, 11)
	var opts model.LoadOptions
	if w != "" {
		spec, err := wq.ParseSpec(w)
		if err != nil {
			t.Fatal(err)
		}
		opts.Weights = spec
		opts.Quantized = map[string]*wq.Matrix{} // the same codes for every ranks count
	}
	return func(be backend.Backend) (model.Model, error) { return model.LoadCheckpoint(cfg, ck, be, opts) }
}

// TestTPGQA14: 14 query heads over 2 KV heads (groups of 7), head_dim 64,
// q/k/v, o and MLP biases, an untied LM head and a vocabulary of 301 rows
// (uneven over the ranks).
func TestTPGQA14(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "llama", "hidden_size": 96, "intermediate_size": 160, "num_hidden_layers": 2,
		"num_attention_heads": 14, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 301,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-5, "attention_bias": true, "mlp_bias": true,
		"tie_word_embeddings": false}`)
	compareTP(t, synthLoad(t, cfg, ""), []int{2}, []int32{3, 100, 7, 250, 9, 11, 300, 0}, 4)
}

// TestTPMQA: one KV head, replicated on every rank; tied embeddings; Qwen2
// q/k/v biases.
func TestTPMQA(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 97,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": true}`)
	compareTP(t, synthLoad(t, cfg, ""), []int{2, 4}, []int32{3, 50, 7, 96, 9, 11, 0}, 4)
}

// TestTPQwen3: Qwen3's per-head RMSNorm of q and k before RoPE runs on each
// rank's heads (the norm weight of head_dim replicated); 8 query heads over
// 2 KV heads, head_dim 128 (hidden 64: Qwen3's explicit head_dim is wider
// than hidden/heads), so TP 4 also replicates KV heads.
func TestTPQwen3(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2,
		"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 113,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": true}`)
	if !cfg.QKNorm {
		t.Fatal("qwen3 config without QKNorm")
	}
	compareTP(t, synthLoad(t, cfg, ""), []int{2, 4}, []int32{3, 50, 7, 96, 9, 11, 112, 0}, 4)
}

// TestTPGemma2: Gemma 2's soft-capped attention (a cap of 0.5, which
// bends these weights' scores) and logits through the ranks' caches
// (TPCache's per-rank kvcache.New carries Config.AttnSoftcap), its four
// norms a layer, an alternating window of 3 and query_pre_attn_scalar;
// 4 query heads over 2 KV heads.
func TestTPGemma2(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 101, "query_pre_attn_scalar": 48,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-6, "sliding_window": 3,
		"attn_logit_softcapping": 0.5, "final_logit_softcapping": 3.0}`)
	if cfg.AttnSoftcap != 0.5 || cfg.FinalSoftcap != 3 || !cfg.SandwichNorms || cfg.LayerWindows[0] != 3 {
		t.Fatalf("gemma2 config: %+v", cfg)
	}
	load, prompt := synthLoad(t, cfg, ""), []int32{3, 50, 7, 96, 9, 11, 100, 0}
	compareTP(t, load, []int{2}, prompt, 4)
	// compareTP's reference is a group of one rank, through TPCache too:
	// hold it to the plain CPU backend's paged cache, which soft-caps
	// (internal/hfcheck's TestSoftcapPagedCPU), so that ranks that lost
	// the cap would fail here.
	plain, _, err := backend.OpenDevice("cpu", backend.OpenOptions{Threads: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	m0, err := load(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer m0.Close()
	one := tpBackend(t, 1)
	m1, err := load(one)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	want, got := greedy(t, m0, plain, "fp16", prompt, 4), greedy(t, m1, one, "fp16", prompt, 4)
	for s := range want.logits {
		tol := logitTol(want.logits[s], cfg.Layers)
		for i, v := range got.logits[s] {
			if d := math.Abs(float64(v - want.logits[s][i])); !(d <= tol) {
				t.Fatalf("step %d: logit %d = %g on one rank, %g on the plain backend (|Δ| %g > %g)", s, i, v, want.logits[s][i], d, tol)
			}
		}
	}
}

// TestTPPaddedHeads: heads of 96 padded to 128 at load (as the CUDA
// backend pads them, model.Config.PadHeads) and sliced by whole padded
// heads over 2 and 4 ranks (4 replicates the KV heads), against the
// unpadded model on one rank: Qwen3's per-head q/k norms and q/k/v and o
// biases, through the real caches of head dim 128 against 96.
func TestTPPaddedHeads(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2,
		"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 96, "vocab_size": 113,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-6, "attention_bias": true, "tie_word_embeddings": true}`)
	ck := synthCheckpoint(t, cfg, 12)
	compareTP(t, func(be backend.Backend) (model.Model, error) {
		var opts model.LoadOptions
		if len(be.(*tp.Backend).Ranks()) > 1 {
			opts.HeadDim = 128
		}
		m, err := model.LoadCheckpoint(cfg, ck, be, opts)
		if err == nil && m.Config().HeadDim != max(opts.HeadDim, 96) {
			m.Close()
			return nil, fmt.Errorf("head dim %d, want %d", m.Config().HeadDim, max(opts.HeadDim, 96))
		}
		return m, err
	}, []int{2, 4}, []int32{3, 50, 7, 96, 9, 11, 112, 0}, 4)
}

// TestTPInt4Weights: int4 linear layers (group 32) sliced by rows and by
// input channels on group boundaries.
func TestTPInt4Weights(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 131,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": true}`)
	compareTP(t, synthLoad(t, cfg, "int4:g32"), []int{2, 4}, []int32{3, 50, 7, 96, 9, 11, 0}, 4)
}

// TestTPErrors: shapes that do not split, and DEC, fail at load with the
// numbers.
func TestTPErrors(t *testing.T) {
	for _, c := range []struct {
		name, cfg, weights string
		ranks, dec         int
		want               string
	}{
		{"query heads", `"num_attention_heads": 6, "num_key_value_heads": 2`, "", 4, 0, "6 query heads over 4 ranks"},
		{"KV heads", `"num_attention_heads": 6, "num_key_value_heads": 3`, "", 2, 0, "3 KV heads over 2 ranks"},
		{"DEC", `"num_attention_heads": 4, "num_key_value_heads": 2`, "int4:g32", 2, 4, "DEC"},
	} {
		cfg := synthConfig(t, `{"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1,
			"head_dim": 64, "vocab_size": 50, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, `+c.cfg+`}`)
		ck := synthCheckpoint(t, cfg, 3)
		var opts model.LoadOptions
		if c.weights != "" {
			opts.Weights, _ = wq.ParseSpec(c.weights)
			opts.DECKChunk = c.dec
		}
		m, err := model.LoadCheckpoint(cfg, ck, tpBackend(t, c.ranks), opts)
		if err == nil {
			m.Close()
			t.Errorf("%s: tp %d loaded", c.name, c.ranks)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.name, err, c.want)
		}
		if _, err := RankShapeOf(cfg, c.ranks); c.dec == 0 && err == nil {
			t.Errorf("%s: RankShapeOf accepts %d ranks", c.name, c.ranks)
		}
	}
}

// TestTPRandom: NewRandom's weights on CPU ranks (host data, split like a
// checkpoint's) make the model NewRandom makes on one rank.
func TestTPRandom(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 100, "max_position_embeddings": 64,
		"rms_norm_eps": 1e-5, "tie_word_embeddings": false}`)
	compareTP(t, func(be backend.Backend) (model.Model, error) { return model.NewRandom(cfg, be, 5) }, []int{2, 4}, []int32{1, 2, 3, 99}, 3)
}

// TestTPCacheBooks: a sized cache on 4 ranks keeps the books of one rank
// (blocks, lengths, prefix sharing), sums the ranks' bytes, refuses what one
// rank refuses, and says in one line that it replicates the single KV head.
func TestTPCacheBooks(t *testing.T) {
	cfg := synthConfig(t, `{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 97,
		"max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": true}`)
	spec := kv.MustParseSpec("int4")
	o := Options{Blocks: 6, MaxSeqs: 2}
	one, err := New(tpBackend(t, 1), cfg, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var log strings.Builder
	o.Log = &log
	c, err := New(tpBackend(t, 4), cfg, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if want := "1 KV heads over 4 tensor-parallel ranks: each KV head is replicated on 4 ranks"; !strings.Contains(log.String(), want) || strings.Count(log.String(), "\n") != 1 {
		t.Errorf("log %q, want one line saying %q", log.String(), want)
	}
	if c.TotalBlocks() != one.TotalBlocks() || c.FreeBlocks() != one.FreeBlocks() || c.BlockTokens() != one.BlockTokens() || c.MaxSeqs() != 2 {
		t.Errorf("blocks %d/%d of %d tokens, one rank %d/%d of %d", c.FreeBlocks(), c.TotalBlocks(), c.BlockTokens(), one.FreeBlocks(), one.TotalBlocks(), one.BlockTokens())
	}
	if c.BlockBytes() != 4*one.BlockBytes() {
		t.Errorf("block bytes %d, want 4 ranks × %d", c.BlockBytes(), one.BlockBytes())
	}
	b1, _ := one.BytesAt(300)
	b4, _ := c.BytesAt(300)
	if b4 != 4*b1 {
		t.Errorf("bytes at 300 tokens %d, want 4 × %d", b4, b1)
	}
	prompt := make([]int, 2*c.BlockTokens()+5)
	for _, cc := range []Cache{one, c} {
		if n, err := cc.Open(0, prompt); err != nil || n != 0 {
			t.Fatalf("open: %d, %v", n, err)
		}
		if _, err := cc.Open(1, prompt); err != nil {
			t.Fatal(err)
		}
		if _, err := cc.Open(2, prompt); !errors.Is(err, ErrNoSlot) {
			t.Fatalf("a third sequence of 2: %v", err)
		}
		cc.Remove(1)
	}
	if _, ok := c.(*TPCache); !ok {
		t.Fatalf("New on a tp backend gave %T", c)
	}
	if _, err := New(tpBackend(t, 2), cfg, kv.MustParseSpec("bw"), o); err == nil || !strings.Contains(err.Error(), "bw format is not supported with tensor parallelism") {
		t.Errorf("bw over 2 ranks: %v", err)
	}
}

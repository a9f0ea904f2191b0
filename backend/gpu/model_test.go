package gpu_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// golden is the part of gocoder-23m's golden.json this test reads.
type golden struct {
	Prompts []struct {
		IDs    []int32 `json:"ids"`
		Greedy []int32 `json:"greedy_ids"`
	} `json:"prompts"`
}

// Bounds of the model test. The GPU rounds each Linear input to fp16
// (relative 2⁻¹¹ = 4.9e-4 per element, partly averaging out in the dot
// products); the bf16 weights are exact in fp16. Through 6 layers of 7
// GEMMs each those roundings move the logits by about 1e-3 relative in L2;
// a wrong op (layout, missing bias, wrong RoPE) moves them by 1e-1 or more.
const (
	logitRelL2Tol = 1e-2 // ‖gpu − cpu‖₂ / ‖cpu‖₂ of a row of logits
	minGreedy     = 8    // golden greedy tokens that must match before the first divergence
)

// TestModelMatchesCPU runs gocoder-23m on the GPU and on the CPU backend with
// the same dense float32 KV cache: the prompt logits must agree within
// logitRelL2Tol with the same top-1 token at the last position, and greedy
// decoding must follow golden.json's 48 tokens for at least minGreedy.
func TestModelMatchesCPU(t *testing.T) {
	dir := testmodel.Dir(t)
	gb := gpuBackend(t)
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	if len(g.Prompts) == 0 {
		t.Fatal("golden.json has no prompts")
	}
	load := func(be backend.Backend) model.Model {
		m, err := model.Load(dir, be, model.LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	cb := cpu.New(0)
	mc, mg := load(cb), load(gb)

	worstAll, worstLast := 0.0, 0.0
	for pi, p := range g.Prompts {
		var logits [2]*model.Logits
		for i, m := range []model.Model{mc, mg} {
			be := []backend.Backend{cb, gb}[i]
			var b model.Batch
			b.Add(0, 0, p.IDs...)
			b.AllLogits = true
			out, err := m.Forward(&b, model.NewDenseCache(be, m.Config()))
			if err != nil {
				t.Fatalf("prompt %d on %s: %v", pi, be.Name(), err)
			}
			logits[i] = out
		}
		for r := range logits[0].Rows() {
			c, gr := logits[0].Row(r), logits[1].Row(r)
			var diff, norm float64
			for j := range c {
				if gr[j] != gr[j] {
					t.Fatalf("prompt %d position %d: GPU logit %d is NaN", pi, r, j)
				}
				d := float64(gr[j]) - float64(c[j])
				diff += d * d
				norm += float64(c[j]) * float64(c[j])
			}
			rel := math.Sqrt(diff / norm)
			worstAll = max(worstAll, rel)
			if r == logits[0].Rows()-1 {
				worstLast = max(worstLast, rel)
				if a, b := argmax(c), argmax(gr); a != b {
					t.Errorf("prompt %d: last-position top-1 token: gpu %d (%.4f), cpu %d (%.4f)", pi, b, gr[b], a, c[a])
				}
			}
			if !(rel <= logitRelL2Tol) {
				t.Errorf("prompt %d position %d: relative L2 difference of the logits %.3g > %.0e", pi, r, rel, logitRelL2Tol)
			}
		}

		// Greedy decoding on the GPU, one token per forward pass.
		cache := model.NewDenseCache(gb, mg.Config())
		var b model.Batch
		b.Add(0, 0, p.IDs...)
		out, err := mg.Forward(&b, cache)
		if err != nil {
			t.Fatal(err)
		}
		gen := []int32{argmax(out.Row(0))}
		for len(gen) < len(p.Greedy) {
			var d model.Batch
			d.Add(0, len(p.IDs)+len(gen)-1, gen[len(gen)-1])
			out, err := mg.Forward(&d, cache)
			if err != nil {
				t.Fatal(err)
			}
			gen = append(gen, argmax(out.Row(0)))
		}
		same := 0
		for same < len(gen) && gen[same] == p.Greedy[same] {
			same++
		}
		t.Logf("prompt %d: %d of %d greedy tokens match golden.json before the first divergence", pi, same, len(p.Greedy))
		if same < min(minGreedy, len(p.Greedy)) {
			t.Errorf("prompt %d: greedy tokens diverge at %d (want at least %d)\n got %v\nwant %v", pi, same, minGreedy, gen, p.Greedy)
		}
	}
	t.Logf("%s vs cpu: worst relative L2 difference of the logits %.3g at the last positions, %.3g at any position", gb.Name(), worstLast, worstAll)
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// TestModelDECMatchesCPU loads gocoder-23m with int4 weights and DEC
// (k_chunk 32, int4 residuals in mapped host memory) on the GPU and on the
// CPU backend: the prompt's logits (prefill: cuBLASLt base, DEC per token)
// and those of 8 decode steps fed the CPU's greedy tokens (gemvq.cu base,
// dec.cu after it, replayed as CUDA graphs after the first steps) must agree
// within logitRelL2Tol. The compensation is wq's exactly on both; only the
// base products' rounding differs.
func TestModelDECMatchesCPU(t *testing.T) { modelQuantMatchesCPU(t, testmodel.Dir(t), "int4", 32) }

// TestModelQuantMatchesCPU is TestModelDECMatchesCPU without DEC, with int4,
// int3 and int8 weights (the LM head int8 by default, int4 or 16-bit as the
// spec says): the decode steps' linear layers run the one-row GEMVs, the
// prefill's dequantize to fp16 for cuBLASLt.
func TestModelQuantMatchesCPU(t *testing.T) {
	for _, spec := range []string{"int4", "int3", "int8", "int4:head=int4", "int4:head=fp16"} {
		t.Run(spec, func(t *testing.T) { modelQuantMatchesCPU(t, testmodel.Dir(t), spec, 0) })
	}
}

// TestModelQuantHeadSynth is TestModelQuantMatchesCPU on random Llama
// checkpoints whose vocabularies are no multiple of anything (1001, odd, as
// GPT-2's 50257 is; 1536), tied and untied: the quantized LM head (int8 by
// default, int4, int3) on the GPU's packed GEMVs and GEMMs against the
// CPU's.
func TestModelQuantHeadSynth(t *testing.T) {
	for _, tc := range []struct {
		vocab int
		tied  bool
	}{{1001, true}, {1536, false}} {
		dir := t.TempDir()
		cfg := fmt.Sprintf(`{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":512,"intermediate_size":1024,
			"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":%d,"rms_norm_eps":1e-5,
			"rope_theta":10000.0,"tie_word_embeddings":%v}`, tc.vocab, tc.tied)
		shape := synthmodel.Shape{Hidden: 512, Intermediate: 1024, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 128, Vocab: tc.vocab, Tied: tc.tied}
		if _, err := synthmodel.Write(dir, cfg, shape, safetensors.BF16, uint64(tc.vocab), nil); err != nil {
			t.Fatal(err)
		}
		for _, spec := range []string{"int4", "int8:head=int4", "int4:head=int3"} {
			t.Run(fmt.Sprintf("vocab%d_tied%v_%s", tc.vocab, tc.tied, spec), func(t *testing.T) { modelQuantMatchesCPU(t, dir, spec, 0) })
		}
	}
}

// modelQuantMatchesCPU loads the checkpoint in dir with weights of this
// spec and DEC at kChunk (0: none) on the GPU and the CPU backend and
// compares the prompt's and 8 decode steps' logits.
func modelQuantMatchesCPU(t *testing.T, dir, weights string, kChunk int) {
	gb := gpuBackend(t)
	spec, err := wq.ParseSpec(weights)
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]*wq.Matrix{}
	load := func(be backend.Backend) model.Model {
		m, err := model.Load(dir, be, model.LoadOptions{Weights: spec, DECKChunk: kChunk, Quantized: cache})
		if err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	cb := cpu.New(0)
	mc, mg := load(cb), load(gb)
	ids := []int32{5, 100, 2000, 7, 42, 8000, 3, 77, 1234, 4321, 11, 900}
	for i := range ids {
		ids[i] %= int32(mc.Config().Vocab)
	}
	caches := []model.Attention{model.NewDenseCache(cb, mc.Config()), model.NewDenseCache(gb, mg.Config())}
	compare := func(step string, b *model.Batch) int32 {
		var rows [2][]float32
		for i, m := range []model.Model{mc, mg} {
			out, err := m.Forward(b, caches[i])
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			rows[i] = out.Row(out.Rows() - 1)
		}
		var diff, norm float64
		for j, c := range rows[0] {
			d := float64(rows[1][j]) - float64(c)
			diff += d * d
			norm += float64(c) * float64(c)
		}
		if rel := math.Sqrt(diff / norm); !(rel <= logitRelL2Tol) {
			t.Fatalf("%s: relative L2 difference of the logits %.3g > %.0e", step, rel, logitRelL2Tol)
		}
		return argmax(rows[0])
	}
	var b model.Batch
	b.Add(0, 0, ids...)
	next := compare("prefill", &b)
	for s := range 8 {
		var d model.Batch
		d.Add(0, len(ids)+s, next)
		next = compare(fmt.Sprintf("decode step %d", s), &d)
	}
}

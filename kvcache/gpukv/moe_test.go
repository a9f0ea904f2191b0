package gpukv

// Mixtures of experts on the CUDA backend (model/moe.go, backend/gpu's
// moe.go): the device's routing under CUDA graphs at batches of 1 to 4
// sequences, and the host routing a layer falls back to (packed low-bit
// experts) against the CPU backend. TestGPUTransformers holds the device
// routing to transformers' logits.

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/hfcheck"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// moeFixtures are the conformance fixtures with a mixture of experts.
var moeFixtures = []string{"mixtral-e8top2-gqa3-bf16", "qwen2moe-e4top2-shared-fp16", "qwen3moe-e8top2-gqa3-d128-bf16"}

// moeFixture returns the named fixture.
func moeFixture(t *testing.T, name string) *hfcheck.Fixture {
	t.Helper()
	for _, f := range hfcheck.LoadAll(t) {
		if f.Name() == name {
			return f
		}
	}
	t.Fatalf("no fixture %s", name)
	return nil
}

// TestGPUMoEGraphReplaySameBits runs four greedy sequences of each MoE
// fixture through an int4 GPU cache (runGreedy: they join at different
// steps, so decode batches of 1 to 4 sequences and prefill chunks beside
// decodes) with CUDA graphs off and on, and requires every logits row to
// be bitwise the same and graphs to have been replayed: the router's
// choice lives in device memory, so a step's launches are the same
// whatever its tokens choose.
func TestGPUMoEGraphReplaySameBits(t *testing.T) {
	for _, name := range moeFixtures {
		t.Run(name, func(t *testing.T) {
			f := moeFixture(t, name)
			var rows [2][][][]float32
			var stats gpu.GraphStats
			for i, noGraphs := range []bool{true, false} {
				be, err := gpu.Open(0, gpu.Options{NoGraphs: noGraphs})
				if err != nil {
					if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
						t.Skipf("no CUDA device: %v", err)
					}
					t.Fatal(err)
				}
				defer be.Close()
				m, err := model.Load(f.Dir, be, model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				c, err := NewPaged(be, m.Config(), kv.MustParseSpec("int4"), kvcache.Options{MaxSeqs: 4, MaxLen: 256, MaxChunk: invariantChunk})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				r := rand.New(rand.NewPCG(23, 5))
				vocab := m.Config().Vocab
				seqs := []*greedySeq{
					{id: 0, join: 0, gen: 40, prompt: randomPrompt(r, 30, vocab)},
					{id: 1, join: 3, gen: 30, prompt: randomPrompt(r, 20, vocab)},
					{id: 2, join: 5, gen: 12, prompt: randomPrompt(r, 7, vocab)},
					{id: 3, join: 8, gen: 20, prompt: randomPrompt(r, 50, vocab)},
				}
				runGreedy(t, m, c, seqs)
				for _, s := range seqs {
					rows[i] = append(rows[i], s.rows)
				}
				if !noGraphs {
					stats = be.GraphStats()
				}
			}
			if stats.Replayed == 0 || stats.Captured == 0 {
				t.Fatalf("graphs on: %+v flushes: no graph replayed", stats)
			}
			t.Logf("graphs on: %+v flushes", stats)
			for s := range rows[0] {
				off, on := rows[0][s], rows[1][s]
				if len(on) != len(off) {
					t.Fatalf("sequence %d: %d logits rows with graphs, %d without", s, len(on), len(off))
				}
				for step := range off {
					if err := sameBits(on[step], off[step]); err != nil {
						t.Fatalf("sequence %d, its step %d: graphs on vs off: %v", s, step, err)
					}
				}
			}
		})
	}
}

// TestGPUMoEQuantizedExperts loads each MoE fixture with int8 weights
// (every linear layer, the experts too, quantized the same way on both
// backends): the CUDA backend has no indexed GEMV of packed weights, so
// its sparse layers route on the host (model.Llama.moeHost). Every row of
// logits over the fixture's tokens on the dense cache must be within
// hfGPUTol of the CPU backend's, the bound of backend/gpu's
// TestModelMatchesCPU (fp16-rounded linear inputs).
func TestGPUMoEQuantizedExperts(t *testing.T) {
	gb := gpuBackend(t)
	spec, err := wq.ParseSpec("int8")
	if err != nil {
		t.Fatal(err)
	}
	cb := cpu.New(2)
	for _, name := range moeFixtures {
		t.Run(name, func(t *testing.T) {
			f := moeFixture(t, name)
			var rows [2][][]float32
			for i, be := range []backend.Backend{cb, gb} {
				m, err := model.Load(f.Dir, be, model.LoadOptions{Weights: spec})
				if err != nil {
					t.Fatal(err)
				}
				rows[i], err = hfcheck.Run(m, model.NewDenseCache(be, m.Config()), f, hfChunk, 0)
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			worst := 0.0
			for r := range rows[0] {
				d := hfcheck.RelL2(rows[1][r], rows[0][r])
				if !(d <= hfGPUTol) {
					t.Fatalf("row %d: ‖gpu − cpu‖/‖cpu‖ = %.3g, bound %.1e", r, d, hfGPUTol)
				}
				worst = max(worst, d)
			}
			t.Logf("int8 experts routed on the host: %d rows, worst ‖gpu − cpu‖/‖cpu‖ %.2e (bound %.1e)", len(rows[0]), worst, hfGPUTol)
		})
	}
}

package gpukv

// TestGPUTransformers holds the CUDA backend and its caches to Hugging Face
// transformers' float32 logits on the conformance fixtures of
// internal/hfcheck (tiny random checkpoints of every family, made by
// tools/hfcheck/gen.py), as internal/hfcheck's TestTransformersCPU does on
// the CPU backend.

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/hfcheck"
	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Bounds on ‖gpu − transformers‖₂ / ‖transformers‖₂ of a row of logits.
// hfGPUTol is the GPU's own: it rounds every Linear input (and fp32
// weights) to fp16, 2⁻¹¹ relative per element, which backend/gpu's
// TestModelMatchesCPU and TestGPUSyntheticFamilies bound at 1e-2 against
// the CPU backend (measured about 1e-3). Each cache adds the CPU bound of
// its format (internal/hfcheck's hfcheck_test.go derives them): none for the
// dense float32 cache, 8·2⁻¹¹ for fp16, 8/levels more for int8 and int4.
const (
	hfGPUTol  = 1e-2
	hfFP16Tol = 8.0 / 2048
)

// hfChunk is the prefill chunk: the 48-token prompts go in as 20 + 20 + 8,
// across the 32-token blocks of the low-bit specs.
const hfChunk = 20

// hfGPUKV are the GPU caches of the test ("" is the dense float32 cache)
// and their bounds.
var hfGPUKV = []struct {
	spec string
	tol  float64
}{
	{"", hfGPUTol},
	{"fp16", hfGPUTol + hfFP16Tol},
	{"int8:kc32:v32:res32", hfGPUTol + hfFP16Tol + 8.0/255},
	{"int4:kc32:v32:res32", hfGPUTol + hfFP16Tol + 8.0/15},
}

func TestGPUTransformers(t *testing.T) {
	gb := gpuBackend(t)
	for _, f := range hfcheck.LoadAll(t) {
		t.Run(f.Name(), func(t *testing.T) {
			m, err := model.Load(f.Dir, gb, model.LoadOptions{})
			if errors.Is(err, model.ErrUnsupportedArchitecture) {
				t.Skipf("unsupported (internal/hfcheck's TestTransformersCPU holds the list): %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n := len(f.Golden.PromptIDs) + len(f.Golden.GreedyIDs)
			// The paged GPU caches take the GPU kernels' head dims only
			// (kernels.HeadDims: 64, 128, 256): a checkpoint of another
			// (Phi-3-mini's 96) is loaded with its heads padded to the next
			// (model.Config.PadHeads), and runs every cache here; a paged GPU
			// cache for the unpadded head dim must refuse it by name.
			cfg := m.Config()
			if D := cfg.CheckpointHeadDim(); !kernels.HeadDimOK(D) {
				dp, _ := kernels.PadHeadDim(D)
				if cfg.HeadDim != dp || cfg.StoredHeadDim != D {
					t.Fatalf("head dim %d loaded on the GPU as %d (stored %d), want padded to %d", D, cfg.HeadDim, cfg.StoredHeadDim, dp)
				}
				plain := *cfg
				plain.HeadDim, plain.StoredHeadDim = D, 0
				_, err := NewPaged(gb, &plain, kv.MustParseSpec("fp16"), kvcache.Options{MaxSeqs: 1, MaxLen: n, MaxChunk: hfChunk})
				if want := fmt.Sprintf("head dim %d", D); err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("a paged GPU cache of head dim %d: err = %v, want a refusal saying %q", D, err, want)
				}
				t.Logf("head dim %d runs padded to %d; paged GPU caches refuse %d itself, as they should: %v", D, dp, D, err)
			}
			if cfg.AttnSoftcap != 0 {
				// The bit-plane kernels (bw) have no soft-cap: NewPlanes
				// refuses the model by name.
				_, err := NewPlanes(gb, cfg, kv.MustParseSpec("bw"), kvcache.Options{MaxSeqs: 1, MaxLen: n, MaxChunk: hfChunk})
				if !errors.Is(err, model.ErrAttnSoftcap) {
					t.Fatalf("bw KV of a soft-capped model: err = %v, want a refusal wrapping model.ErrAttnSoftcap", err)
				}
				t.Logf("bw KV refuses the soft-capped model, as it should: %v", err)
			}
			for _, c := range hfGPUKV {
				var cache model.Attention = model.NewDenseCache(gb, m.Config())
				name := "dense fp32"
				if c.spec != "" {
					// Every row, past any sliding window too: the paged
					// cache's windowed layers see their window (gpuView,
					// kernels.DecodeShape.Window).
					sp := kv.MustParseSpec(c.spec).WithDefaultRotation(m.Config().HeadDim)
					// Gemma 2's attention soft-cap runs in the paged
					// caches' kernels (kernels.DecodeShape.Softcap, since
					// session 23's s23-gemma2gpu), held to the same bounds.
					pc, err := NewPaged(gb, m.Config(), sp, kvcache.Options{MaxSeqs: 1, MaxLen: n, MaxChunk: hfChunk})
					if err != nil {
						t.Fatalf("%s KV: %v", c.spec, err)
					}
					cache, name = pc, sp.String()
				}
				rows, err := hfcheck.Run(m, cache, f, hfChunk, 0)
				if cl, ok := cache.(interface{ Close() error }); ok {
					cl.Close()
				}
				if err != nil {
					t.Fatalf("%s KV: %v", name, err)
				}
				rep := hfcheck.Check(t, f, rows, c.tol)
				t.Logf("%s KV on %s: %d rows: worst ‖gpu − hf‖/‖hf‖ %.2e (row %d, bound %.1e); greedy %d/%d", name, gb.Name(), len(rows), rep.Worst, rep.WorstRow, c.tol, rep.Greedy, rep.Steps)
			}
		})
	}
}

// softcapGemma2Config is a synthetic Gemma 2 (internal/hfcheck's
// TestSoftcapPagedCPU's, with a final cap too): head dim 64, GQA 2, a
// sliding window of 16, attention cap %s, final cap %s.
const softcapGemma2Config = `{"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":64,"intermediate_size":96,
	"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"vocab_size":128,"rms_norm_eps":1e-6,
	"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":64,"sliding_window":16,"attn_logit_softcapping":%s,
	"final_logit_softcapping":%s,"rope_theta":10000.0,"torch_dtype":"bfloat16"}`

// TestGPUSoftcapPaged holds the GPU's soft-caps (session 23, branch
// s23-gemma2gpu) where they matter, which the gemma2 fixture's released caps
// (50 and 30) barely are: a synthetic Gemma 2 with an attention cap of 1.5
// and a final cap of 2, run as TestGPUTransformers runs a fixture (prefill
// chunks of 20 across the 32-token blocks, then decode steps, past the
// window) on the CUDA backend's dense cache (attention on the host, the
// final cap on the device: backend.Softcapper) and its paged caches (the
// attention cap in the decode kernels: kernels.DecodeShape.Softcap), against
// the CPU backend's dense cache (float64 attention, the final cap on the
// host) within TestGPUTransformers' bounds. It requires each cap to move
// the reference rows by more than twice the fp16 cache's bound, so that a
// GPU path that skipped either would fail.
func TestGPUSoftcapPaged(t *testing.T) {
	cb := cpu.New(2)
	dir := map[string]string{}
	load := func(be backend.Backend, attnCap, finalCap string) model.Model {
		js := fmt.Sprintf(softcapGemma2Config, attnCap, finalCap)
		if dir[js] == "" {
			cfg, err := model.ParseConfig([]byte(js))
			if err != nil {
				t.Fatal(err)
			}
			s := synthmodel.Shape{Hidden: cfg.Hidden, Intermediate: cfg.Intermediate, Layers: cfg.Layers, Heads: cfg.Heads,
				KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.Vocab, Tied: cfg.TieWordEmbeddings,
				NormPlusOne: cfg.NormPlusOne, PostNorms: cfg.PostNorms, SandwichNorms: cfg.SandwichNorms}
			dir[js] = t.TempDir()
			if _, err := synthmodel.Write(dir[js], js, s, safetensors.BF16, 23, nil); err != nil {
				t.Fatal(err)
			}
		}
		m, err := model.Load(dir[js], be, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	f := &hfcheck.Fixture{Golden: hfcheck.Golden{Name: "gemma2-softcap-synthetic"}}
	for i := range 48 {
		f.Golden.PromptIDs = append(f.Golden.PromptIDs, int32(i*37%128))
	}
	for i := range 16 {
		f.Golden.GreedyIDs = append(f.Golden.GreedyIDs, int32(i*11%128))
	}
	ref := func(attnCap, finalCap string) [][]float32 {
		m := load(cb, attnCap, finalCap)
		rows, err := hfcheck.Run(m, model.NewDenseCache(cb, m.Config()), f, hfChunk, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	want := ref("1.5", "2.0")
	for _, off := range []struct{ name, attnCap, finalCap string }{{"attention", "null", "2.0"}, {"final", "1.5", "null"}} {
		rows, moved := ref(off.attnCap, off.finalCap), 0.0
		for i := range want {
			moved = max(moved, hfcheck.RelL2(rows[i], want[i]))
		}
		t.Logf("the %s cap moves the reference rows by up to %.2e", off.name, moved)
		if moved < 2*(hfGPUTol+hfFP16Tol) {
			t.Fatalf("the %s cap moves the rows by %.2e at most, under twice the fp16 bound: the test would not see it skipped", off.name, moved)
		}
	}
	gb := gpuBackend(t) // the reference's checks above run without a GPU too
	m := load(gb, "1.5", "2.0")
	if c := m.Config(); c.AttnSoftcap != 1.5 || c.FinalSoftcap != 2 {
		t.Fatalf("caps %v %v, want 1.5 2", c.AttnSoftcap, c.FinalSoftcap)
	}
	n := len(f.Golden.PromptIDs) + len(f.Golden.GreedyIDs)
	for _, c := range hfGPUKV {
		var cache model.Attention = model.NewDenseCache(gb, m.Config())
		name := "dense fp32"
		if c.spec != "" {
			sp := kv.MustParseSpec(c.spec).WithDefaultRotation(m.Config().HeadDim)
			pc, err := NewPaged(gb, m.Config(), sp, kvcache.Options{MaxSeqs: 1, MaxLen: n, MaxChunk: hfChunk})
			if err != nil {
				t.Fatalf("%s KV: %v", c.spec, err)
			}
			cache, name = pc, sp.String()
		}
		rows, err := hfcheck.Run(m, cache, f, hfChunk, 0)
		if cl, ok := cache.(interface{ Close() error }); ok {
			cl.Close()
		}
		if err != nil {
			t.Fatalf("%s KV: %v", name, err)
		}
		worst := hfcheck.CheckRows(t, name+" KV on the GPU against the CPU's dense cache", rows, want, c.tol)
		t.Logf("%s KV on %s: %d rows: worst ‖gpu − cpu dense‖/‖cpu dense‖ %.2e (bound %.1e)", name, gb.Name(), len(rows), worst, c.tol)
	}
}

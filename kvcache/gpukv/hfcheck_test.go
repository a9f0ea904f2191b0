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

	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/hfcheck"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
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
			for _, c := range hfGPUKV {
				var cache model.Attention = model.NewDenseCache(gb, m.Config())
				name := "dense fp32"
				if c.spec != "" {
					// Every row, past any sliding window too: the paged
					// cache's windowed layers see their window (gpuView,
					// kernels.DecodeShape.Window).
					sp := kv.MustParseSpec(c.spec).WithDefaultRotation(m.Config().HeadDim)
					pc, err := NewPaged(gb, m.Config(), sp, kvcache.Options{MaxSeqs: 1, MaxLen: n, MaxChunk: hfChunk})
					if cfg.AttnSoftcap != 0 {
						// Gemma 2: the GPU's attention kernels have no
						// soft-cap; the paged caches refuse the model by
						// name (the dense cache above attends on the host).
						if !errors.Is(err, model.ErrAttnSoftcap) {
							t.Fatalf("%s KV of a soft-capped model: err = %v, want a refusal wrapping model.ErrAttnSoftcap", c.spec, err)
						}
						t.Logf("%s KV refuses the soft-capped model, as it should: %v", c.spec, err)
						continue
					}
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

package gpukv

// The append folded onto q|k|v's joined GEMM (backend/gpu's EnqueueAttend,
// kernels.KVWriter.AppendRoPE) against the two ops apart, through a whole
// model.

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// TestGPURoPEAppendSameBits runs 20 greedy sequences of each synthetic
// family (TestGPUSyntheticFamilies': head dims 64 and 128, GQA 3, 4 and
// 7, MQA, q/k/v biases, Qwen3's q/k norms) through a GPU cache step by step
// on a backend with Options.NoRoPEAppend and one without (the default),
// and requires every logits row of every sequence to be bitwise the same.
// The sequences join at different steps, so prefill chunks of 18-60 tokens
// run beside decode steps of up to 20 rows (cuBLASLt's joined q|k|v GEMM,
// one write round: the fold), in every kind of format: fp16, bf16, int4
// with its keys transposed, rotated int4, k4v2, and per-layer formats
// mixing rotated and unrotated layers. The default backend must have
// folded where the family has nothing between RoPE and the cache (q/k
// norms, longrope's run-time q scale), and never where it has.
func TestGPURoPEAppendSameBits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two backends over five models and six formats")
	}
	var bes [2]*gpu.Backend // [NoRoPEAppend, default]
	for i := range bes {
		be, err := gpu.Open(0, gpu.Options{NoRoPEAppend: i == 0})
		if err != nil {
			if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
				t.Skipf("no CUDA device: %v", err)
			}
			t.Fatal(err)
		}
		defer be.Close()
		bes[i] = be
	}
	for fi, fam := range gpuSynthFamilies {
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, err := model.ParseConfig([]byte(fam.config))
			if err != nil {
				t.Fatal(err)
			}
			shape := synthmodel.Shape{Hidden: cfg.Hidden, Intermediate: cfg.Intermediate, Layers: cfg.Layers, Heads: cfg.Heads,
				KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.Vocab, Tied: cfg.TieWordEmbeddings,
				QKVBias: cfg.QKVBias, OBias: cfg.OBias, MLPBias: cfg.MLPBias, QKNorm: cfg.QKNorm,
				Fused: cfg.FusedQKV, NormPlusOne: cfg.NormPlusOne,
				PostNorms: cfg.PostNorms, QKNormFull: cfg.QKNormFull, SandwichNorms: cfg.SandwichNorms}
			if _, err := synthmodel.Write(dir, fam.config, shape, fam.dtype, uint64(100+fi), nil); err != nil {
				t.Fatal(err)
			}
			var ms [2]model.Model
			for i, be := range bes {
				if ms[i], err = model.Load(dir, be, model.LoadOptions{}); err != nil {
					t.Fatal(err)
				}
				defer ms[i].Close()
			}
			// The append folds onto the joined q|k|v GEMM's RoPE split
			// where nothing comes between them: no q/k norms (per head,
			// or OLMo 2's over the whole projection, which run before
			// RoPE), and no run-time q scale (longrope's attention
			// factor on whole rotated heads; partial rotary and padded
			// heads get it folded into q's rows at load).
			lc := ms[1].Config()
			rs := lc.RopeScaling
			qScale := rs != nil && rs.Type == "longrope" && rs.AttentionFactor != 1 && lc.RotaryDims() == lc.HeadDim
			fold := !cfg.QKNorm && !cfg.QKNormFull && !qScale
			for _, spec := range []string{"fp16", "bf16", "int4:kt", "int4:rot", "k4v2", "int2@0=int4:rot"} {
				var rows [2][][][]float32 // [NoRoPEAppend, default][sequence][step]
				var folds [2]int64
				for i, be := range bes {
					c, err := NewPaged(be, ms[i].Config(), kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 20, MaxLen: 128, MaxChunk: invariantChunk})
					if err != nil {
						t.Fatal(err)
					}
					r := rand.New(rand.NewPCG(uint64(fi), 13))
					var seqs []*greedySeq
					for s := range 20 {
						seqs = append(seqs, &greedySeq{id: s, join: s / 4, gen: 6, prompt: randomPrompt(r, 18+r.IntN(43), cfg.Vocab)})
					}
					before := be.RoPEAppends()
					runGreedy(t, ms[i], c, seqs)
					folds[i] = be.RoPEAppends() - before
					c.Close()
					for _, s := range seqs {
						rows[i] = append(rows[i], s.rows)
					}
				}
				switch {
				case folds[0] != 0:
					t.Fatalf("%s: %d folds with NoRoPEAppend", spec, folds[0])
				case !fold && folds[1] != 0:
					t.Fatalf("%s: %d folds where an op comes between q|k|v's RoPE split and the cache (q/k norms, longrope's run-time q scale)", spec, folds[1])
				case fold && folds[1] == 0:
					t.Fatalf("%s: the default backend never folded the append", spec)
				}
				for s := range rows[0] {
					off, on := rows[0][s], rows[1][s]
					if len(on) != len(off) {
						t.Fatalf("%s sequence %d: %d logits rows folded, %d apart", spec, s, len(on), len(off))
					}
					for step := range off {
						if err := sameBits(on[step], off[step]); err != nil {
							t.Fatalf("%s sequence %d, its step %d: folded vs apart: %v", spec, s, step, err)
						}
					}
				}
				t.Logf("%s: %d attention ops folded, every row the same bits", spec, folds[1])
			}
		})
	}
}

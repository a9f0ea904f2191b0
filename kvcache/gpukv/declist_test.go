package gpukv

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/internal/synthmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/model/safetensors"
	"github.com/bitdecode/bitdecode/wq"
)

// TestGPUAttendDECList (session 19b, docs/perf/dec.md): a decode step's
// attention (the paged cache, rotated int4 and unrotated int8) then o's
// q6 Linear with DEC, on a backend with the lists on (the default) and one
// without: the attention op runs its list variant (AttendOp.RunSel: the
// output's conversion writes o's list) and o's GEMV takes it
// (DECListsGiven counts it), and the attention output and o's output are
// bit for bit the option-off backend's, step after step (a 20-token
// prefill, then 12 decode steps).
func TestGPUAttendDECList(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	const N, kChunk, prefill, steps = 4096, 8, 20, 12
	sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
	qw, kvw := sh.Hq*sh.D, sh.Hkv*sh.D
	r := rand.New(rand.NewPCG(19, 27))
	wv := make([]float32, N*qw)
	for i := range wv {
		wv[i] = float32(0.02 * r.NormFloat64())
	}
	m, err := wq.Quantize(wq.Int4, 128, N, qw, wv)
	if err != nil {
		t.Fatal(err)
	}
	res, err := wq.NewResidual(wv, m, wq.Int4)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"int4:rot", "int8"} {
		t.Run(spec, func(t *testing.T) {
			var outs, ys [2][][]float32 // [option off, on][step]
			for i, on := range []bool{false, true} {
				be, err := gpu.Open(0, gpu.Options{DECResidualOnDevice: true, NoDECNormSelect: !on})
				if err != nil {
					if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
						t.Skipf("no CUDA device: %v", err)
					}
					t.Fatal(err)
				}
				defer be.Close()
				w, err := be.LoadQuantWeight("o", m, &wq.DEC{R: res, KChunk: kChunk})
				if err != nil {
					t.Fatal(err)
				}
				cfg := &model.Config{Architecture: "test", Layers: 1, Heads: sh.Hq, KVHeads: sh.Hkv, HeadDim: sh.D, MaxPositions: 4096}
				c, err := NewPaged(be, cfg, kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 1, MaxLen: 512, MaxChunk: 256})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				rs := rand.New(rand.NewPCG(19, 28)) // the same inputs on both backends
				for s := range steps + 1 {
					T := 1
					if s == 0 {
						T = prefill
					}
					var b model.Batch
					b.Add(0, c.Len(0), make([]int32, T)...)
					if err := c.Begin(&b); err != nil {
						t.Fatal(err)
					}
					q := make([]float32, T*qw)
					for j := range q {
						q[j] = half.ToFloat32(half.FromFloat32(float32(rs.NormFloat64())))
					}
					k, v := kvtest.KeysValues(rs, T, sh.Hkv, sh.D)
					views := make([]backend.Tensor, 5) // q, k, v, the attention output, o's output
					for j, width := range []int{qw, kvw, kvw, qw, N} {
						if views[j], err = be.Alloc(backend.F32, T, width); err != nil {
							t.Fatal(err)
						}
					}
					free := func() {
						for _, x := range views {
							be.Free(x)
						}
					}
					for j, src := range [][]float32{q, k, v} {
						if err := be.Upload(views[j], src); err != nil {
							t.Fatal(err)
						}
					}
					if err := c.Attend(0, &b, views[0], views[1], views[2], views[3]); err != nil {
						t.Fatal(err)
					}
					if T != 1 {
						if err := be.Sync(); err != nil {
							t.Fatal(err)
						}
						free()
						continue
					}
					be.Linear(views[4], views[3], w, nil)
					out, y := make([]float32, qw), make([]float32, N)
					if err := be.Download(out, views[3]); err != nil {
						t.Fatal(err)
					}
					if err := be.Download(y, views[4]); err != nil {
						t.Fatal(err)
					}
					outs[i], ys[i] = append(outs[i], out), append(ys[i], y)
					free()
				}
				if got := be.DECListsGiven(); (got == steps) != on || (!on && got != 0) {
					t.Fatalf("option %v: %d lists given in %d decode steps", on, got, steps)
				}
			}
			for s := range steps {
				if err := sameBits(outs[1][s], outs[0][s]); err != nil {
					t.Fatalf("decode step %d: attention output, option on vs off: %v", s, err)
				}
				if err := sameBits(ys[1][s], ys[0][s]); err != nil {
					t.Fatalf("decode step %d: o, option on vs off: %v", s, err)
				}
			}
		})
	}
}

// modelDECListsConfig is a two-layer Llama with the 8B's attention and
// hidden width, so that every DEC weight but k and v alone runs the q6
// route at one row (q|k|v joined into 6144 rows, o and down 4096 x 4096,
// gate|up joined into 8192 rows), and a small vocabulary.
const modelDECListsConfig = `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
"intermediate_size":4096,"num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":8,"vocab_size":256,
"rms_norm_eps":1e-5,"rope_theta":500000.0,"tie_word_embeddings":false,"max_position_embeddings":4096}`

// modelDECListsPerStep is the fewest DEC lists a decode step of
// modelDECListsConfig takes from the op that wrote x: o, gate|up and down
// in both layers, q|k|v in layer 1 (layer 0's norm is RMSNorm).
const modelDECListsPerStep = 4*2 - 1

// TestGPUModelDECLists (session 20, docs/perf/dec.md): a whole model's
// steps with int4 weights and DEC (k_chunk 8, residuals in device memory)
// through an int4 paged cache, on a backend with the lists made where x is
// produced (the default) and one with Options.NoDECNormSelect: every
// logits row (a 40-token prefill, then greedy decode steps) is bit for bit
// the same and finite, the lists-on backend folds at least
// modelDECListsPerStep lists into each decode step but the first (a
// first step may grow a buffer, a flush between a producer and its GEMV),
// the other none.
func TestGPUModelDECLists(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	const kChunk, plen, gen = 8, 40, 12
	cfg, err := model.ParseConfig([]byte(modelDECListsConfig))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := wq.ParseSpec("int4")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shape := synthmodel.Shape{Hidden: cfg.Hidden, Intermediate: cfg.Intermediate, Layers: cfg.Layers, Heads: cfg.Heads,
		KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.Vocab}
	if _, err := synthmodel.Write(dir, modelDECListsConfig, shape, safetensors.BF16, 20, nil); err != nil {
		t.Fatal(err)
	}
	var rows [2][][]float32 // [lists off, on][step]
	var given [2]int64
	for i, on := range []bool{false, true} {
		be, err := gpu.Open(0, gpu.Options{DECResidualOnDevice: true, NoDECNormSelect: !on})
		if err != nil {
			if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
				t.Skipf("no CUDA device: %v", err)
			}
			t.Fatal(err)
		}
		defer be.Close()
		m, err := model.Load(dir, be, model.LoadOptions{Weights: spec, DECKChunk: kChunk})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		c, err := NewPaged(be, m.Config(), kv.MustParseSpec("int4"), kvcache.Options{MaxSeqs: 1, MaxLen: 256, MaxChunk: invariantChunk})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := &greedySeq{gen: gen, prompt: randomPrompt(rand.New(rand.NewPCG(20, 1)), plen, cfg.Vocab)}
		runGreedy(t, m, c, []*greedySeq{s})
		rows[i], given[i] = s.rows, be.DECListsGiven()
	}
	const decodes = gen - 1 // the prefill's row gives the first token
	if given[0] != 0 || given[1] < modelDECListsPerStep*(decodes-1) {
		t.Fatalf("DEC lists given: %d with the lists off, %d on over %d decode steps; want 0 and >= %d a step",
			given[0], given[1], decodes, modelDECListsPerStep)
	}
	t.Logf("%d DEC lists given over %d decode steps", given[1], decodes)
	if len(rows[1]) != len(rows[0]) || len(rows[0]) != gen {
		t.Fatalf("%d logits rows with the lists on, %d off, want %d", len(rows[1]), len(rows[0]), gen)
	}
	for s := range rows[0] {
		for j, v := range rows[0][s] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("step %d: logit %d = %v", s, j, v)
			}
		}
		if err := sameBits(rows[1][s], rows[0][s]); err != nil {
			t.Fatalf("step %d: lists on vs off: %v", s, err)
		}
	}
}

package gpukv

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
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

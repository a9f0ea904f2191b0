package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

// llmWeight returns an [N, K] weight ~ N(0, 0.02) with input channels 3 and
// K/2+1 scaled x20 and x40, the outlier columns real checkpoints have.
func llmWeight(r *rand.Rand, N, K int) []float32 {
	w := make([]float32, N*K)
	for i := range w {
		s := 0.02
		switch i % K {
		case 3:
			s *= 20
		case K/2 + 1:
			s *= 40
		}
		w[i] = float32(r.NormFloat64() * s)
	}
	return w
}

// dequantized returns the row-major values Ŵ of a packed matrix.
func dequantized(m *wq.Matrix) []float32 {
	out := make([]float32, m.N*m.K)
	for n := range m.N {
		m.DequantRow(out[n*m.K:(n+1)*m.K], n)
	}
	return out
}

func mustQuant(t *testing.T, b *Backend, m *wq.Matrix, dec *wq.DEC) backend.Weight {
	t.Helper()
	w, err := b.LoadQuantWeight("qw", m, dec)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestQuantLinear checks the packed-weight Linear (int4, int8 and int3: the
// default integer paths where the CPU has them) against the float64
// reference over the dequantized matrix, for every format, ragged N, batch
// sizes 1 to 70, with and without bias; and that each token's output is
// bitwise the same alone (decode) and in the batch (prefill).
func TestQuantLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, e := range []wq.Elem{wq.FP16, wq.Int8, wq.Int4, wq.Int3} {
		for _, tc := range []struct{ T, K, N int }{{1, 256, 37}, {3, 512, 256}, {70, 1536, 66}} {
			t.Run(fmt.Sprintf("%v_T%d_K%d_N%d", e, tc.T, tc.K, tc.N), func(t *testing.T) {
				b := New(2)
				wv := llmWeight(r, tc.N, tc.K)
				m, err := wq.Quantize(e, 128, tc.N, tc.K, wv)
				if err != nil {
					t.Fatal(err)
				}
				wh := dequantized(m)
				bv := randVec(r, tc.N)
				xv := randVec(r, tc.T*tc.K)
				w := mustQuant(t, b, m, nil)
				qw := w.(*qweight)
				x := mustTensor(t, b, xv, tc.T, tc.K)
				y := poisoned(t, b, tc.T, tc.N)
				b.Linear(y, x, w, mustWeight(t, b, "bias", bv, tc.N))
				got := download(t, b, y)
				want := linearRef(xv, wh, bv, tc.T, tc.K, tc.N)
				for i := range got {
					tol := baseTol(m, xv[(i/tc.N)*tc.K:(i/tc.N+1)*tc.K], wh, i%tc.N, qw.integerPath() != pathNone) + 0x1p-24*math.Abs(want[i])
					if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
						t.Fatalf("y[%d,%d] = %v, want %v (tol %g)", i/tc.N, i%tc.N, got[i], want[i], tol)
					}
				}
				// The last token alone gives the same bits.
				x1 := mustTensor(t, b, xv[(tc.T-1)*tc.K:], 1, tc.K)
				y1 := poisoned(t, b, 1, tc.N)
				b.Linear(y1, x1, w, mustWeight(t, b, "bias", bv, tc.N))
				one := download(t, b, y1)
				for n, v := range one {
					if math.Float32bits(v) != math.Float32bits(got[(tc.T-1)*tc.N+n]) {
						t.Fatalf("output %d: %v alone, %v in the batch", n, v, got[(tc.T-1)*tc.N+n])
					}
				}
			})
		}
	}
}

// TestDEC checks dynamic error compensation: k_chunk 0 gives the base
// output bit for bit; every channel selected with fp16 residuals gives the
// fp16 weights' output within the error fp16 residuals allow; a partial
// selection with int4 residuals matches the float64 reference of the same
// selection.
func TestDEC(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, tc := range []struct {
		e       wq.Elem
		T, K, N int
	}{{wq.Int4, 1, 1536, 256}, {wq.Int3, 5, 512, 384}, {wq.Int3, 2, 2048, 128}, {wq.Int8, 3, 1024, 128}} {
		t.Run(fmt.Sprintf("%v_T%d_K%d_N%d", tc.e, tc.T, tc.K, tc.N), func(t *testing.T) {
			b := New(2)
			wv := llmWeight(r, tc.N, tc.K)
			m, err := wq.Quantize(tc.e, 128, tc.N, tc.K, wv)
			if err != nil {
				t.Fatal(err)
			}
			xv := randVec(r, tc.T*tc.K)
			x := mustTensor(t, b, xv, tc.T, tc.K)
			run := func(dec *wq.DEC) []float32 {
				y := poisoned(t, b, tc.T, tc.N)
				b.Linear(y, x, mustQuant(t, b, m, dec), nil)
				return download(t, b, y)
			}
			base := run(nil)
			integer := mustQuant(t, b, m, nil).(*qweight).integerPath() != pathNone
			r16, err := wq.NewResidual(wv, m, wq.FP16)
			if err != nil {
				t.Fatal(err)
			}
			r4, err := wq.NewResidual(wv, m, wq.Int4)
			if err != nil {
				t.Fatal(err)
			}

			// k = 0: exactly the base GEMV.
			for i, v := range run(&wq.DEC{R: r4, KChunk: 0}) {
				if math.Float32bits(v) != math.Float32bits(base[i]) {
					t.Fatalf("k=0: y[%d] = %v, base %v", i, v, base[i])
				}
			}

			// k = all, fp16 residuals: the fp16 weights' output.
			got := run(&wq.DEC{R: r16, KChunk: wq.ChunkChannels})
			w16 := make([]float32, len(wv))
			for i, v := range wv {
				w16[i] = wq.RoundFP16(v)
			}
			want := linearRef(xv, w16, nil, tc.T, tc.K, tc.N)
			wh := dequantized(m)
			for i := range got {
				tk, n := i/tc.N, i%tc.N
				// fp16(R) is off from R by half an fp16 ulp (2^-11 relative, plus
				// 2^-25 absolute in the subnormals, plus R's float32 rounding);
				// then float32 sums: base (K+2)·u·Σ|x·ŵ|, compensation
				// (K+2)·u·Σ|x·R̂|, and the final add.
				var resid, sumR float64
				for k := range tc.K {
					xk := math.Abs(float64(xv[tk*tc.K+k]))
					rk := math.Abs(float64(r16.At(k, n)))
					resid += xk * (rk*(0x1p-11+0x1p-24) + 0x1p-25)
					sumR += xk * rk
				}
				tol := resid + baseTol(m, xv[tk*tc.K:(tk+1)*tc.K], wh, n, integer) + float64(tc.K+2)*0x1p-24*sumR + 0x1p-24*math.Abs(want[i])
				if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
					t.Fatalf("k=all fp16: y[%d,%d] = %v, fp16 weights give %v (tol %g)", tk, n, got[i], want[i], tol)
				}
			}

			// k_chunk = 32, int4 residuals: base + Σ over the selection.
			got = run(&wq.DEC{R: r4, KChunk: 32})
			var gain, before float64
			for tk := range tc.T {
				xt := xv[tk*tc.K : (tk+1)*tc.K]
				sel := wq.SelectApprox(nil, xt, 32)
				if len(sel) == 0 {
					t.Fatal("no channel selected")
				}
				for n := range tc.N {
					i := tk*tc.N + n
					s, mag := float64(base[i]), 0.0
					for _, k := range sel {
						a := float64(xt[k]) * float64(r4.At(int(k), n))
						s += a
						mag += math.Abs(a)
					}
					tol := float64(len(sel)+2)*0x1p-24*(mag+math.Abs(float64(base[i]))) + 0x1p-24*math.Abs(s)
					if d := math.Abs(float64(got[i]) - s); !(d <= tol) {
						t.Fatalf("k=32 int4: y[%d,%d] = %v, want %v (tol %g)", tk, n, got[i], s, tol)
					}
					before += math.Abs(float64(base[i]) - want[i])
					gain += math.Abs(float64(got[i]) - want[i])
				}
			}
			t.Logf("k_chunk=32, int4 residuals: mean |y − y_fp16| %.3g → %.3g", before/float64(len(got)), gain/float64(len(got)))
		})
	}
}

func TestQuantLinearErrors(t *testing.T) {
	b := New(1)
	r := rand.New(rand.NewPCG(25, 26))
	m, err := wq.Quantize(wq.Int4, 128, 8, 256, llmWeight(r, 8, 256))
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := wq.NewMatrix(wq.Int4, 128, 8, 256) // residual of the wrong shape
	if _, err := b.LoadQuantWeight("w", m, &wq.DEC{R: bad, KChunk: 8}); err == nil {
		t.Error("LoadQuantWeight accepted a residual of shape [8, 256] for an [8, 256] weight")
	}
	trunc := *m
	trunc.Params = trunc.Params[:3]
	if _, err := b.LoadQuantWeight("w", &trunc, nil); err == nil {
		t.Error("LoadQuantWeight accepted a matrix with truncated params")
	}
	w := mustQuant(t, b, m, nil)
	x := mustTensor(t, b, randVec(r, 2*128), 2, 128) // K mismatch
	y := poisoned(t, b, 2, 8)
	b.Linear(y, x, w, nil)
	if err := b.Sync(); err == nil {
		t.Error("Linear accepted x [2, 128] for a [8, 256] weight")
	}
	b.FreeWeight(w)
	b.Linear(y, mustTensor(t, b, randVec(r, 2*256), 2, 256), w, nil)
	if err := b.Sync(); err == nil {
		t.Error("Linear accepted a freed weight")
	}
}

// BenchmarkQuantLinear times the packed-weight Linear (dequantize a tile,
// then the float32 dot products) at decode and prefill batch sizes, with and
// without DEC, and reports the packed bytes read per second.
func BenchmarkQuantLinear(b *testing.B) {
	for _, tc := range []struct {
		e       wq.Elem
		T, K, N int
		kChunk  int
	}{{wq.Int4, 1, 512, 1536, 0}, {wq.Int4, 1, 1536, 512, 0}, {wq.Int4, 1, 1536, 512, 32}, {wq.Int3, 1, 1536, 512, 0}, {wq.Int4, 64, 512, 1536, 0}} {
		b.Run(fmt.Sprintf("%v_T%d_K%d_N%d_dec%d", tc.e, tc.T, tc.K, tc.N, tc.kChunk), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			be := New(0)
			wv := llmWeight(r, tc.N, tc.K)
			m, err := wq.Quantize(tc.e, 128, tc.N, tc.K, wv)
			if err != nil {
				b.Fatal(err)
			}
			var dec *wq.DEC
			if tc.kChunk > 0 {
				res, err := wq.NewResidual(wv, m, wq.Int4)
				if err != nil {
					b.Fatal(err)
				}
				dec = &wq.DEC{R: res, KChunk: tc.kChunk}
			}
			w, err := be.LoadQuantWeight("w", m, dec)
			if err != nil {
				b.Fatal(err)
			}
			x, _ := be.Alloc(backend.F32, tc.T, tc.K)
			_ = be.Upload(x, randVec(r, tc.T*tc.K))
			y, _ := be.Alloc(backend.F32, tc.T, tc.N)
			for b.Loop() {
				be.Linear(y, x, w, nil)
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(m.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "packedGB/s")
			b.ReportMetric(2*float64(tc.T*tc.K*tc.N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestEmbeddingQuant checks Embedding over a packed weight (the CPU is a
// backend.QuantEmbedder): each gathered row is wq's DequantRow of it, for
// int8, int4 and int3; a row width other than the weight's, and an id past
// its rows, are errors.
func TestEmbeddingQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	const N, K = 37, 512
	for _, e := range []wq.Elem{wq.Int8, wq.Int4, wq.Int3} {
		b := New(2)
		m, err := wq.Quantize(e, 128, N, K, llmWeight(r, N, K))
		if err != nil {
			t.Fatal(err)
		}
		w := mustQuant(t, b, m, nil)
		ids := []int32{0, 36, 7, 7}
		y := poisoned(t, b, len(ids), K)
		b.Embedding(y, w, mustInt32(t, b, ids))
		got := download(t, b, y)
		want := make([]float32, K)
		for i, id := range ids {
			m.DequantRow(want, int(id))
			for k := range K {
				if math.Float32bits(got[i*K+k]) != math.Float32bits(want[k]) {
					t.Fatalf("%v: row %d (id %d) channel %d = %v, want %v", e, i, id, k, got[i*K+k], want[k])
				}
			}
		}
		b.Embedding(poisoned(t, b, 1, K/2), w, mustInt32(t, b, []int32{1}))
		if err := b.Sync(); err == nil {
			t.Errorf("%v: Embedding into rows of %d for a weight of %d columns was accepted", e, K/2, K)
		}
		b2 := New(1)
		w2 := mustQuant(t, b2, m, nil)
		b2.Embedding(poisoned(t, b2, 1, K), w2, mustInt32(t, b2, []int32{N}))
		if err := b2.Sync(); err == nil {
			t.Errorf("%v: Embedding of id %d of %d rows was accepted", e, N, N)
		}
	}
}

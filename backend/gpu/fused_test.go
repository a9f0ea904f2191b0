package gpu_test

// Tests of the fused ops AddRMSNorm and RoPEQK on the GPU: the bits of the
// GPU's own separate ops (which the other tests compare with the CPU), and
// the CPU's fused ops within the separate ops' tolerances.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// download returns x of the GPU backend, failing on a pending error.
func (p *pair) download(x backend.Tensor, n int) []float32 {
	p.t.Helper()
	v := make([]float32, n)
	if err := p.gpu.Download(v, x); err != nil {
		p.t.Fatal(err)
	}
	if err := p.gpu.Sync(); err != nil {
		p.t.Fatal(err)
	}
	return v
}

func TestAddRMSNorm(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(21, 22))
	const eps = 1e-5
	for _, tc := range []struct{ T, C, G int }{{1, 4096, 4096}, {3, 1000, 1000}, {9, 4096, 4096}, {5, 512, 128}, {2, 33, 33}, {3, 1, 1}, {2, 12288, 12288}} {
		n := tc.T * tc.C
		hv, dv := randVec(r, n, 2), randVec(r, n, 1)
		for i := range hv {
			if r.IntN(50) == 0 {
				hv[i] *= 30 // outlier channels of the residual stream
			}
		}
		w := p.weight("norm", backend.BF16, randVec(r, tc.G, 1), tc.G)
		for _, aliased := range []bool{false, true} {
			name := fmt.Sprintf("T=%d C=%d G=%d x=delta %v", tc.T, tc.C, tc.G, aliased)

			// The GPU's separate ops.
			h0, d0, x0 := p.tensor(hv, tc.T, tc.C), p.tensor(dv, tc.T, tc.C), p.poisoned(tc.T, tc.C)
			p.gpu.Add(h0.g, h0.g, d0.g)
			p.gpu.RMSNorm(x0.g, h0.g, w.g, eps)
			wantH, wantX := p.download(h0.g, n), p.download(x0.g, n)

			h, d := p.tensor(hv, tc.T, tc.C), p.tensor(dv, tc.T, tc.C)
			x := d
			if !aliased {
				x = p.poisoned(tc.T, tc.C)
			}
			p.cpu.AddRMSNorm(h.c, x.c, d.c, w.c, eps)
			p.gpu.AddRMSNorm(h.g, x.g, d.g, w.g, eps)
			ch, gh := p.results(h, n)
			cx, gx := p.results(x, n)
			sameBits(t, name+": h against the GPU's Add", gh, wantH)
			if tc.G >= kernels.NormClusterMinG && tc.G <= kernels.NormClusterMaxG {
				// A row over a cluster (Hopper) sums the squares in
				// another order: the mean may round differently, r by an
				// ulp, as against the CPU below.
				compare(t, name+": x against the GPU's Add, RMSNorm", wantX, gx, func(i int) float64 { return 8 * u32 * math.Abs(float64(wantX[i])) })
			} else {
				sameBits(t, name+": x against the GPU's Add, RMSNorm", gx, wantX)
			}
			compare(t, name+": h (exact)", ch, gh, func(int) float64 { return 0 })
			// As TestRMSNorm: the two float64 sums may round the mean
			// differently, r then differs by an ulp: 8·u32 of the result.
			compare(t, name+": x", cx, gx, func(i int) float64 { return 8 * u32 * math.Abs(float64(cx[i])) })
		}
	}
}

func TestRoPEQK(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(23, 24))
	const eps = 1e-6
	for _, tc := range []struct{ T, Hq, Hk, D int }{{1, 32, 8, 128}, {3, 4, 2, 128}, {11, 8, 8, 64}, {2, 3, 1, 256}, {4, 1, 1, 2}, {5, 16, 8, 128}} {
		half := tc.D / 2
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(tc.D)))
		}
		f := p.weight("rope.inv_freq", backend.F32, inv, half)
		pv := make([]int32, tc.T)
		for i := range pv {
			pv[i] = int32(r.IntN(8192))
		}
		pos := p.ints(pv)
		Cq, Ck := tc.Hq*tc.D, tc.Hk*tc.D
		qv, kv := randVec(r, tc.T*Cq, 3), randVec(r, tc.T*Ck, 3)
		qn := p.weight("q_norm", backend.BF16, randVec(r, tc.D, 1), tc.D)
		kn := p.weight("k_norm", backend.BF16, randVec(r, tc.D, 1), tc.D)
		for _, norm := range []bool{false, true} {
			name := fmt.Sprintf("T=%d Hq=%d Hk=%d D=%d norm %v", tc.T, tc.Hq, tc.Hk, tc.D, norm)
			var qc, qg, kc, kg backend.Weight
			if norm {
				qc, qg, kc, kg = qn.c, qn.g, kn.c, kn.g
			}

			// The GPU's separate ops, and the CPU's norms alone (the
			// values RoPE rotates, for the tolerance).
			q0, k0 := p.tensor(qv, tc.T, Cq), p.tensor(kv, tc.T, Ck)
			if norm {
				p.gpu.RMSNorm(q0.g, q0.g, qg, eps)
				p.gpu.RMSNorm(k0.g, k0.g, kg, eps)
				p.cpu.RMSNorm(q0.c, q0.c, qc, eps)
				p.cpu.RMSNorm(k0.c, k0.c, kc, eps)
			}
			nq, _ := p.results(q0, tc.T*Cq)
			nk, _ := p.results(k0, tc.T*Ck)
			p.gpu.RoPE(q0.g, pos.g, f.g)
			p.gpu.RoPE(k0.g, pos.g, f.g)
			wantQ, wantK := p.download(q0.g, tc.T*Cq), p.download(k0.g, tc.T*Ck)

			q, k := p.tensor(qv, tc.T, Cq), p.tensor(kv, tc.T, Ck)
			p.cpu.RoPEQK(q.c, k.c, pos.c, f.c, qc, kc, eps)
			p.gpu.RoPEQK(q.g, k.g, pos.g, f.g, qg, kg, eps)
			cq, gq := p.results(q, tc.T*Cq)
			ck, gk := p.results(k, tc.T*Ck)
			sameBits(t, name+": q against the GPU's separate ops", gq, wantQ)
			sameBits(t, name+": k against the GPU's separate ops", gk, wantK)
			// As TestRoPE: 2·u32 of |x1| + |x2| for the rotation; with the
			// norm, each normalized input may differ by 8·u32 of itself
			// (TestRMSNorm), which the rotation (|cos| + |sin| <= √2)
			// carries over: 14·u32 in all.
			k1 := 2.0
			if norm {
				k1 = 14
			}
			for _, s := range []struct {
				what   string
				c, g   []float32
				in     []float32
				stride int
			}{{"q", cq, gq, nq, Cq}, {"k", ck, gk, nk, Ck}} {
				compare(t, name+": "+s.what, s.c, s.g, func(i int) float64 {
					row, j := i/s.stride, i%s.stride
					h, e := j/tc.D, j%tc.D%half
					x1, x2 := s.in[row*s.stride+h*tc.D+e], s.in[row*s.stride+h*tc.D+e+half]
					return k1 * u32 * (math.Abs(float64(x1)) + math.Abs(float64(x2)))
				})
			}
		}
	}
}

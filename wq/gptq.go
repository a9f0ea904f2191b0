package wq

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Hessian accumulates H = Σ x xᵀ over the calibration tokens x [K] that
// reach one linear input (GPTQ's only calibration statistic). Layers that
// read the same input (q, k and v; gate and up) can share one Hessian.
type Hessian struct {
	K      int
	H      []float64 // [K, K]; only the upper triangle is kept until Full
	Tokens int       // tokens accumulated
}

// NewHessian returns an empty Hessian for K input channels.
func NewHessian(K int) *Hessian { return &Hessian{K: K, H: make([]float64, K*K)} }

// Add accumulates the T rows of x [T, K] (row-major).
func (h *Hessian) Add(x []float32, T int) error {
	K := h.K
	if len(x) != T*K {
		return fmt.Errorf("wq: hessian: %d values for %d tokens of %d channels", len(x), T, K)
	}
	// Columns in float64, so each H entry is one contiguous dot product.
	cols := make([]float64, K*T)
	for t := range T {
		for k := range K {
			cols[k*T+t] = float64(x[t*K+k])
		}
	}
	parallelFor(K, func(i int) {
		ci := cols[i*T : (i+1)*T]
		row := h.H[i*K:]
		for j := i; j < K; j++ {
			cj := cols[j*T : (j+1)*T]
			var a0, a1 float64
			t := 0
			for ; t+1 < T; t += 2 {
				a0 += ci[t] * cj[t]
				a1 += ci[t+1] * cj[t+1]
			}
			if t < T {
				a0 += ci[t] * cj[t]
			}
			row[j] += a0 + a1
		}
	})
	h.Tokens += T
	return nil
}

// parallelFor runs fn(i) for i in [0, n) on GOMAXPROCS goroutines, items
// handed out in interleaved order (row i of a triangle costs K−i).
func parallelFor(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// gptqDamp is GPTQ's dampening: λ = gptqDamp · mean(diag H) is added to the
// diagonal so H stays well conditioned when channels are nearly collinear.
const gptqDamp = 0.01

// gptqFactor returns U, the upper Cholesky factor of (H + λI)⁻¹, row-major
// [K, K] (package doc, steps 1–3). If the dampened H is not positive
// definite, λ is raised tenfold up to three times.
//
// With perm non-nil the factor is of the permuted Hessian H[perm, perm]
// (act-order walks the channels in that order).
func gptqFactor(h *Hessian, perm []int) ([]float64, error) {
	K := h.K
	hij := func(i, j int) float64 { return h.H[min(i, j)*K+max(i, j)] }
	if perm == nil {
		perm = make([]int, K)
		for i := range perm {
			perm[i] = i
		}
	}
	a := make([]float64, K*K)
	var mean float64
	for i := range K {
		for j := range K {
			a[i*K+j] = hij(perm[i], perm[j])
		}
		if a[i*K+i] == 0 {
			a[i*K+i] = 1 // a channel the calibration never activated
		}
		mean += a[i*K+i]
	}
	mean /= float64(K)
	damp := gptqDamp * mean
	// With J the reversal permutation and J(H+λI)J = L Lᵀ (L lower),
	// (H+λI)⁻¹ = (J L⁻¹ J)ᵀ (J L⁻¹ J) and J L⁻¹ J is upper with a positive
	// diagonal: it is U. One Cholesky and one triangular inverse.
	for range 4 {
		m := make([]float64, K*K)
		for i := range K {
			for j := range K {
				m[i*K+j] = a[(K-1-i)*K+(K-1-j)]
			}
			m[i*K+i] += damp
		}
		if cholesky(m, K) {
			mt := lowerInverseT(m, K) // mt[j*K+i] = (L⁻¹)[i][j]
			u := make([]float64, K*K)
			for i := range K {
				for j := i; j < K; j++ {
					u[i*K+j] = mt[(K-1-j)*K+(K-1-i)]
				}
			}
			return u, nil
		}
		damp *= 10
	}
	return nil, fmt.Errorf("wq: gptq: the Hessian of %d channels is not positive definite even with dampening %.3g", K, damp)
}

// cholesky factors the symmetric positive definite a [K, K] in place into
// its lower factor L (a = L Lᵀ; the upper triangle is zeroed). It reports
// false if a is not positive definite.
func cholesky(a []float64, K int) bool {
	for j := range K {
		rj := a[j*K : j*K+j]
		d := a[j*K+j]
		for _, v := range rj {
			d -= v * v
		}
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*K+j] = d
		parallelRange(j+1, K, K-j, func(i0, i1 int) {
			for i := i0; i < i1; i++ {
				ri := a[i*K : i*K+j]
				s := a[i*K+j]
				for k, v := range rj {
					s -= ri[k] * v
				}
				a[i*K+j] = s / d
			}
		})
	}
	for i := range K {
		for j := i + 1; j < K; j++ {
			a[i*K+j] = 0
		}
	}
	return true
}

// parallelRange splits [lo, hi) over goroutines when the work (rows × cost)
// is large enough to pay for them.
func parallelRange(lo, hi, cost int, fn func(i0, i1 int)) {
	n := hi - lo
	workers := runtime.GOMAXPROCS(0)
	if n*cost < 1<<16 || workers <= 1 || n < 2 {
		fn(lo, hi)
		return
	}
	workers = min(workers, n)
	var wg sync.WaitGroup
	for w := range workers {
		i0, i1 := lo+n*w/workers, lo+n*(w+1)/workers
		wg.Go(func() { fn(i0, i1) })
	}
	wg.Wait()
}

// lowerInverseT returns the transpose of M = L⁻¹ for the lower factor l:
// mt[j*K+i] = M[i][j] (nonzero for i >= j), so each column's forward
// substitution writes contiguous memory.
func lowerInverseT(l []float64, K int) []float64 {
	mt := make([]float64, K*K)
	parallelFor(K, func(j int) {
		col := mt[j*K : (j+1)*K]
		for i := j; i < K; i++ {
			s := 0.0
			if i == j {
				s = 1
			}
			ri := l[i*K : i*K+i]
			for k := j; k < i; k++ {
				s -= ri[k] * col[k]
			}
			col[i] = s / l[i*K+i]
		}
	})
	return mt
}

// GPTQOptions tune QuantizeGPTQ.
type GPTQOptions struct {
	// ActOrder walks the channels in decreasing order of H_kk (the most
	// active first) instead of their natural order. The groups stay the
	// contiguous groups of the format, so their (scale, zero) pairs are
	// fixed up front by RTN's rules on the original weights ("static
	// groups") rather than at the group's first channel.
	ActOrder bool
}

// QuantizeGPTQ stores the row-major [N, K] weight w in format (e, G) with
// GPTQ (package doc) using the calibration Hessian h of the layer's input.
// fp16 needs no calibration and is stored as by Quantize.
func QuantizeGPTQ(e Elem, G, N, K int, w []float32, h *Hessian, o GPTQOptions) (*Matrix, error) {
	if !e.IsInt() {
		return Quantize(e, G, N, K, w)
	}
	if h == nil || h.K != K || len(h.H) != K*K {
		return nil, fmt.Errorf("wq: gptq: no Hessian of %d channels for a [%d, %d] weight", K, N, K)
	}
	if h.Tokens == 0 {
		return nil, fmt.Errorf("wq: gptq: the Hessian of a [%d, %d] weight has no calibration tokens", N, K)
	}
	m, err := NewMatrix(e, G, N, K)
	if err != nil {
		return nil, err
	}
	if len(w) != N*K {
		return nil, fmt.Errorf("wq: gptq: %d values for [%d, %d]", len(w), N, K)
	}
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("wq: gptq: non-finite weight %v at row %d, column %d", v, i/K, i%K)
		}
	}
	if o.ActOrder {
		return gptqActOrder(m, w, h)
	}
	u, err := gptqFactor(h, nil)
	if err != nil {
		return nil, err
	}
	parallelFor(N, func(n int) {
		row := make([]float64, K)
		for k := range K {
			row[k] = float64(RoundFP16(w[n*K+k]))
		}
		vals := make([]float32, G)
		for g := 0; g < K/G; g++ {
			i0 := g * G
			for i := range G {
				vals[i] = RoundFP16(float32(row[i0+i]))
			}
			lo, hi := groupRange(vals)
			s, z, _ := QuantParams(e, lo, hi)
			m.SetParam(n, g, s, z)
			for i := i0; i < i0+G; i++ {
				q := QuantCode(e, float32(row[i]), s, z)
				m.setRaw(n, i, uint32(q))
				err := (row[i] - float64(Dequant(q, s, z))) / u[i*K+i]
				ui := u[i*K : (i+1)*K]
				for j := i + 1; j < K; j++ {
					row[j] -= err * ui[j]
				}
			}
		}
	})
	return m, nil
}

// gptqActOrder is QuantizeGPTQ with GPTQOptions.ActOrder into the empty m.
func gptqActOrder(m *Matrix, w []float32, h *Hessian) (*Matrix, error) {
	e, G, N, K := m.Elem, m.Group, m.N, m.K
	perm := make([]int, K)
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(h.H[b*K+b], h.H[a*K+a]) })
	u, err := gptqFactor(h, perm)
	if err != nil {
		return nil, err
	}
	parallelFor(N, func(n int) {
		orig := make([]float32, K)
		for k := range K {
			orig[k] = RoundFP16(w[n*K+k])
		}
		m.quantizeRow(n, orig)    // static groups: RTN's params (codes are overwritten)
		row := make([]float64, K) // row[i] is channel perm[i]
		for i, k := range perm {
			row[i] = float64(orig[k])
		}
		for i, k := range perm {
			s, z := m.Param(n, k/G)
			q := QuantCode(e, float32(row[i]), s, z)
			m.setRaw(n, k, uint32(q))
			err := (row[i] - float64(Dequant(q, s, z))) / u[i*K+i]
			ui := u[i*K : (i+1)*K]
			for j := i + 1; j < K; j++ {
				row[j] -= err * ui[j]
			}
		}
	})
	return m, nil
}

package cpu

// Elementwise float32 kernels of RMSNorm, RoPE, SwiGLU and Add: the SIMD
// versions (vec_amd64.s, 8 lanes) and their pure-Go references, which do
// the same float32 operations in the same order (products rounded before
// any add: no fused multiply-add), so every level gives the same bits.
// Each function takes whole slices; the SIMD kernel covers the first
// multiple of vecLanes elements and Go the rest.

import "math"

// vecLanes is the width of the elementwise SIMD kernels.
const vecLanes = 8

// addVec sets dst[i] = a[i] + b[i].
func addVec(dst, a, b []float32) {
	n := len(dst)
	a, b = a[:n], b[:n]
	i := 0
	if v := n &^ (vecLanes - 1); v > 0 && vecSIMD() {
		addAVX2(&dst[0], &a[0], &b[0], v)
		i = v
	}
	for ; i < n; i++ {
		dst[i] = a[i] + b[i]
	}
}

// scaleMulVec sets dst[i] = w[i]·(x[i]·r), RMSNorm's last step.
func scaleMulVec(dst, x, w []float32, r float32) {
	n := len(dst)
	x, w = x[:n], w[:n]
	i := 0
	if v := n &^ (vecLanes - 1); v > 0 && vecSIMD() {
		scaleMulAVX2(&dst[0], &x[0], &w[0], v, r)
		i = v
	}
	for ; i < n; i++ {
		dst[i] = w[i] * float32(x[i]*r)
	}
}

// ropeVec rotates the pairs (lo[i], hi[i]) by the angles of cos and sin:
// lo' = lo·cos − hi·sin, hi' = hi·cos + lo·sin.
func ropeVec(lo, hi, cos, sin []float32) {
	n := len(lo)
	hi, cos, sin = hi[:n], cos[:n], sin[:n]
	i := 0
	if v := n &^ (vecLanes - 1); v > 0 && vecSIMD() {
		ropeAVX2(&lo[0], &hi[0], &cos[0], &sin[0], v)
		i = v
	}
	for ; i < n; i++ {
		x1, x2 := lo[i], hi[i]
		lo[i] = float32(x1*cos[i]) - float32(x2*sin[i])
		hi[i] = float32(x2*cos[i]) + float32(x1*sin[i])
	}
}

// swigluVec sets dst[i] = silu(g[i])·u[i] with silu(g) = g/(1 + e^−g),
// e^−g from expNeg.
func swigluVec(dst, g, u []float32) {
	n := len(dst)
	g, u = g[:n], u[:n]
	i := 0
	if v := n &^ (vecLanes - 1); v > 0 && vecSIMD() {
		swigluAVX2(&dst[0], &g[0], &u[0], v)
		i = v
	}
	for ; i < n; i++ {
		dst[i] = g[i] / (expNeg(g[i]) + 1) * u[i]
	}
}

// The constants of expNeg (vec_amd64.s holds the same bits).
const (
	expLo    = -87.0 // e^x below it is clamped (2^-126 still normal after rounding n)
	expHi    = 88.0  // e^x above it is clamped (below float32's largest)
	expLog2e = float32(1.44269504088896341)
	expMagic = 12582912.0  // 1.5·2^23: adding and subtracting it rounds to an integer
	expC1    = 0.693359375 // ln 2 = c1 + c2 (Cody-Waite): n·c1 is exact
	expC2    = float32(-2.12194440e-4)
	expP0    = float32(1.9875691500e-4) // Cephes expf's polynomial
	expP1    = float32(1.3981999507e-3)
	expP2    = float32(8.3334519073e-3)
	expP3    = float32(4.1665795894e-2)
	expP4    = float32(1.6666665459e-1)
	expP5    = float32(5.0000001201e-1)
)

// expNeg returns e^−g for g in float32 (relative error about 2⁻²², Cephes'
// expf): x = clamp(−g), n = round(x·log2 e), r = x − n·ln 2 in two parts,
// e^r by a degree-7 polynomial, times 2^n.
func expNeg(g float32) float32 {
	x := -g
	x = max(x, expLo)
	x = min(x, expHi)
	n := float32(float32(x*expLog2e)+expMagic) - expMagic
	r := x - float32(n*expC1)
	r = r - float32(n*expC2)
	p := expP0
	p = float32(p*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	y := float32(float32(float32(p*r)*r)+r) + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// sumSquares returns Σ x[i]² to within about 2⁻²³ relative, independent
// of len(x): 16 float32 lanes (lane l takes elements l, l+16, ... below the
// last multiple of 16) with Kahan compensation, y = x² − c, t = s + y,
// c = (t − s) − y, s = t; then Σ_l (s_l − c_l) and the remaining squares
// in float64. A plain float32 sum's error grows with the row (about
// len/16·2⁻²⁴ in the worst case); the CUDA backend sums in float64 and its
// tests allow the CPU a few float32 ulps of the normalized result.
func sumSquares(x []float32) float64 {
	k16 := len(x) &^ (dotLanes - 1)
	var sc [2 * dotLanes]float32
	if k16 > 0 && vecSIMD() {
		sumSquaresAVX2(&x[0], k16, &sc)
	} else {
		s, c := sc[:dotLanes], sc[dotLanes:]
		for k := 0; k < k16; k += dotLanes {
			xs := x[k : k+dotLanes : k+dotLanes]
			for l := range dotLanes {
				y := float32(xs[l]*xs[l]) - c[l]
				t := s[l] + y
				c[l] = (t - s[l]) - y
				s[l] = t
			}
		}
	}
	var total float64
	for l := range dotLanes {
		total += float64(sc[l]) - float64(sc[dotLanes+l])
	}
	for _, v := range x[k16:] {
		total += float64(v) * float64(v)
	}
	return total
}

package cpu

// Elementwise float32 kernels of RMSNorm, RoPE, SwiGLU, GeGLU and Add: the SIMD
// versions (vec_amd64.s, 8 lanes; vec_arm64.s, two 4-lane registers, and
// SwiGLU's and GeGLU's float64 steps two lanes a register) and their
// pure-Go references, which do
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
		addSIMD(&dst[0], &a[0], &b[0], v)
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
		scaleMulSIMD(&dst[0], &x[0], &w[0], v, r)
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
		ropeSIMD(&lo[0], &hi[0], &cos[0], &sin[0], v)
		i = v
	}
	for ; i < n; i++ {
		x1, x2 := lo[i], hi[i]
		lo[i] = float32(x1*cos[i]) - float32(x2*sin[i])
		hi[i] = float32(x2*cos[i]) + float32(x1*sin[i])
	}
}

// swigluVec sets dst[i] = silu(g[i])·u[i] with silu(g) = g/(1 + e^−g)
// computed in float64 (siluF64) and rounded once to float32, as the CUDA
// backend's comparison assumes: within one float32 rounding of the exact
// silu, then the float32 product with u.
func swigluVec(dst, g, u []float32) {
	n := len(dst)
	g, u = g[:n], u[:n]
	i := gluWide(dst, g, u, false)
	if v := n &^ (vecLanes - 1); v > i && vecSIMD() {
		swigluSIMD(&dst[i], &g[i], &u[i], v-i)
		i = v
	}
	for ; i < n; i++ {
		dst[i] = siluF64(g[i]) * u[i]
	}
}

// The constants of siluF64 (vec_amd64.s holds the same bits).
const (
	siluLo    = -708.0 // e^x clamped below it (silu is then g, exactly)
	siluHi    = 708.0  // and above it (silu is then g·e^g, a tiny value or 0)
	siluLog2e = 1.4426950408889634
	siluMagic = 6755399441055744.0         // 1.5·2^52: adding and subtracting it rounds to an integer
	siluLn2Hi = 6.93147180369123816490e-01 // fdlibm's ln 2 = hi + lo; n·hi is exact
	siluLn2Lo = 1.90821492927058770002e-10
)

// siluCoef are 1/k! for k = 9 down to 2: e^r = 1 + r + r²·Σ r^(k−2)/k!,
// truncated after k = 9 (|r| ≤ ln2/2: relative error below 2⁻³⁷).
var siluCoef = [...]float64{1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2}

// siluF64 returns float32(g/(1 + e^−g)) with e^−g in float64 (glu64).
func siluF64(g float32) float32 { return glu64(g, -float64(g)) }

// The constants of geluTanhF64 (vec_amd64.s holds the same bits).
const (
	geluCubic = 0.044715                     // gelu_tanh's cubic coefficient
	geluNegK  = -1.5957691216057307117597842 // −2·√(2/π)
)

// geluTanhF64 returns float32(g/(1 + e^−z)) with z = 2√(2/π)·(g +
// 0.044715·g³), transformers' gelu_pytorch_tanh g/2·(1 + tanh(z/2)), in
// float64: x = geluNegK·(g + geluCubic·((g·g)·g)), each product rounded
// before its add, then glu64.
func geluTanhF64(g float32) float32 {
	g64 := float64(g)
	cube := float64(float64(g64*g64) * g64)
	inner := g64 + float64(geluCubic*cube)
	return glu64(g, float64(geluNegK*inner))
}

// glu64 returns float32(g/(1 + e^x)) with e^x in float64: x clamped to
// [siluLo, siluHi], n = round(x·log2 e), r = x − n·ln2 (in two parts), e^r
// by Horner's rule on 1/k!, times 2^n. Every product is rounded before its
// add (no fused multiply-add), so swigluSIMD and gegluSIMD compute the
// same bits.
func glu64(g float32, x float64) float32 {
	x = max(x, siluLo)
	x = min(x, siluHi)
	n := float64(float64(x*siluLog2e)+siluMagic) - siluMagic
	r := x - float64(n*siluLn2Hi)
	r = r - float64(n*siluLn2Lo)
	p := siluCoef[0]
	for _, c := range siluCoef[1:] {
		p = float64(p*r) + c
	}
	y := float64(float64(float64(p*r)*r)+r) + 1
	e := y * math.Float64frombits(uint64(int64(n)+1023)<<52)
	return float32(float64(g) / (e + 1))
}

// gegluVec sets dst[i] = gelu_tanh(g[i])·u[i], gelu_tanh in float64
// (geluTanhF64) rounded once to float32, then the float32 product with u:
// swigluVec's scheme.
func gegluVec(dst, g, u []float32) {
	n := len(dst)
	g, u = g[:n], u[:n]
	i := gluWide(dst, g, u, true)
	if v := n &^ (vecLanes - 1); v > i && vecSIMD() {
		gegluSIMD(&dst[i], &g[i], &u[i], v-i)
		i = v
	}
	for ; i < n; i++ {
		dst[i] = geluTanhF64(g[i]) * u[i]
	}
}

// scaleVec sets dst[i] = s·x[i] in float32 (Go vectorizes nothing here;
// the op runs once per forward pass on one [T, C] tensor).
func scaleVec(dst, x []float32, s float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = v * s
	}
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
		sumSquaresSIMD(&x[0], k16, &sc)
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

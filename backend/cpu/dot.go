package cpu

// The dot products of Linear in their canonical order, and the pure-Go tile
// that is both the fallback and the reference of the SIMD tiles
// (dot_amd64.s, written by gen_dot.go).
//
// Canonical order. An output y[t, n] = Σ_k x[t, k]·w[n, k] over K inputs is
// summed in dotLanes = 16 lanes: with K16 = K rounded down to a multiple of
// 16, lane l accumulates, for k = l, l+16, l+32, ... < K16 in that order,
//
//	acc_l = acc_l + float32(x_k·w_k)        (the product rounded, then the add:
//	                                         no fused multiply-add)
//
// the lanes are reduced by a fixed tree
//
//	v_l = acc_l + acc_{l+8}   (l < 8)
//	r_l = v_l + v_{l+4}       (l < 4)
//	u_l = r_l + r_{l+2}       (l < 2)
//	s   = u_0 + u_1
//
// then the K − K16 remaining inputs are added one by one in increasing k
// (s = s + float32(x_k·w_k)) and last the bias (s = s + bias[n]). w_k is
// the weight's exact float32 value: the F32 value, the widened F16 or BF16
// value, or for I8 codes float32(q)·scale (exact: a 7-bit code times an
// fp16 scale fits float32's mantissa).
//
// The order depends on K alone, so an output is bitwise the same whatever
// the thread count, the tile it falls in, the SIMD level (AVX-512 keeps a
// lane per zmm element, AVX2 two ymm per accumulator, this file an array of
// 16) and the other tokens of the batch: prefill and decode agree bit for
// bit. The error bound is that of any float32 sum of K/16 + 4 terms per
// lane and tree, below the sequential sum's K terms.

//go:generate go run gen_dot.go

import (
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
)

// dotLanes is the number of partial sums of the canonical order: the
// float32 lanes of one AVX-512 register.
const dotLanes = 16

// dotFunc is a SIMD tile (dot_amd64.s): for r < MR and c < NR it stores the
// reduced canonical sum over the first k16 inputs of x row r (at x + r·xs
// bytes) and weight row c (at w + c·ws bytes) into dst + r·ds bytes + 4c.
// I8 tiles also read the scales of row c, group g at sc + 4c + g·ss bytes.
type dotFunc func(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

// tiles are the SIMD tiles of one weight format at one level: k11 and k14
// (one row of x against 1 or 4 weight rows) always, k41 and k44 (4 rows of x)
// where the level has them; k44c, where the level has it, is k44 for weight
// rows already in the cache (no prefetch of the next rows: F32 on AVX-512,
// for the prefill's widened rows).
type tiles struct {
	k11, k14, k41, k44, k44c dotFunc
}

// tileFormats names the weight formats that have SIMD tiles, as
// gen_dot.go names them; tileIndex maps a weight to its entry.
var tileFormats = [...]string{"F32", "BF16", "F16", "I8G32", "I8G64", "I8G128", "WQ8G128", "WQ4G128", "WQ3G128"}

// tileIndex returns w's index in tileFormats, or -1 if no tile reads it (an
// I8 group size other than 32, 64 or 128).
func tileIndex(w *weight) int {
	switch w.format {
	case wF32:
		return 0
	case wBF16:
		return 1
	case wF16:
		return 2
	case wI8:
		switch w.group {
		case 32:
			return 3
		case 64:
			return 4
		case 128:
			return 5
		}
	}
	return -1
}

// tilesFor returns the SIMD tiles for w at the active level, or ok = false
// if w runs on the pure-Go tile (Generic level, purego build, or a format
// without tiles).
func tilesFor(w *weight) (t tiles, ok bool) {
	lvl := cpufeat.Active()
	i := tileIndex(w)
	if lvl == cpufeat.Generic || i < 0 {
		return t, false
	}
	t = tileTable[lvl][i]
	return t, t.k11 != nil
}

// reduceLanes is the canonical lane reduction tree.
func reduceLanes(a *[dotLanes]float32) float32 {
	var v [8]float32
	for l := range v {
		v[l] = a[l] + a[l+8]
	}
	var r [4]float32
	for l := range r {
		r[l] = v[l] + v[l+4]
	}
	u0, u1 := r[0]+r[2], r[1]+r[3]
	return u0 + u1
}

// dotGeneric returns the canonical sum of x[:k16]·w row n over the first
// k16 inputs (k16 a multiple of dotLanes).
func dotGeneric(x []float32, w *weight, n, k16 int) float32 {
	var acc [dotLanes]float32
	K := w.shape[1]
	x = x[:k16]
	switch w.format {
	case wF32:
		row := w.f32[n*K : n*K+k16]
		for k := 0; k < k16; k += dotLanes {
			xs := x[k : k+dotLanes : k+dotLanes]
			ws := row[k : k+dotLanes : k+dotLanes]
			for l := range acc {
				acc[l] += float32(xs[l] * ws[l])
			}
		}
	case wBF16:
		row := w.u16[n*K : n*K+k16]
		for k := 0; k < k16; k += dotLanes {
			xs := x[k : k+dotLanes : k+dotLanes]
			ws := row[k : k+dotLanes : k+dotLanes]
			for l := range acc {
				acc[l] += float32(xs[l] * half.BF16ToFloat32(ws[l]))
			}
		}
	case wF16:
		row := w.u16[n*K : n*K+k16]
		for k := 0; k < k16; k += dotLanes {
			xs := x[k : k+dotLanes : k+dotLanes]
			ws := row[k : k+dotLanes : k+dotLanes]
			for l := range acc {
				acc[l] += float32(xs[l] * half.ToFloat32(ws[l]))
			}
		}
	case wI8:
		row := w.i8[n*K : n*K+k16]
		for k := 0; k < k16; k += dotLanes {
			xs := x[k : k+dotLanes : k+dotLanes]
			ws := row[k : k+dotLanes : k+dotLanes]
			for l := range acc {
				acc[l] += float32(xs[l] * w.i8Value(ws[l], n, k+l))
			}
		}
	}
	return reduceLanes(&acc)
}

// widenFunc is a SIMD widening kernel (dot_amd64.s): the float32 values of
// the first k16 elements of the row at w into dst; I8 rows read the scale
// of group g at sc + g·ss bytes.
type widenFunc func(dst *float32, w unsafe.Pointer, k16 int, sc *float32, ss uintptr)

// widenRows writes the exact float32 values of rows [n0, n1) of matrix w
// into f (row-major, K per row), with the SIMD kernel of the format where
// the level has one.
func widenRows(f []float32, w *weight, n0, n1 int) {
	N, K := w.shape[0], w.shape[1]
	k16 := K &^ (dotLanes - 1)
	var fn widenFunc
	if i := tileIndex(w); i >= 0 && k16 > 0 {
		fn = widenTable[cpufeat.Active()][i]
	}
	for n := n0; n < n1; n++ {
		row := f[(n-n0)*K : (n-n0+1)*K]
		if fn == nil {
			w.row(row, n)
			continue
		}
		var sc *float32
		if w.format == wI8 {
			sc = &w.scales[n]
		}
		fn(&row[0], w.rowPtr(n), k16, sc, uintptr(4*N))
		for k := k16; k < K; k++ {
			row[k] = w.at(n, k)
		}
	}
}

// widenMinRows is the number of tokens from which a tile widens its weight
// rows to float32 once instead of in every SIMD step: the widening costs
// about one step's conversion per weight, saved on every further token.
const widenMinRows = 16

// linearTile computes y[t, n] for t in [t0, t1), n in [n0, n1) in the
// canonical order: the body on the SIMD tiles (or dotGeneric), then the
// remaining inputs and the bias. The tokens are taken tileT at a time (a
// block's x rows stay in L2 while the weight rows pass over them), after
// the weight rows are widened once for all of them.
func linearTile(y, x []float32, w *weight, bias []float32, K, N, t0, t1, n0, n1 int) {
	if t1-t0 >= widenMinRows && w.format != wF32 {
		// Many tokens share the tile's weight rows: widen them once into a
		// float32 scratch (exact, so the bits are those of the stored
		// format) and run the F32 tiles, which skip the per-use conversion.
		buf := getScratch((n1 - n0) * K)
		defer scratchPool.Put(buf)
		f := (*buf)[:(n1-n0)*K]
		widenRows(f, w, n0, n1)
		tw := &weight{shape: []int{n1 - n0, K}, format: wF32, f32: f}
		var bt []float32
		if bias != nil {
			bt = bias[n0:]
		}
		linearBlocks(y[n0:], x, tw, bt, K, N, t0, t1, 0, n1-n0, t0) // just written: cached
		return
	}
	// Stored rows: the first block's tile brings them in (it prefetches
	// the rows ahead), the later blocks find them cached.
	linearBlocks(y, x, w, bias, K, N, t0, t1, n0, n1, t0+tileT)
}

// linearBlocks runs linearBlock on [t0, t1) a block of tileT tokens at a
// time; the blocks from token cachedFrom on find w's rows [n0, n1) in the
// cache.
func linearBlocks(y, x []float32, w *weight, bias []float32, K, N, t0, t1, n0, n1, cachedFrom int) {
	for tb := t0; tb < t1; tb += tileT {
		linearBlock(y, x, w, bias, K, N, tb, min(t1, tb+tileT), n0, n1, tb >= cachedFrom)
	}
}

// linearBlock is linearTile on one block of at most tileT tokens, on w as
// stored (widened by linearTile where it widens); cached: run k44c where
// the level has it.
func linearBlock(y, x []float32, w *weight, bias []float32, K, N, t0, t1, n0, n1 int, cached bool) {
	k16 := K &^ (dotLanes - 1)
	if ts, ok := tilesFor(w); ok {
		if cached && ts.k44c != nil {
			ts.k44 = ts.k44c
		}
		simdTile(ts, y, x, w, K, N, k16, t0, t1, n0, n1)
	} else {
		for t := t0; t < t1; t++ {
			xt := x[t*K : (t+1)*K]
			for n := n0; n < n1; n++ {
				y[t*N+n] = dotGeneric(xt, w, n, k16)
			}
		}
	}
	if k16 == K && bias == nil {
		return
	}
	for t := t0; t < t1; t++ {
		xt := x[t*K : (t+1)*K]
		for n := n0; n < n1; n++ {
			s := y[t*N+n]
			for k := k16; k < K; k++ {
				s += float32(xt[k] * w.at(n, k))
			}
			if bias != nil {
				s += bias[n]
			}
			y[t*N+n] = s
		}
	}
}

// simdTile runs the SIMD tiles over y[t0:t1, n0:n1]: 4×4 tiles where the
// level has them, 1×4 for the remaining rows of x, 1×1 (and 4×1) for the
// remaining weight rows.
func simdTile(ts tiles, y, x []float32, w *weight, K, N, k16, t0, t1, n0, n1 int) {
	xs := uintptr(4 * K)
	ds := uintptr(4 * N)
	ws := uintptr(w.elemSize() * K)
	var sc *float32
	var ss uintptr
	if w.format == wI8 {
		ss = uintptr(4 * N)
	}
	for n := n0; n < n1; {
		nr := 1
		if n+4 <= n1 {
			nr = 4
		}
		wp := w.rowPtr(n)
		if w.format == wI8 {
			sc = &w.scales[n]
		}
		t := t0
		if k4 := pick(nr == 4, ts.k44, ts.k41); k4 != nil {
			for ; t+4 <= t1; t += 4 {
				k4(&x[t*K], xs, wp, ws, k16, &y[t*N+n], ds, sc, ss)
			}
		}
		k1 := pick(nr == 4, ts.k14, ts.k11)
		for ; t < t1; t++ {
			k1(&x[t*K], xs, wp, ws, k16, &y[t*N+n], ds, sc, ss)
		}
		n += nr
	}
}

// pick returns a if c, else b.
func pick(c bool, a, b dotFunc) dotFunc {
	if c {
		return a
	}
	return b
}

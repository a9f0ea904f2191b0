package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// tiledCode returns the code and (scale, zero) of channel k of row n read
// from a tiled layout (PackTiles) the way gemvq4.cu's gemv_q5<4, S, true,
// true> addresses it: the coalesced copy of line r = n % 16 of row group
// rg = n / 16 at step st = k / 256 starts at word rg·steps·512 + r·32 +
// t0·256 with t0 = 2·st (CoalRows' offset plus t0·kTStride), channel k is
// in word (k % 256) / 8 of the line, nibble (k % 8) / 2 of its low (k
// even) or high (k odd) half (wq's int4 word); the params of group grp at
// (rg·groups + grp)·16 + r (Rows' p0 plus grp·kPStride).
func tiledCode(tw, tp []uint32, N, K, G, n, k int) (q int, scale, zero uint16) {
	const u, stride = 2, gemvq4Rows * 32 / 2
	steps, groups := (K/gemvq4Tile+u-1)/u, K/G
	rg, r, t0 := n/gemvq4Rows, n%gemvq4Rows, k/(u*gemvq4Tile)*u
	word := tw[rg*steps*gemvq4Rows*32+r*32+t0*stride+k%(u*gemvq4Tile)/8]
	q = int(word>>(4*(k%8/2)+16*(k%2))) & 0xf
	p := tp[(rg*groups+k/G)*gemvq4Rows+r]
	return q, uint16(p), uint16(p >> 16)
}

// TestPackTilesMatchesWQ checks PackTiles, the reference of the tiled
// layout v6 reads, on the CPU: every channel's code and (scale, zero) read
// back as v6 addresses them give wq's reference dequantization ŵ
// (wq.Matrix.At) exactly, for int4 with groups of 128 and 256, N not a
// multiple of 16, an odd number of tiles (a step of one tile) and the 8B
// shapes' K; the pad (rows past N, the missing tile of a last step) is
// zero, and the sizes are TiledWords and TiledParams.
func TestPackTilesMatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 6))
	for _, c := range []struct{ G, N, K int }{{128, 100, 1152}, {256, 77, 1536}, {128, 48, 4096}, {128, 33, 14336}, {256, 16, 256}} {
		t.Run(fmt.Sprintf("g%d-N%d-K%d", c.G, c.N, c.K), func(t *testing.T) {
			w := make([]float32, c.N*c.K)
			for i := range w {
				w[i] = float32(0.02 * r.NormFloat64())
			}
			m, err := wq.Quantize(wq.Int4, c.G, c.N, c.K, w)
			if err != nil {
				t.Fatal(err)
			}
			tw, tp, err := PackTiles(4, c.N, c.K, c.G, m.Words, m.Params)
			if err != nil {
				t.Fatal(err)
			}
			if len(tw) != TiledWords(4, c.N, c.K) || len(tp) != TiledParams(c.N, c.K, c.G) {
				t.Fatalf("sizes %d, %d: want %d, %d", len(tw), len(tp), TiledWords(4, c.N, c.K), TiledParams(c.N, c.K, c.G))
			}
			nonzero := 0
			for n := range c.N {
				for k := range c.K {
					q, s, z := tiledCode(tw, tp, c.N, c.K, c.G, n, k)
					// wq's ŵ: float32(float32(s)·float32(q)) + float32(z).
					got := half.ToFloat32(s)*float32(q) + half.ToFloat32(z)
					if want := m.At(n, k); got != want || q != int(m.Raw(n, k)) {
						t.Fatalf("[%d, %d]: code %d ŵ %g, want %d %g", n, k, q, got, m.Raw(n, k), want)
					}
					if q != 0 {
						nonzero++
					}
				}
			}
			if nonzero == 0 {
				t.Fatal("every code is zero: the check proves nothing")
			}
			// The pad: rows past N in the last row group, the second tile of
			// a last step of one tile.
			rgs, steps := (c.N+15)/16, (c.K/128+1)/2
			for rg := range rgs {
				for st := range steps {
					for r := range 16 {
						for wd := range 32 {
							n, k := rg*16+r, st*32+wd
							if (n >= c.N || k >= c.K/8) && tw[((rg*steps+st)*16+r)*32+wd] != 0 {
								t.Fatalf("pad word (rg %d, st %d, r %d, w %d) is not zero", rg, st, r, wd)
							}
						}
					}
				}
			}
			for i, p := range tp {
				if i%16+i/(16*(c.K/c.G))*16 >= c.N && p != 0 {
					t.Fatalf("pad param %d is not zero", i)
				}
			}
		})
	}
	if _, _, err := PackTiles(4, 16, 4096, 128, make([]uint32, 3), nil); err == nil {
		t.Error("PackTiles took words of the wrong size")
	}
}

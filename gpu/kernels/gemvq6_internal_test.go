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

// tiledCases are the PackTiles tests' shapes: groups of 128 and 256, N
// not a multiple of 16, an odd number of tiles, the 8B shapes' K.
var tiledCases = []struct{ G, N, K int }{{128, 100, 1152}, {256, 77, 1536}, {128, 48, 4096}, {128, 33, 14336}, {256, 16, 256}}

// packTiledCase quantizes a random [N, K] weight to e in groups of G and
// packs its tiled layout (PackTiles), checking the sizes against
// TiledWords and TiledParams.
func packTiledCase(t *testing.T, r *rand.Rand, e wq.Elem, G, N, K int) (*wq.Matrix, []uint32, []uint32) {
	t.Helper()
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	m, err := wq.Quantize(e, G, N, K, w)
	if err != nil {
		t.Fatal(err)
	}
	tw, tp, err := PackTiles(e.Bits(), N, K, G, m.Words, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	if len(tw) != TiledWords(e.Bits(), N, K) || len(tp) != TiledParams(N, K, G) {
		t.Fatalf("sizes %d, %d: want %d, %d", len(tw), len(tp), TiledWords(e.Bits(), N, K), TiledParams(N, K, G))
	}
	return m, tw, tp
}

// checkTiledCodes checks every channel of m as code reads it back from a
// tiled layout: its code is wq's and its ŵ, float32(float32(s)·float32(q))
// + float32(z), is wq's reference dequantization exactly; some code must
// be non-zero.
func checkTiledCodes(t *testing.T, m *wq.Matrix, N, K int, code func(n, k int) (q int, scale, zero uint16)) {
	t.Helper()
	nonzero := 0
	for n := range N {
		for k := range K {
			q, s, z := code(n, k)
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
	for _, c := range tiledCases {
		t.Run(fmt.Sprintf("g%d-N%d-K%d", c.G, c.N, c.K), func(t *testing.T) {
			m, tw, tp := packTiledCase(t, r, wq.Int4, c.G, c.N, c.K)
			checkTiledCodes(t, m, c.N, c.K, func(n, k int) (int, uint16, uint16) { return tiledCode(tw, tp, c.N, c.K, c.G, n, k) })
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

// tiledCode3 returns the code and (scale, zero) of channel k of row n read
// from an int3 tiled layout (PackTiles) the way gemvq4.cu's v6.1 int3
// (gemv_q5<3, S, true, true, false, true>) addresses it: block (rg, st) =
// (n / 16, k / 256) at (rg·steps + st)·384 words, lane (g, c) = (n % 8,
// k % 128 / 32) reading its 12 words at 12·(4g + c), in them tile u = k %
// 256 / 128 at 6u and row half r = n % 16 / 8 at 3r: the span's 3 words of
// wq's int3 rule (wq/doc.go: channel j < 30 in word j / 10, field j % 10 /
// 2 of the low (j even) or high half; channels 30 and 31 from bits 15 and
// 31 of the three words).
func tiledCode3(tw, tp []uint32, N, K, G, n, k int) (q int, scale, zero uint16) {
	steps, groups := (K/gemvq4Tile+1)/2, K/G
	rg, g, r := n/gemvq4Rows, n%8, n%gemvq4Rows/8
	st, u, c, j := k/256, k%256/128, k%128/32, k%32
	span := tw[(rg*steps+st)*384+12*(4*g+c)+6*u+3*r:][:3]
	if j < 30 {
		q = int(span[j/10]>>(3*(j%10/2)+16*(j%2))) & 7
	} else {
		for b := range 3 {
			q |= int(span[b]>>(15+16*(j-30))) & 1 << b
		}
	}
	p := tp[(rg*groups+k/G)*gemvq4Rows+n%gemvq4Rows]
	return q, uint16(p), uint16(p >> 16)
}

// TestPackTilesInt3MatchesWQ checks PackTiles' int3 layout (session 15d)
// on the CPU as TestPackTilesMatchesWQ does int4's: every channel's code
// and (scale, zero) read back as v6.1 addresses them (tiledCode3) give
// wq's ŵ exactly; every word of wq's lands on its own tiled word and every
// other tiled word (rows past N, the missing tile of a last step) is zero;
// the sizes are TiledWords and TiledParams (wq's bytes where N is a
// multiple of 16 and K of 256).
func TestPackTilesInt3MatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 63))
	for _, c := range tiledCases {
		t.Run(fmt.Sprintf("g%d-N%d-K%d", c.G, c.N, c.K), func(t *testing.T) {
			m, tw, tp := packTiledCase(t, r, wq.Int3, c.G, c.N, c.K)
			if c.N%16 == 0 && c.K%256 == 0 && len(tw) != len(m.Words) {
				t.Fatalf("%d tiled words for wq's %d: padding where none is needed", len(tw), len(m.Words))
			}
			checkTiledCodes(t, m, c.N, c.K, func(n, k int) (int, uint16, uint16) { return tiledCode3(tw, tp, c.N, c.K, c.G, n, k) })
			hi := 0 // channels 30 and 31 (bits from three words) with their bit 2 set
			for n := range c.N {
				for k := range c.K {
					if k%32 >= 30 && m.Raw(n, k) >= 4 {
						hi++
					}
				}
			}
			if hi == 0 {
				t.Fatal("no code of channels 30-31 has bit 2 set: the check proves little")
			}
			rowWords, steps := c.K/32*3, (c.K/128+1)/2
			hit := make([]bool, len(tw))
			for n := range c.N {
				for k := range rowWords {
					i := tiledIndex(3, steps, n, k)
					if hit[i] {
						t.Fatalf("row %d word %d lands on tiled word %d twice", n, k, i)
					}
					hit[i] = true
				}
			}
			for i, v := range tw {
				if !hit[i] && v != 0 {
					t.Fatalf("pad word %d = %#08x, not zero", i, v)
				}
			}
			for i, p := range tp {
				if i%16+i/(16*(c.K/c.G))*16 >= c.N && p != 0 {
					t.Fatalf("pad param %d is not zero", i)
				}
			}
		})
	}
}

// tiledCode8 returns the code and (scale, zero) of channel k of row n read
// from an int8 tiled layout (PackTiles) the way gemvq4.cu's v6.1 int8
// (gemv_q5<8, S, true, true, false, true>, a step of one tile) addresses
// it: the coalesced copy of line r = n % 16 of row group rg = n / 16 at
// step (tile) st = k / 128 starts at word rg·steps·512 + r·32 + st·512
// (CoalRows' offset plus st·kTStride), channel k is in word (k % 128) / 4
// of the line, byte (k % 4) / 2 of its low (k even) or high (k odd) half
// (wq's int8 word); the params as int4's.
func tiledCode8(tw, tp []uint32, K, G, n, k int) (q int, scale, zero uint16) {
	const stride = gemvq4Rows * 32
	steps, groups := K/gemvq4Tile, K/G
	rg, r, st := n/gemvq4Rows, n%gemvq4Rows, k/gemvq4Tile
	word := tw[rg*steps*stride+r*32+st*stride+k%gemvq4Tile/4]
	q = int(word>>(8*(k%4/2)+16*(k%2))) & 0xff
	p := tp[(rg*groups+k/G)*gemvq4Rows+r]
	return q, uint16(p), uint16(p >> 16)
}

// TestPackTilesInt8MatchesWQ is TestPackTilesMatchesWQ for int8's tiled
// layout (session 16): every channel read back as v6.1 int8 addresses it
// gives wq's code and ŵ exactly; groups of 128 and 256, N not a multiple
// of 16, an odd number of tiles, the 8B shapes' K; the rows past N are
// zero; the sizes are TiledWords and TiledParams, wq's bytes where N is a
// multiple of 16.
func TestPackTilesInt8MatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 8))
	for _, c := range tiledCases {
		t.Run(fmt.Sprintf("g%d-N%d-K%d", c.G, c.N, c.K), func(t *testing.T) {
			m, tw, tp := packTiledCase(t, r, wq.Int8, c.G, c.N, c.K)
			if rgs := (c.N + 15) / 16; len(tw) != rgs*16*c.K/4 {
				t.Fatalf("%d words, want %d (wq's words of %d rows)", len(tw), rgs*16*c.K/4, rgs*16)
			}
			checkTiledCodes(t, m, c.N, c.K, func(n, k int) (int, uint16, uint16) { return tiledCode8(tw, tp, c.K, c.G, n, k) })
			for n := c.N; n < (c.N+15)/16*16; n++ {
				for k := 0; k < c.K; k += 4 {
					if i := tiledIndex(8, c.K/128, n, k/4); tw[i] != 0 {
						t.Fatalf("pad word of row %d, word %d is not zero", n, k/4)
					}
				}
			}
		})
	}
}

// TestGEMVQ6cUses checks v6.1c's route (session 24) on the Llama-3.1-8B
// int3 shapes at LaunchTiled's splits: down (K 14336, split 8: 7 steps a
// warp) and q|k|v (K 4096, split 4: 4 steps) run v6.1c, o (K 4096, split
// 8: 2 steps) v6.1; and the knobs that keep v6.1 everywhere.
func TestGEMVQ6cUses(t *testing.T) {
	var g GEMVQ
	g.v5Slots[gemvqBitsIndex(3)] = 2 * gemvq4Warps * 132 // the H100's 132 SMs, two CTAs each
	for _, c := range []struct {
		name    string
		N, K, S int
		want    bool
	}{{"down", 4096, 14336, 8, true}, {"q|k|v", 6144, 4096, 4, true}, {"o", 4096, 4096, 8, false}} {
		if S := g.SplitV5For(c.N, c.K, 3); S != c.S {
			t.Fatalf("%s: SplitV5For %d, want %d", c.name, S, c.S)
		}
		if got := gemvq6cUses(c.K, c.S); got != c.want {
			t.Errorf("%s: gemvq6cUses(%d, %d) = %v, want %v", c.name, c.K, c.S, got, c.want)
		}
	}
	if !gemvq6cUses(1152, 1) || gemvq6cUses(1152, 2) || gemvq6cUses(384, 1) {
		t.Errorf("gemvq6cUses at K 1152 (5 steps) S 1, 2 or K 384: %v %v %v", gemvq6cUses(1152, 1), gemvq6cUses(1152, 2), gemvq6cUses(384, 1))
	}
}

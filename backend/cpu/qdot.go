package cpu

// The packed order: Linear on wq's int8 and int4 matrices with groups of
// 128 channels reads the packed words directly, without a dequantized copy.
//
// A row of packed words is cut into chunks of 16 words (64 int8 channels or
// 128 int4 channels; package wq's layout). Word l of a chunk feeds lane l:
// for each field f of the word (the 4 bytes of int8, the 8 nibbles of int4,
// wq.doc's bit offsets), the code q = word>>shift & mask stands for channel
// chan(f, l) of the chunk (int8: 4l + [0 2 1 3][f]; int4: 8l + 2(f mod 4) +
// f div 4) and
//
//	ŵ     = float32(s·q) + z                  (exact product, one rounding:
//	                                           wq.Dequant's value, computed
//	                                           by an FMA in the SIMD tiles)
//	acc_l = acc_l + float32(x_chan · ŵ)
//
// in the order (chunk, field) per lane; the lanes are then reduced by the
// canonical tree of dot.go and the bias is added. x is permuted once per
// call into the chunk's field order (xp[chunk·C + 16f + l] = x[chunk·C +
// chan(f, l)]), so a tile reads it with plain vector loads. The order
// depends on K and the format only: every level (dotWQGeneric is the
// reference), thread count and batch gives the same bits.
//
// int3 (groups of 128, K a multiple of 512) has a packed order of its own:
// a chunk is 16 blocks of 3 words (512 channels) and lane l is block l,
// whose 3 words the SIMD tile gathers; its 32 fields are word j's ten
// 3-bit fields (j = 0, 1, 2; bit offsets 3p + 16h, channel 10j + 2p + h)
// and then channels 30 and 31 from the spare bits 15 and 31 of the three
// words. A lane's group is 4·chunk + l/4, so a chunk's (scale, zero) pairs
// are kept per row as 4 scales then 4 zeros (packedParams3).
// Other formats (fp16, other group sizes) dequantize tiles (qlinear.go).

import (
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// packedGroup is the group size the packed order runs on.
const packedGroup = 128

// packedFormat describes a wq format in the packed order.
type packedFormat struct {
	int3   bool   // the int3 order (lanes are blocks of 3 words, packedFormat.params)
	tile   int    // tileFormats index of its SIMD tiles
	shifts []int  // bit offset of each field in a word
	chans  []int  // chan(f, l) for f-major (f, l): 16·fields entries
	mask   uint32 // code mask
	ch     int    // channels per chunk of 16 words
}

// packedFormats are the formats with a packed order, by wq element.
var packedFormats = map[wq.Elem]*packedFormat{
	wq.Int8: newPackedFormat(6, []int{0, 8, 16, 24}, 0xff, func(f, l int) int { return 4*l + [4]int{0, 2, 1, 3}[f] }),
	wq.Int4: newPackedFormat(7, []int{0, 4, 8, 12, 16, 20, 24, 28}, 0xf, func(f, l int) int { return 8*l + 2*(f%4) + f/4 }),
	wq.Int3: newInt3Format(),
}

// int3Chunk is the channels of an int3 chunk: 16 blocks of 32.
const int3Chunk = 512

// int3Shift is the bit offset of field f < 30 of an int3 block in its word
// f/10; int3Chan the channel (in the block) of field f.
func int3Shift(f int) int { r := f % 10; return 3*(r/2) + 16*(r%2) }
func int3Chan(f int) int {
	if f >= 30 {
		return f
	}
	r := f % 10
	return 10*(f/10) + 2*(r/2) + r%2
}

func newInt3Format() *packedFormat {
	p := &packedFormat{int3: true, tile: 8, mask: 7, ch: int3Chunk}
	for f := range 32 {
		for l := range dotLanes {
			p.chans = append(p.chans, 32*l+int3Chan(f))
		}
	}
	return p
}

func newPackedFormat(tile int, shifts []int, mask uint32, chanOf func(f, l int) int) *packedFormat {
	p := &packedFormat{tile: tile, shifts: shifts, mask: mask, ch: dotLanes * len(shifts)}
	for f := range shifts {
		for l := range dotLanes {
			p.chans = append(p.chans, chanOf(f, l))
		}
	}
	return p
}

// packedOf returns m's packed format, or nil if its Linear dequantizes tiles.
func packedOf(m *wq.Matrix) *packedFormat {
	p := packedFormats[m.Elem]
	if p == nil || m.Group != packedGroup || m.K%p.ch != 0 {
		return nil
	}
	return p
}

// params returns m's (scale, zero) pairs as float32 in the layout p's tiles
// read: packedParams, or for int3 per chunk c and row n the 4 scales then
// the 4 zeros of groups 4c..4c+3 at [8(c·N+n)], with 16 values of padding
// (a tile loads 16 and keeps 8).
func (p *packedFormat) params(m *wq.Matrix) []float32 {
	if !p.int3 {
		return packedParams(m)
	}
	chunks := m.K / int3Chunk
	pz := make([]float32, 8*chunks*m.N+16)
	for c := range chunks {
		for n := range m.N {
			for i := range 4 {
				s, z := m.Param(n, 4*c+i)
				pz[8*(c*m.N+n)+i] = half.ToFloat32(s)
				pz[8*(c*m.N+n)+4+i] = half.ToFloat32(z)
			}
		}
	}
	return pz
}

// packedParams returns m's (scale, zero) pairs as float32, transposed: the
// pair of row n, group g at [2(g·N+n)], [2(g·N+n)+1], so the rows of a tile
// read neighbouring pairs.
func packedParams(m *wq.Matrix) []float32 {
	G := m.K / m.Group
	pz := make([]float32, 2*m.N*G)
	for n := range m.N {
		for g := range G {
			s, z := m.Param(n, g)
			pz[2*(g*m.N+n)] = half.ToFloat32(s)
			pz[2*(g*m.N+n)+1] = half.ToFloat32(z)
		}
	}
	return pz
}

// permute writes x's row (K values) into xp in the chunks' field order.
func (p *packedFormat) permute(xp, x []float32) {
	for c0 := 0; c0 < len(x); c0 += p.ch {
		xc, pc := x[c0:c0+p.ch], xp[c0:c0+p.ch]
		for i, ch := range p.chans {
			pc[i] = xc[ch]
		}
	}
}

// dotWQGeneric returns the packed-order sum of row n of m with the permuted
// x row xp.
func dotWQGeneric(p *packedFormat, xp []float32, m *wq.Matrix, pz []float32, n int) float32 {
	if p.int3 {
		return dotInt3Generic(xp, m, pz, n)
	}
	var acc [dotLanes]float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for c := 0; c < RW/dotLanes; c++ {
		g := c * p.ch / m.Group
		s, z := pz[2*(g*m.N+n)], pz[2*(g*m.N+n)+1]
		words := row[c*dotLanes : (c+1)*dotLanes : (c+1)*dotLanes]
		for i, sh := range p.shifts {
			xs := xp[c*p.ch+i*dotLanes : c*p.ch+(i+1)*dotLanes : c*p.ch+(i+1)*dotLanes]
			for l := range acc {
				q := float32(words[l] >> sh & p.mask)
				w := s*q + z // s·q is exact: one rounding, as the tiles' FMA
				acc[l] += float32(xs[l] * w)
			}
		}
	}
	return reduceLanes(&acc)
}

// dotInt3Generic is dotWQGeneric for int3.
func dotInt3Generic(xp []float32, m *wq.Matrix, pz []float32, n int) float32 {
	var acc [dotLanes]float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for c := 0; c < m.K/int3Chunk; c++ {
		ps := pz[8*(c*m.N+n) : 8*(c*m.N+n)+8]
		words := row[c*3*dotLanes : (c+1)*3*dotLanes]
		for f := range 32 {
			xs := xp[c*int3Chunk+f*dotLanes : c*int3Chunk+(f+1)*dotLanes : c*int3Chunk+(f+1)*dotLanes]
			for l := range acc {
				w0, w1, w2 := words[3*l], words[3*l+1], words[3*l+2]
				var q uint32
				switch f {
				case 30:
					q = w0>>15&1 | w1>>14&2 | w2>>13&4
				case 31:
					q = w0>>31&1 | w1>>30&2 | w2>>29&4
				default:
					q = [3]uint32{w0, w1, w2}[f/10] >> int3Shift(f) & 7
				}
				s, z := ps[l/4], ps[4+l/4]
				w := s*float32(q) + z
				acc[l] += float32(xs[l] * w)
			}
		}
	}
	return reduceLanes(&acc)
}

// packedTile computes y[t, n] = xp[t]·Ŵ[n] + bias[n] for t in [t0, t1), n
// in [n0, n1), xp the permuted rows of x.
func packedTile(p *packedFormat, y, xp []float32, m *wq.Matrix, pz, bias []float32, t0, t1, n0, n1 int) {
	K, N := m.K, m.N
	lvl := cpufeat.Active()
	ts := tileTable[lvl][p.tile]
	if lvl == cpufeat.Generic || ts.k11 == nil {
		for t := t0; t < t1; t++ {
			for n := n0; n < n1; n++ {
				y[t*N+n] = dotWQGeneric(p, xp[t*K:(t+1)*K], m, pz, n)
			}
		}
	} else {
		RW := m.Elem.RowWords(K)
		ws := uintptr(4 * RW)
		for n := n0; n < n1; {
			nr := 1
			if n+4 <= n1 {
				nr = 4
			}
			wp := unsafePointerU32(&m.Words[n*RW])
			sc, ss := &pz[2*n], uintptr(8*N)
			if p.int3 {
				sc, ss = &pz[8*n], uintptr(32*N)
			}
			t := t0
			if k4 := pick(nr == 4, ts.k44, ts.k41); k4 != nil {
				for ; t+4 <= t1; t += 4 {
					k4(&xp[t*K], uintptr(4*K), wp, ws, 4*RW, &y[t*N+n], uintptr(4*N), sc, ss)
				}
			}
			k1 := pick(nr == 4, ts.k14, ts.k11)
			for ; t < t1; t++ {
				k1(&xp[t*K], uintptr(4*K), wp, ws, 4*RW, &y[t*N+n], uintptr(4*N), sc, ss)
			}
			n += nr
		}
	}
	addBias(y, bias, N, t0, t1, n0, n1)
}

package wq

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/half"
)

// Bit fields of the packed layout (package doc). A word's two 16-bit halves
// hold the even and the odd channel of each pair at the same offset.
const (
	halfShift = 16 // the odd channel of a pair sits this many bits above the even one
	// int3Fields is the number of 3-bit fields in each half of an int3 word
	// (five pairs: 30 channels in the three words of a block).
	int3Fields = 5
	// int3SpareLo and int3SpareHi are the spare bits of each int3 word that
	// carry channels 30 and 31 of the block, one code bit per word.
	int3SpareLo = 15
	int3SpareHi = 31
)

// Matrix is a packed [N, K] weight (package doc, "Packed layout").
type Matrix struct {
	Elem  Elem
	Group int // G; 0 for fp16
	N, K  int
	// Words holds the codes (or fp16 values): row n is
	// Words[n·RowWords(K) : (n+1)·RowWords(K)].
	Words []uint32
	// Params holds the fp16 (scale, zero) pairs: Params[2·(n·K/G+g)] is the
	// scale of row n, group g, and the next element its zero. nil for fp16.
	Params []uint16
}

// NewMatrix returns a zeroed packed matrix of format (e, G).
func NewMatrix(e Elem, G, N, K int) (*Matrix, error) {
	if !e.IsInt() {
		G = 0
	}
	if err := Check(e, G, N, K); err != nil {
		return nil, err
	}
	m := &Matrix{Elem: e, Group: G, N: N, K: K, Words: make([]uint32, N*e.RowWords(K))}
	if e.IsInt() {
		m.Params = make([]uint16, 2*N*(K/G))
	}
	return m, nil
}

// Bytes returns the memory the packed matrix takes (codes plus params).
func (m *Matrix) Bytes() int64 { return Bytes(m.Elem, m.Group, m.N, m.K) }

// Validate checks that the slices have the lengths the shape implies, so a
// Matrix built by hand (or read from a file) is safe to use.
func (m *Matrix) Validate() error {
	if m == nil {
		return fmt.Errorf("wq: nil matrix")
	}
	if err := Check(m.Elem, m.Group, m.N, m.K); err != nil {
		return err
	}
	if len(m.Words) != m.N*m.Elem.RowWords(m.K) {
		return fmt.Errorf("wq: matrix [%d, %d] %v has %d words, want %d", m.N, m.K, m.Elem, len(m.Words), m.N*m.Elem.RowWords(m.K))
	}
	want := 0
	if m.Elem.IsInt() {
		want = 2 * m.N * (m.K / m.Group)
	}
	if len(m.Params) != want {
		return fmt.Errorf("wq: matrix [%d, %d] %v has %d params, want %d", m.N, m.K, m.Elem, len(m.Params), want)
	}
	return nil
}

// pos returns where channel k of a row sits: the word (relative to the row
// start) and the bit offset of its field. For int3 channels 30 and 31 of a
// block, spread over three words, it returns ok = false.
func (e Elem) pos(k int) (word int, shift uint, ok bool) {
	E := e.BlockElems()
	b, i := k/E, k%E
	base := b * e.BlockWords()
	bits := uint(e.Bits())
	switch e {
	case Int3:
		if i >= 2*int3Fields*3 {
			return base, 0, false
		}
		j, r := i/(2*int3Fields), i%(2*int3Fields)
		return base + j, uint(r/2)*bits + uint(r%2)*halfShift, true
	default: // fp16, int8, int4: one word per block
		return base, uint(i/2)*bits + uint(i%2)*halfShift, true
	}
}

// Raw returns the stored bits of row n, channel k: the code of an integer
// type, the fp16 bit pattern for fp16.
func (m *Matrix) Raw(n, k int) uint32 {
	row := m.Words[n*m.Elem.RowWords(m.K):]
	mask := uint32(1)<<m.Elem.Bits() - 1
	w, sh, ok := m.Elem.pos(k)
	if ok {
		return row[w] >> sh & mask
	}
	// int3 channel 30 (low spare bits) or 31 (high spare bits).
	spare := uint(int3SpareLo)
	if k%Int3.BlockElems() == 31 {
		spare = int3SpareHi
	}
	var q uint32
	for j := range Int3.BlockWords() {
		q |= (row[w+j] >> spare & 1) << j
	}
	return q
}

// setRaw stores v (already masked to the element's bits) at row n, channel k.
func (m *Matrix) setRaw(n, k int, v uint32) {
	row := m.Words[n*m.Elem.RowWords(m.K):]
	mask := uint32(1)<<m.Elem.Bits() - 1
	w, sh, ok := m.Elem.pos(k)
	if ok {
		row[w] = row[w]&^(mask<<sh) | (v&mask)<<sh
		return
	}
	spare := uint(int3SpareLo)
	if k%Int3.BlockElems() == 31 {
		spare = int3SpareHi
	}
	for j := range Int3.BlockWords() {
		row[w+j] = row[w+j]&^(1<<spare) | (v>>j&1)<<spare
	}
}

// blockFields is where the fields of a block lie (pos): word and shift of
// each of its first n channels (int3's channels 30 and 31 go to the spare
// bits instead, setCodes).
type blockFields struct {
	n     int
	word  [2 * int3Fields * 3]int
	shift [2 * int3Fields * 3]uint
}

// blockFieldsOf holds every element type's block fields.
var blockFieldsOf = func() (t [Int3 + 1]blockFields) {
	for e := FP16; e <= Int3; e++ {
		f := &t[e]
		f.n = e.BlockElems()
		if e == Int3 {
			f.n = 2 * int3Fields * 3
		}
		for i := range f.n {
			f.word[i], f.shift[i], _ = e.pos(i)
		}
	}
	return t
}()

// setCodes stores codes as the codes of row n, channels k0, k0+1, ...: a
// whole block at a time (k0 and len(codes) multiples of the block; else by
// setRaw), in pos's layout: int8 and int4 one word, int3 three words whose
// ten 3-bit fields hold channels 10j..10j+9 and whose spare bits hold bit j
// of channels 30 and 31.
func (m *Matrix) setCodes(n, k0 int, codes []uint8) {
	E, BW := m.Elem.BlockElems(), m.Elem.BlockWords()
	if k0%E != 0 || len(codes)%E != 0 {
		for i, q := range codes {
			m.setRaw(n, k0+i, uint32(q))
		}
		return
	}
	row := m.Words[n*m.Elem.RowWords(m.K):]
	f := &blockFieldsOf[m.Elem]
	for b := 0; b < len(codes); b += E {
		blk := codes[b : b+E]
		var w [3]uint32
		for i := range f.n {
			w[f.word[i]] |= uint32(blk[i]) << f.shift[i]
		}
		if m.Elem == Int3 {
			for j := range 3 {
				w[j] |= uint32(blk[30])>>j&1<<int3SpareLo | uint32(blk[31])>>j&1<<int3SpareHi
			}
		}
		copy(row[(k0+b)/E*BW:], w[:BW])
	}
}

// Param returns the fp16 (scale, zero) pair of row n, group g.
func (m *Matrix) Param(n, g int) (scale, zero uint16) {
	i := 2 * (n*(m.K/m.Group) + g)
	return m.Params[i], m.Params[i+1]
}

// SetParam stores the fp16 (scale, zero) pair of row n, group g.
func (m *Matrix) SetParam(n, g int, scale, zero uint16) {
	i := 2 * (n*(m.K/m.Group) + g)
	m.Params[i], m.Params[i+1] = scale, zero
}

// SetCode stores code q of row n, channel k (integer types; q is masked to
// the element's bits).
func (m *Matrix) SetCode(n, k int, q uint8) { m.setRaw(n, k, uint32(q)) }

// At returns the dequantized value of row n, channel k: ŵ for integer
// types (package doc), the fp16 value for fp16.
func (m *Matrix) At(n, k int) float32 {
	r := m.Raw(n, k)
	if !m.Elem.IsInt() {
		return half.ToFloat32(uint16(r))
	}
	s, z := m.Param(n, k/m.Group)
	return Dequant(uint8(r), s, z)
}

// DequantBytes returns every value ŵ of m as little-endian float32 bytes,
// row-major [N, K]: what a backend without a low-bit Linear loads instead.
func (m *Matrix) DequantBytes() []byte {
	out := make([]byte, 4*m.N*m.K)
	row := make([]float32, m.K)
	for n := range m.N {
		m.DequantRow(row, n)
		for k, v := range row {
			binary.LittleEndian.PutUint32(out[4*(n*m.K+k):], math.Float32bits(v))
		}
	}
	return out
}

// DequantRow writes row n's values ŵ into dst[:K]. It gives exactly At's
// values, unpacking a whole block at a time (the CPU GEMV's inner step).
func (m *Matrix) DequantRow(dst []float32, n int) { m.DequantRowStrided(dst, n, 1) }

// DequantRowStrided writes row n's values ŵ_k into dst[k·stride], so a
// caller can interleave rows (the CPU Linear's 4-row layout) in one pass.
func (m *Matrix) DequantRowStrided(dst []float32, n, stride int) {
	K := m.K
	dst = dst[:(K-1)*stride+1]
	row := m.Words[n*m.Elem.RowWords(K) : (n+1)*m.Elem.RowWords(K)]
	if !m.Elem.IsInt() {
		for i, w := range row {
			dst[2*i*stride] = half.ToFloat32(uint16(w))
			dst[(2*i+1)*stride] = half.ToFloat32(uint16(w >> halfShift))
		}
		return
	}
	G := m.Group
	params := m.Params[2*n*(K/G) : 2*(n+1)*(K/G)]
	for g := 0; g < K/G; g++ {
		s, z := half.ToFloat32(params[2*g]), half.ToFloat32(params[2*g+1])
		k0 := g * G
		switch m.Elem {
		case Int4:
			for i, w := range row[g*G/8 : (g+1)*G/8] {
				o := (k0 + 8*i) * stride
				for p := range 4 {
					dst[o+2*p*stride] = s*float32(w>>(4*p)&0xf) + z
					dst[o+(2*p+1)*stride] = s*float32(w>>(halfShift+4*p)&0xf) + z
				}
			}
		case Int8:
			for i, w := range row[g*G/4 : (g+1)*G/4] {
				o := (k0 + 4*i) * stride
				dst[o] = s*float32(w&0xff) + z
				dst[o+2*stride] = s*float32(w>>8&0xff) + z
				dst[o+stride] = s*float32(w>>16&0xff) + z
				dst[o+3*stride] = s*float32(w>>24) + z
			}
		case Int3:
			ws := row[g*G/32*3 : (g+1)*G/32*3]
			for b := 0; b < len(ws); b += 3 {
				o := (k0 + b/3*32) * stride
				w0, w1, w2 := ws[b], ws[b+1], ws[b+2]
				for j, w := range [3]uint32{w0, w1, w2} {
					for p := range int3Fields {
						dst[o+(10*j+2*p)*stride] = s*float32(w>>(3*p)&7) + z
						dst[o+(10*j+2*p+1)*stride] = s*float32(w>>(halfShift+3*p)&7) + z
					}
				}
				q30 := w0>>int3SpareLo&1 | (w1>>int3SpareLo&1)<<1 | (w2>>int3SpareLo&1)<<2
				q31 := w0>>int3SpareHi&1 | (w1>>int3SpareHi&1)<<1 | (w2>>int3SpareHi&1)<<2
				dst[o+30*stride] = s*float32(q30) + z
				dst[o+31*stride] = s*float32(q31) + z
			}
		}
	}
}

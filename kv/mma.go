package kv

// The mma order: the packed order the GPU decode kernel reads (layout
// induction). A packed block is a sequence of 16-token groups; each group's
// 16 x D codes are stored in the order the 32 lanes of a warp hold them as
// operands of mma.sync.m16n8k16 (fp16 A operand, row-major, 4 registers of
// two halves per lane; g = lane/4, q = lane%4):
//
//	a0: (row g,   cols 2q, 2q+1)      a1: (row g+8, cols 2q, 2q+1)
//	a2: (row g,   cols 2q+8, 2q+9)    a3: (row g+8, cols 2q+8, 2q+9)
//
// Keys are the A operand of S^T = K·Q^T: rows are the 16 tokens, columns the
// channels, one 16-channel k-block after another. Values are the A operand
// of O^T = V^T·P^T: rows are channels (one 16-channel m-block after another),
// columns the 16 tokens. Lane l's D/2 codes of a group are contiguous, in
// fragment order (block, register, low/high half); they are cut into chunks
// of min(16, laneBytes) bytes stored [chunk][lane], so that a warp reading
// chunk j with one 16-byte load per lane touches one contiguous 512-byte run.
//
// Inside each 32-bit word, the two codes of a register pair are 16 bits apart
// (code 2i at bit i*b, code 2i+1 at bit 16 + i*b for b-bit codes): one
// AND/OR (lop3) with a magic fp16 exponent then yields both as a half2.
//
// Scales and zeros keep the linear layout's places.

// Order is how the codes of a packed block are arranged.
type Order uint8

const (
	// Linear is token-major rows (the CPU's order).
	Linear Order = iota
	// MMA is the warp-fragment order the GPU kernel reads.
	MMA
)

// MMAGroup is the number of tokens of one fragment group (mma M or K extent).
const MMAGroup = 16

// mmaLanes is the number of lanes of a warp.
const mmaLanes = 32

// WithOrder returns the format with both halves of every block in order o.
func (f Format) WithOrder(o Order) Format {
	f.K.Order, f.V.Order = o, o
	return f
}

type role uint8

const (
	roleK role = iota
	roleV
)

// laneBytes is the bytes one lane holds of one 16-token group.
func (l TensorLayout) laneBytes() int { return l.D / 2 * l.Elem.Bits() / 8 }

// mmaPos returns the byte and bit of token t, channel c in mma order.
func (l TensorLayout) mmaPos(t, c int) (byteIdx int, shift uint) {
	grp, tt := t/MMAGroup, t%MMAGroup
	var lane, k int
	if l.role == roleK { // rows = tokens, cols = channels
		kb, cc := c/16, c%16
		g, hiRow := tt%8, tt/8
		q, hiCol, lo := (cc%8)/2, cc/8, cc%2
		lane, k = g*4+q, kb*8+(hiRow+2*hiCol)*2+lo
	} else { // rows = channels, cols = tokens
		mb, cm := c/16, c%16
		g, hiRow := cm%8, cm/8
		q, hiCol, lo := (tt%8)/2, tt/8, tt%2
		lane, k = g*4+q, mb*8+(hiRow+2*hiCol)*2+lo
	}
	bits := l.Elem.Bits()
	perWord := 32 / bits
	w, p := k/perWord, k%perWord
	bit := (p%2)*16 + (p/2)*bits
	inLane := w*4 + bit/8
	lb := l.laneBytes()
	chunk := min(16, lb)
	groupBytes := MMAGroup * l.RowBytes
	return grp*groupBytes + (inLane/chunk*mmaLanes+lane)*chunk + inLane%chunk, uint(bit % 8)
}

//go:build ignore

// gen_dot writes dot_amd64.s and dot_amd64.go: the SIMD dot-product tiles of
// Linear (matmul.go explains the arithmetic they must reproduce). Run it with
// `go generate ./backend/cpu` after changing it; the build needs only the
// generated files.
//
// A tile computes, for MR rows of x and NR rows of the weight, the 16-lane
// partial sums of the canonical order over the first k16 inputs and reduces
// each to one float32 by the fixed tree (lane l + l+8, + l+4, + l+2, + l+1).
// AVX-512 keeps one zmm accumulator per output; AVX2 two ymm (lanes 0-7 and
// 8-15), so both levels compute the same bits. Products are rounded before the
// add (VMULPS then VADDPS, never an FMA): the pure-Go reference does the same
// and every level agrees bit for bit.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

// format is a weight storage format: how 16 weights are loaded and widened.
type wfmt struct {
	name  string // Go name part
	esize int    // bytes per weight element
	// groups: the I8 format (per-group float32 scales); the kernel is
	// specialized on the group size.
	group int
}

var formats = []wfmt{
	{name: "F32", esize: 4},
	{name: "BF16", esize: 2},
	{name: "F16", esize: 2},
	{name: "I8G32", esize: 1, group: 32},
	{name: "I8G64", esize: 1, group: 64},
	{name: "I8G128", esize: 1, group: 128},
}

// tiles are the (MR, NR) shapes generated per level.
var tiles512 = [][2]int{{1, 1}, {1, 4}, {4, 1}, {4, 4}}
var tiles256 = [][2]int{{1, 1}, {1, 4}}

// xrows and wrows are the general registers holding row pointers.
var xrows = []string{"SI", "R8", "R9", "R10"}
var wrows = []string{"DI", "R11", "R12", "R13"}

type gen struct {
	s bytes.Buffer
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.s, "\t"+format+"\n", args...) }
func (g *gen) label(l string)               { fmt.Fprintf(&g.s, "%s:\n", l) }

// loop opens a hot loop at a 64-byte boundary (loopAlign), so that a loop's
// speed does not depend on where the code before it happens to end (an
// unrelated function added elsewhere moved these loops by 32 bytes and the
// linear layers by 7-17%: docs/perf/decode-step.md, v4).
func (g *gen) loop(l string) {
	g.p("PCALIGN $%d", loopAlign)
	g.label(l)
}

// loopAlign is the alignment of every hot loop's first instruction: one
// cache line, which holds a whole 32-byte fetch window pair.
const loopAlign = 64

func funcName(f wfmt, mr, nr int, level string) string {
	return fmt.Sprintf("dot%s_%dx%d%s", f.name, mr, nr, level)
}

// prologue loads the arguments and the row pointers.
func (g *gen) prologue(mr, nr int) {
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ xs+8(FP), DX")
	g.p("MOVQ w+16(FP), DI")
	g.p("MOVQ ws+24(FP), BX")
	g.p("MOVQ k16+32(FP), CX")
	for r := 1; r < mr; r++ {
		g.p("LEAQ (%s)(DX*1), %s", xrows[r-1], xrows[r])
	}
	for c := 1; c < nr; c++ {
		g.p("LEAQ (%s)(BX*1), %s", wrows[c-1], wrows[c])
	}
}

// prefetchSetup points R8 at the span of weight rows after the tile's (the
// next call's rows: rows are contiguous), for an MR = 1 tile, which reads
// each weight byte once and depends on the memory keeping up.
func (g *gen) prefetchSetup(nr int) {
	g.p("MOVQ ws+24(FP), R8")
	if nr > 1 {
		g.p("IMULQ $%d, R8", nr)
	}
	g.p("ADDQ DI, R8")
}

// prefetchStep prefetches, per step, as many bytes of the next span as the
// step reads of this one (NR rows × 16 elements), and advances R8.
func (g *gen) prefetchStep(f wfmt, nr int) {
	bytes := nr * f.esize * 16
	for off := 0; off < bytes; off += 64 {
		g.p("PREFETCHT0 %d(R8)", off)
	}
	g.p("ADDQ $%d, R8", bytes)
}

// prefetchStepReg is prefetchStep with the pointer in reg (MR = 4 tiles,
// whose R8 holds an x row; their DX is free once the rows are set up).
func (g *gen) prefetchStepReg(f wfmt, nr int, reg string) {
	bytes := nr * f.esize * 16
	for off := 0; off < bytes; off += 64 {
		g.p("PREFETCHT0 %d(%s)", off, reg)
	}
	g.p("ADDQ $%d, %s", bytes, reg)
}

// --- AVX-512 ---

func acc512(mr, nr, r, c int) int { return r*nr + c }

func (g *gen) loadW512(f wfmt, c int, dst string, off int) {
	g.loadW(f, c, dst, off, fmt.Sprintf("Z%d", 20+c))
}

// loadW emits the load of weight row c's elements at element offset off
// from AX into dst, widened to float32; an int8 row is multiplied by its
// scale, held in register scale.
func (g *gen) loadW(f wfmt, c int, dst string, off int, scale string) {
	switch {
	case f.name == "F32":
		g.p("VMOVUPS %d(%s)(AX*4), %s", 4*off, wrows[c], dst)
	case f.name == "BF16":
		g.p("VPMOVZXWD %d(%s)(AX*2), %s", 2*off, wrows[c], dst)
		g.p("VPSLLD $16, %s, %s", dst, dst)
	case f.name == "F16":
		g.p("VCVTPH2PS %d(%s)(AX*2), %s", 2*off, wrows[c], dst)
	case f.group > 0:
		g.p("VPMOVSXBD %d(%s)(AX*1), %s", off, wrows[c], dst)
		g.p("VCVTDQ2PS %s, %s", dst, dst)
		g.p("VMULPS %s, %s, %s", scale, dst, dst)
	}
}

// step512 emits one 16-input step at element offset off from AX; pf: the
// prefetch of the next rows (kernel512's).
func (g *gen) step512(f wfmt, mr, nr, off int, pf bool) {
	if mr == 1 {
		g.prefetchStep(f, nr)
	} else if f.group == 0 && pf {
		g.prefetchStepReg(f, nr, "DX")
	}
	for r := range mr {
		g.p("VMOVUPS %d(%s)(AX*4), Z%d", 4*off, xrows[r], 16+r)
	}
	prod := 0
	for c := range nr {
		w := fmt.Sprintf("Z%d", 24+c%2)
		g.loadW512(f, c, w, off)
		for r := range mr {
			p := 26 + prod%4
			prod++
			a := acc512(mr, nr, r, c)
			g.p("VMULPS Z%d, %s, Z%d", 16+r, w, p)
			g.p("VADDPS Z%d, Z%d, Z%d", p, a, a)
		}
	}
}

// hsum512 sums the 16 floats of Z(a) into X(a)'s lane 0, in the order
// every tile's reduction uses (halves, quarters, pairs, then the last two);
// Y30 is scratch.
func (g *gen) hsum512(a int) {
	g.p("VEXTRACTF64X4 $1, Z%d, Y30", a)
	g.p("VADDPS Y30, Y%d, Y%d", a, a)
	g.p("VEXTRACTF32X4 $1, Y%d, X30", a)
	g.p("VADDPS X30, X%d, X%d", a, a)
	g.p("VMOVHLPS X%d, X%d, X30", a, a)
	g.p("VADDPS X30, X%d, X%d", a, a)
	g.p("VMOVSHDUP X%d, X30", a)
	g.p("VADDSS X30, X%d, X%d", a, a)
}

func (g *gen) reduce512(mr, nr int) {
	g.p("MOVQ dst+40(FP), DI")
	g.p("MOVQ ds+48(FP), DX")
	if mr == 4 && nr == 4 {
		g.reduce4x4()
		return
	}
	for r := range mr {
		for c := range nr {
			a := acc512(mr, nr, r, c)
			g.hsum512(a)
			g.p("VMOVSS X%d, %d(DI)", a, 4*c)
		}
		if r+1 < mr {
			g.p("ADDQ DX, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

// reduce4x4 reduces the 16 accumulators of a 4×4 tile (acc512: Z(4r+c)
// for x row r, weight row c) by the tree of hsum512 for all 16 at once and
// stores row r's four sums at DI + r·DX. Each level pairs registers with
// a shuffle so that one VADDPS performs that level's additions for several
// outputs: the same additions of the same operands, the lower lane first
// (hsum512's operand order: a NaN keeps the same payload), so the same
// bits.
//
//	level 1, v_l = a_l + a_{l+8}: accumulators A = Z(c), B = Z(4+c) (x rows
//	  0 and 1, weight row c) give [A lanes 0-7 | B lanes 0-7] +
//	  [A lanes 8-15 | B lanes 8-15] (VSHUFF64X2, 128-bit lanes 0,1 and 2,3
//	  of each): Z(16+2c) holds v of rows 0 and 1, Z(17+2c) of rows 2, 3.
//	level 2, r_l = v_l + v_{l+4}: Z(16+2c) and Z(17+2c) give, in 128-bit
//	  lane r, r_0..r_3 of output (r, c) (VSHUFF32X4, lanes 0,2 + lanes
//	  1,3): Z(24+c).
//	level 3, u_l = r_l + r_{l+2}: Z24, Z25 (and Z26, Z27) give, in lane r,
//	  [u_0, u_1 of (r, 0); u_0, u_1 of (r, 1)] (VSHUFPS, elements 0,1 +
//	  2,3 of each): Z28 (Z29 for weight rows 2, 3).
//	level 4, s = u_0 + u_1: Z28, Z29 give in lane r the sums of (r, 0..3)
//	  (VSHUFPS, elements 0,2 + 1,3): Z30, stored a 128-bit lane a row.
func (g *gen) reduce4x4() {
	// Level 1: Z(16+2c+k) = v of accumulators (2k, c), (2k+1, c).
	for c := range 4 {
		for k := range 2 {
			a, b := acc512(4, 4, 2*k, c), acc512(4, 4, 2*k+1, c)
			g.p("VSHUFF64X2 $0x44, Z%d, Z%d, Z30", b, a) // [a lanes 0-7 | b lanes 0-7]
			g.p("VSHUFF64X2 $0xEE, Z%d, Z%d, Z31", b, a) // [a lanes 8-15 | b lanes 8-15]
			g.p("VADDPS Z31, Z30, Z%d", 16+2*c+k)
		}
	}
	// Level 2: Z(24+c) = r of (0..3, c), one 128-bit lane each.
	for c := range 4 {
		v0, v1 := 16+2*c, 17+2*c
		g.p("VSHUFF32X4 $0x88, Z%d, Z%d, Z30", v1, v0) // v_0..v_3 of rows 0, 1, 2, 3
		g.p("VSHUFF32X4 $0xDD, Z%d, Z%d, Z31", v1, v0) // v_4..v_7
		g.p("VADDPS Z31, Z30, Z%d", 24+c)
	}
	// Level 3: Z(28+h) = u of (r, 2h) and (r, 2h+1) in lane r.
	for h := range 2 {
		r0, r1 := 24+2*h, 25+2*h
		g.p("VSHUFPS $0x44, Z%d, Z%d, Z%d", r1, r0, 16+2*h) // r_0, r_1 of each
		g.p("VSHUFPS $0xEE, Z%d, Z%d, Z%d", r1, r0, 17+2*h) // r_2, r_3
		g.p("VADDPS Z%d, Z%d, Z%d", 17+2*h, 16+2*h, 28+h)
	}
	// Level 4: Z30 = s of (r, 0..3) in lane r.
	g.p("VSHUFPS $0x88, Z29, Z28, Z16") // u_0 of each
	g.p("VSHUFPS $0xDD, Z29, Z28, Z17") // u_1
	g.p("VADDPS Z17, Z16, Z30")
	g.p("VMOVUPS X30, (DI)")
	g.p("VEXTRACTF32X4 $1, Z30, (DI)(DX*1)")
	g.p("LEAQ (DI)(DX*2), DI")
	g.p("VEXTRACTF32X4 $2, Z30, (DI)")
	g.p("VEXTRACTF32X4 $3, Z30, (DI)(DX*1)")
	g.p("VZEROUPPER")
	g.p("RET")
}

func (g *gen) kernel512(f wfmt, mr, nr int) { g.kernel512pf(f, mr, nr, true) }

// cachedSuffix names the F32 4×4 tile without prefetch, for weight rows
// already in the cache: linearTile's widened float32 scratch, which the
// prefill's blocks of tokens pass over again and again. There the
// prefetch of the next 4 rows (6 KiB per row at K = 1536) only evicts the
// x rows and weight rows in use from L1 (v2.23 in docs/perf/cpu-linear.md).
const cachedSuffix = "Cached"

// kernel512pf emits the AVX-512 tile; pf: whether a 4-row tile of a
// float format prefetches the weight rows after its own (the 1-row tiles
// always do).
func (g *gen) kernel512pf(f wfmt, mr, nr int, pf bool) {
	name := funcName(f, mr, nr, "AVX512")
	if !pf {
		name += cachedSuffix
	}
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.prologue(mr, nr)
	if mr == 1 {
		g.prefetchSetup(nr)
	} else if f.group == 0 && pf {
		// DX (the x stride, used) becomes the prefetch pointer: the
		// rows after the tile's.
		g.p("MOVQ BX, DX")
		if nr > 1 {
			g.p("IMULQ $%d, DX", nr)
		}
		g.p("ADDQ DI, DX")
	}
	for i := range mr * nr {
		g.p("VPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.p("XORQ AX, AX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	if f.group > 0 {
		g.p("MOVQ sc+56(FP), DX")
		g.p("MOVQ ss+64(FP), BX")
		g.loop(name + "_loop")
		for c := range nr {
			g.p("VBROADCASTSS %d(DX), Z%d", 4*c, 20+c)
		}
		for s := 0; s < f.group/16; s++ {
			g.step512(f, mr, nr, 16*s, pf)
		}
		g.p("ADDQ $%d, AX", f.group)
		g.p("ADDQ BX, DX")
	} else {
		g.loop(name + "_loop")
		g.step512(f, mr, nr, 0, pf)
		g.p("ADDQ $16, AX")
	}
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.reduce512(mr, nr)
}

// --- AVX2 (MR = 1): row c accumulates in Y(2c) (lanes 0-7) and Y(2c+1) ---

func (g *gen) loadW256(f wfmt, c int, dst string, off int) {
	g.loadW(f, c, dst, off, fmt.Sprintf("Y%d", 10+c))
}

func (g *gen) step256(f wfmt, nr, off int) {
	g.prefetchStep(f, nr)
	g.p("VMOVUPS %d(SI)(AX*4), Y8", 4*off)
	g.p("VMOVUPS %d(SI)(AX*4), Y9", 4*off+32)
	for c := range nr {
		for h := range 2 {
			w := fmt.Sprintf("Y%d", 14+h)
			g.loadW256(f, c, w, off+8*h)
			g.p("VMULPS Y%d, %s, %s", 8+h, w, w)
			g.p("VADDPS %s, Y%d, Y%d", w, 2*c+h, 2*c+h)
		}
	}
}

func (g *gen) kernel256(f wfmt, nr int) {
	name := funcName(f, 1, nr, "AVX2")
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.prologue(1, nr)
	g.prefetchSetup(nr)
	for i := range 2 * nr {
		g.p("VXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.p("XORQ AX, AX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	if f.group > 0 {
		g.p("MOVQ sc+56(FP), DX")
		g.p("MOVQ ss+64(FP), BX")
		g.loop(name + "_loop")
		for c := range nr {
			g.p("VBROADCASTSS %d(DX), Y%d", 4*c, 10+c)
		}
		for s := 0; s < f.group/16; s++ {
			g.step256(f, nr, 16*s)
		}
		g.p("ADDQ $%d, AX", f.group)
		g.p("ADDQ BX, DX")
	} else {
		g.loop(name + "_loop")
		g.step256(f, nr, 0)
		g.p("ADDQ $16, AX")
	}
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.reduce256(nr)
}

func (g *gen) reduce256(nr int) {
	g.p("MOVQ dst+40(FP), DI")
	for c := range nr {
		lo, hi := 2*c, 2*c+1
		g.p("VADDPS Y%d, Y%d, Y%d", hi, lo, lo)
		g.p("VEXTRACTF128 $1, Y%d, X14", lo)
		g.p("VADDPS X14, X%d, X%d", lo, lo)
		g.p("VMOVHLPS X%d, X%d, X14", lo, lo)
		g.p("VADDPS X14, X%d, X%d", lo, lo)
		g.p("VMOVSHDUP X%d, X14", lo)
		g.p("VADDSS X14, X%d, X%d", lo, lo)
		g.p("VMOVSS X%d, %d(DI)", lo, 4*c)
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

// --- packed wq formats (package wq's layout): 16 words per chunk ---

// wqfmt is a packed wq format with groups of 128 channels.
type wqfmt struct {
	name   string
	fields []int  // bit offset of field f in each word
	mask   uint32 // code mask
	ch     int    // channels per chunk of 16 words
	gr     int    // chunks per group of 128 channels
}

var wqformats = []wqfmt{
	{name: "WQ8G128", fields: []int{0, 8, 16, 24}, mask: 0xff, ch: 64, gr: 2},
	{name: "WQ4G128", fields: []int{0, 4, 8, 12, 16, 20, 24, 28}, mask: 0xf, ch: 128, gr: 1},
}

// xscale is the AX scale of x addresses: x (permuted, float32) advances
// ch·4 bytes per chunk while the words advance 64.
func (f wqfmt) xscale() int { return f.ch * 4 / 64 }

// field512 extracts field i of the words in src into dst as float32.
func (g *gen) fieldExtract(f wqfmt, i int, src, dst, mask string) {
	sh := f.fields[i]
	switch {
	case sh == 0:
		g.p("VPANDD %s, %s, %s", mask, src, dst)
	case i == len(f.fields)-1 && sh+bitsOf(f.mask) == 32:
		g.p("VPSRLD $%d, %s, %s", sh, src, dst)
	default:
		g.p("VPSRLD $%d, %s, %s", sh, src, dst)
		g.p("VPANDD %s, %s, %s", mask, dst, dst)
	}
	g.p("VCVTDQ2PS %s, %s", dst, dst)
}

func bitsOf(m uint32) int {
	n := 0
	for ; m != 0; m >>= 1 {
		n++
	}
	return n
}

// kernelWQ512: AX is the byte offset in the word rows; x row r at
// (xrows[r])(AX*xscale) + 64·field; the (scale, zero) of row c, this group,
// at 8c(DX) and 8c+4(DX), DX advancing BX = N·8 bytes per group.
func (g *gen) kernelWQ512(f wqfmt, mr, nr int) {
	name := funcName(wfmt{name: f.name}, mr, nr, "AVX512")
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.prologue(mr, nr)
	if mr == 1 {
		g.prefetchSetup(nr)
	}
	for i := range mr * nr {
		g.p("VPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.p("MOVL $%d, AX", f.mask)
	g.p("VPBROADCASTD AX, Z31")
	g.p("XORQ AX, AX")
	g.p("MOVQ sc+56(FP), DX")
	g.p("MOVQ ss+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	for ch := range f.gr {
		if mr == 1 {
			for off := 0; off < nr*64; off += 64 {
				g.p("PREFETCHT0 %d(R8)", off)
			}
			g.p("ADDQ $%d, R8", nr*64)
		}
		for c := range nr {
			g.p("VMOVDQU32 %d(%s)(AX*1), Z28", 64*ch, wrows[c])
			g.p("VBROADCASTSS %d(DX), Z20", 8*c)
			g.p("VBROADCASTSS %d(DX), Z21", 8*c+4)
			for i := range f.fields {
				g.fieldExtract(f, i, "Z28", "Z29", "Z31")
				g.p("VFMADD213PS Z21, Z20, Z29") // Z29 = Z29·s + z: ŵ, the product exact
				for r := range mr {
					a := acc512(mr, nr, r, c)
					g.p("VMULPS %d(%s)(AX*%d), Z29, Z30", 64*ch*f.xscale()+64*i, xrows[r], f.xscale())
					g.p("VADDPS Z30, Z%d, Z%d", a, a)
				}
			}
		}
	}
	g.p("ADDQ $%d, AX", 64*f.gr)
	g.p("ADDQ BX, DX")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.reduce512(mr, nr)
}

// kernelWQ256 (MR = 1): row c in Y(2c) (words 0-7) and Y(2c+1) (8-15).
func (g *gen) kernelWQ256(f wqfmt, nr int) {
	name := funcName(wfmt{name: f.name}, 1, nr, "AVX2")
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.prologue(1, nr)
	g.prefetchSetup(nr)
	for i := range 2 * nr {
		g.p("VXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	g.p("MOVL $%d, AX", f.mask)
	g.p("MOVQ AX, X15")
	g.p("VPBROADCASTD X15, Y15")
	g.p("XORQ AX, AX")
	g.p("MOVQ sc+56(FP), DX")
	g.p("MOVQ ss+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	for ch := range f.gr {
		for off := 0; off < nr*64; off += 64 {
			g.p("PREFETCHT0 %d(R8)", off)
		}
		g.p("ADDQ $%d, R8", nr*64)
		for c := range nr {
			g.p("VBROADCASTSS %d(DX), Y10", 8*c)
			g.p("VBROADCASTSS %d(DX), Y11", 8*c+4)
			for h := range 2 {
				g.p("VMOVDQU %d(%s)(AX*1), Y8", 64*ch+32*h, wrows[c])
				for i := range f.fields {
					sh := f.fields[i]
					switch {
					case sh == 0:
						g.p("VPAND Y15, Y8, Y12")
					case i == len(f.fields)-1 && sh+bitsOf(f.mask) == 32:
						g.p("VPSRLD $%d, Y8, Y12", sh)
					default:
						g.p("VPSRLD $%d, Y8, Y12", sh)
						g.p("VPAND Y15, Y12, Y12")
					}
					g.p("VCVTDQ2PS Y12, Y12")
					g.p("VFMADD213PS Y11, Y10, Y12")
					g.p("VMULPS %d(SI)(AX*%d), Y12, Y13", 64*ch*f.xscale()+64*i+32*h, f.xscale())
					g.p("VADDPS Y13, Y%d, Y%d", 2*c+h, 2*c+h)
				}
			}
		}
	}
	g.p("ADDQ $%d, AX", 64*f.gr)
	g.p("ADDQ BX, DX")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.reduce256(nr)
}

// --- packed int3 (groups of 128): lane l of a chunk is block l (3 words,
// 32 channels) of 16 consecutive blocks; the words are gathered. MR = 1. ---

// int3Fields lists, in the packed order, each field's word j and bit
// offset (fields 30 and 31, the spare bits, are marked by word -1 and -2).
func int3Fields() [][2]int {
	var fs [][2]int
	for j := range 3 {
		for r := range 10 {
			fs = append(fs, [2]int{j, 3*(r/2) + 16*(r%2)})
		}
	}
	return append(fs, [2]int{-1, 15}, [2]int{-2, 31})
}

func (g *gen) kernelWQ3_512(nr int) {
	name := funcName(wfmt{name: "WQ3G128"}, 1, nr, "AVX512")
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.prologue(1, nr)
	g.prefetchSetup(nr)
	for i := range nr {
		g.p("VPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	g.p("VMOVDQU32 int3Const<>+0(SB), Z16")   // gather index 3l
	g.p("VMOVDQU32 int3Const<>+64(SB), Z17")  // s lanes: group l/4
	g.p("VMOVDQU32 int3Const<>+128(SB), Z18") // z lanes: 4 + l/4
	for _, c := range [][2]int{{19, 7}, {23, 1}, {24, 2}, {25, 4}} {
		g.p("MOVL $%d, R10", c[1])
		g.p("VPBROADCASTD R10, Z%d", c[0])
	}
	g.p("XORQ AX, AX")
	g.p("MOVQ sc+56(FP), DX")
	g.p("MOVQ ss+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	for off := 0; off < nr*192; off += 64 {
		g.p("PREFETCHT0 %d(R8)", off)
	}
	g.p("ADDQ $%d, R8", nr*192)
	for c := range nr {
		g.p("LEAQ (%s)(AX*1), R9", wrows[c])
		for j := range 3 {
			g.p("KXNORW K1, K1, K1")
			g.p("VPGATHERDD %d(R9)(Z16*4), K1, Z%d", 4*j, 26+j)
		}
		g.p("VPERMPS %d(DX), Z17, Z20", 32*c)
		g.p("VPERMPS %d(DX), Z18, Z21", 32*c)
		for f, fd := range int3Fields() {
			j, sh := fd[0], fd[1]
			switch {
			case j >= 0 && sh == 0:
				g.p("VPANDD Z19, Z%d, Z29", 26+j)
			case j >= 0:
				g.p("VPSRLD $%d, Z%d, Z29", sh, 26+j)
				g.p("VPANDD Z19, Z29, Z29")
			default: // spare bit sh of words 0, 1, 2 -> code bits 0, 1, 2
				g.p("VPSRLD $%d, Z26, Z29", sh)
				g.p("VPANDD Z23, Z29, Z29")
				g.p("VPSRLD $%d, Z27, Z30", sh-1)
				g.p("VPANDD Z24, Z30, Z30")
				g.p("VPORD Z30, Z29, Z29")
				g.p("VPSRLD $%d, Z28, Z30", sh-2)
				g.p("VPANDD Z25, Z30, Z30")
				g.p("VPORD Z30, Z29, Z29")
			}
			g.p("VCVTDQ2PS Z29, Z29")
			g.p("VFMADD213PS Z21, Z20, Z29")
			g.p("VMULPS %d(SI), Z29, Z30", 64*f)
			g.p("VADDPS Z30, Z%d, Z%d", c, c)
		}
	}
	g.p("ADDQ $192, AX")
	g.p("ADDQ $2048, SI")
	g.p("ADDQ BX, DX")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.reduce512(1, nr)
}

// --- widening a weight row to float32 (the prefill tiles' scratch) ---

// widen512 writes the float32 values of the first k16 elements of one row
// (DI) to dst (SI); I8 rows read the scale of group g at sc + g·ss.
func (g *gen) widen512(f wfmt) {
	name := "widen" + f.name + "AVX512"
	fmt.Fprintf(&g.s, "\n// func %s(dst *float32, w unsafe.Pointer, k16 int, sc *float32, ss uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	g.p("MOVQ dst+0(FP), SI")
	g.p("MOVQ w+8(FP), DI")
	g.p("MOVQ k16+16(FP), CX")
	g.p("MOVQ sc+24(FP), DX")
	g.p("MOVQ ss+32(FP), BX")
	g.p("XORQ AX, AX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_done", name)
	g.loop(name + "_loop")
	if f.group > 0 {
		g.p("VBROADCASTSS (DX), Z20")
		for st := 0; st < f.group/16; st++ {
			g.loadW512(f, 0, "Z0", 16*st)
			g.p("VMOVUPS Z0, %d(SI)(AX*4)", 64*st)
		}
		g.p("ADDQ $%d, AX", f.group)
		g.p("ADDQ BX, DX")
	} else {
		g.loadW512(f, 0, "Z0", 0)
		g.p("VMOVUPS Z0, (SI)(AX*4)")
		g.p("ADDQ $16, AX")
	}
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_done")
	g.p("VZEROUPPER")
	g.p("RET")
}

// --- int4 with integer dot products (AVX-512 VNNI; qint4.go) ---

// intTilePrologue opens an integer-path tile kernel (kernelInt4VNNI,
// kernelInt3VNNI): its Go declaration and TEXT line, the arguments (SI the
// x codes, R9 the block scales, R10 the group sums X̂, DI and the wrows the
// tile's nr weight rows, BX the row stride, CX the row's bytes), R8 the
// prefetch pointer (the rows after the tile's), and the row accumulators
// Z0..Z(nr-1) and Z4..Z(4+nr-1) zeroed.
func (g *gen) intTilePrologue(name string, nr int) {
	fmt.Fprintf(&g.s, "\n// func %s(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.p("MOVQ xq+0(FP), SI")
	g.p("MOVQ sx+8(FP), R9")
	g.p("MOVQ xsum+16(FP), R10")
	g.p("MOVQ w+24(FP), DI")
	g.p("MOVQ ws+32(FP), BX")
	g.p("MOVQ rowBytes+40(FP), CX")
	for c := 1; c < nr; c++ {
		g.p("LEAQ (%s)(BX*1), %s", wrows[c-1], wrows[c])
	}
	g.p("MOVQ BX, R8")
	if nr > 1 {
		g.p("IMULQ $%d, R8", nr)
	}
	g.p("ADDQ DI, R8")
	for c := range nr {
		g.p("VPXORD Z%d, Z%d, Z%d", c, c, c)
		g.p("VPXORD Z%d, Z%d, Z%d", 4+c, 4+c, 4+c)
	}
}

// intElem is a weight element of the integer path: int4 (qint4.go: a
// group's 16 words, each split into its low and high nibbles) or int8
// (qint8.go: a group's 32 words, the first 16 paired with the x codes of
// int4's low nibbles, the last 16 with its high ones).
type intElem struct {
	name   string // the kernels' prefix
	gbytes int    // weight bytes a group of 128 channels
}

var (
	intInt4 = intElem{name: "int4", gbytes: 64}
	intInt8 = intElem{name: "int8", gbytes: 128}
)

// codes loads the group's weight bytes at off(row) into lo and hi: the
// bytes that pair with x's low-nibble codes and with its high-nibble ones.
// int4 splits one load by the nibble mask in mask (hi may be src's
// register); int8 loads the two halves as they lie.
func (g *gen) codes(e intElem, src func(off int) string, lo, hi, mask string) {
	if e.gbytes == 128 {
		g.p("VMOVDQU32 %s, %s", src(0), lo)
		g.p("VMOVDQU32 %s, %s", src(64), hi)
		return
	}
	g.p("VMOVDQU32 %s, %s", src(0), hi)
	g.p("VPANDD %s, %s, %s", mask, hi, lo)
	g.p("VPSRLD $4, %s, %s", hi, hi)
	g.p("VPANDD %s, %s, %s", mask, hi, hi)
}

// kernelInt4VNNI (MR = 1): per group of 128 channels (int4: 16 words; int8:
// 32) and row c, the exact int32 lane sums D = 254·D1 + D2, D1 and D2 the
// VPDPBUSD of the low and high halves (int4: nibbles; int8: the group's
// two 16-word chunks) with the token's two int8 code terms (lanes: words;
// the product by 254 a VPMULLD between the two chains), then
// acc_c += float(D)·(s·sx), and the scalar zs_c += z·X. With 4 rows the
// group's 256 bytes of x codes sit in Z16-Z19, loaded once for the 4 rows.
func (g *gen) kernelInt4VNNI(e intElem, nr int) {
	name := fmt.Sprintf("%sVNNI_1x%d", e.name, nr)
	g.intTilePrologue(name, nr)
	g.p("MOVL $0x0f0f0f0f, AX")
	g.p("VPBROADCASTD AX, Z31")
	g.p("MOVL $%d, AX", int4XRatio)
	g.p("VPBROADCASTD AX, Z23")
	g.p("XORQ AX, AX")
	g.p("MOVQ pz+56(FP), DX")
	g.p("MOVQ ps+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	for off := 0; off < nr*e.gbytes; off += 64 {
		g.p("PREFETCHT0 %d(R8)", off)
	}
	g.p("ADDQ $%d, R8", nr*e.gbytes)
	g.p("VMOVUPS (R9), Z27") // sx of each lane's 8 channels
	g.p("VMOVSS (R10), X24") // X
	// The x codes (256 bytes a group; AX counts the weight bytes): q1 of
	// the low and high halves, then q2 of each.
	xi := 256 / e.gbytes
	xs := [4]string{}
	for i := range xs {
		xs[i] = fmt.Sprintf("%d(SI)(AX*%d)", 64*i, xi)
	}
	if nr > 1 {
		for i := range xs {
			g.p("VMOVDQU32 %s, Z%d", xs[i], 16+i)
			xs[i] = fmt.Sprintf("Z%d", 16+i)
		}
	}
	for c := range nr {
		g.codes(e, func(off int) string { return fmt.Sprintf("%d(%s)(AX*1)", off, wrows[c]) }, "Z29", "Z28", "Z31")
		g.p("VPXORD Z30, Z30, Z30")
		g.p("VPDPBUSD %s, Z29, Z30", xs[0])
		g.p("VPDPBUSD %s, Z28, Z30", xs[1])
		g.p("VPMULLD Z23, Z30, Z30") // 254·D1
		g.p("VPDPBUSD %s, Z29, Z30", xs[2])
		g.p("VPDPBUSD %s, Z28, Z30", xs[3])
		g.p("VCVTDQ2PS Z30, Z30")
		g.p("VBROADCASTSS %d(DX), Z26", 8*c)
		g.p("VMULPS Z27, Z26, Z26") // u_l = s·sx_l
		g.p("VMULPS Z26, Z30, Z30")
		g.p("VADDPS Z30, Z%d, Z%d", c, c)
		g.p("VMOVSS %d(DX), X25", 8*c+4)
		g.p("VMULSS X24, X25, X25") // z·X
		g.p("VADDSS X25, X%d, X%d", 4+c, 4+c)
	}
	g.p("ADDQ $%d, AX", e.gbytes)
	g.p("ADDQ BX, DX")
	g.p("ADDQ $64, R9")
	g.p("ADDQ $4, R10")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.p("MOVQ dst+48(FP), DI")
	for c := range nr {
		a := c
		g.hsum512(a)
		g.p("VADDSS X%d, X%d, X%d", 4+c, a, a) // + Σ z·X
		g.p("VMOVSS X%d, %d(DI)", a, 4*c)
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

// kernelInt4VNNI4x4 is kernelInt4VNNI for 4 tokens and 4 weight rows at
// once (prefill): each row's codes are loaded (int4: and split into
// nibbles) once for the 4 tokens, each token's block scales once for the 4 rows, and the
// 16 (row, token) sums run as independent chains (two tokens interleaved).
// Per (row, token) every operation is the 1×4 kernel's, in its order: the
// same int32 lane sums D, u_l = s·sx_l (VMULPS with s broadcast from
// memory: the same product), acc += float(D)·u, and z·X summed group by
// group (here in lane 2r+1 of token t's ymm, which holds the 4 rows' (s, z)
// pairs times X: the odd lanes' sums are the scalar zs of each row), so the
// outputs are bitwise the 1×4 kernel's. The 4 tokens' codes, block scales
// and sums sit at one stride each (xs bytes for the codes, ss for the
// scales and sums: quantizeIntRows's layout), the 4 rows at ws bytes.
//
// Registers: Z(4r+t) the accumulators, Y16-Y19 the zs of each token,
// Z20/Z21 the low and high nibbles of the row, Z22/Z23 two tokens' D,
// Z24-Z27 the tokens' block scales, Z28 the nibble mask, Z29 254, Z30/Z31
// the two tokens' u (Y30 the group's (s, z) pairs at the group's start).
func (g *gen) kernelInt4VNNI4x4(e intElem) {
	name := e.name + "VNNI_4x4"
	fmt.Fprintf(&g.s, "\n// func %s(xq *int8, xs uintptr, sx *float32, xsum *float32, ss uintptr, w unsafe.Pointer, ws uintptr, groups int, dst *float32, ds uintptr, pz *float32, ps uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $128-96\n", name)
	g.p("MOVQ xq+0(FP), SI")
	g.p("MOVQ xs+8(FP), R10")
	g.p("LEAQ (SI)(R10*1), R8")
	g.p("MOVQ sx+16(FP), R9")
	g.p("MOVQ xsum+24(FP), BX")
	g.p("MOVQ ss+32(FP), AX")
	g.p("MOVQ w+40(FP), DI")
	g.p("MOVQ ws+48(FP), R12")
	g.p("LEAQ (DI)(R12*1), R11")
	g.p("MOVQ groups+56(FP), CX")
	g.p("MOVQ pz+80(FP), DX")
	g.p("MOVL $0x0f0f0f0f, R13")
	g.p("VPBROADCASTD R13, Z28")
	g.p("MOVL $%d, R13", int4XRatio)
	g.p("VPBROADCASTD R13, Z29")
	for a := range 20 {
		g.p("VPXORD Z%d, Z%d, Z%d", a, a, a)
	}
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	// Token t's codes: (SI), (SI)(R10*1), (SI)(R10*2), (R8)(R10*2).
	xt := func(t, off int) string {
		switch t {
		case 0:
			return fmt.Sprintf("%d(SI)", off)
		case 1:
			return fmt.Sprintf("%d(SI)(R10*1)", off)
		case 2:
			return fmt.Sprintf("%d(SI)(R10*2)", off)
		}
		return fmt.Sprintf("%d(R8)(R10*2)", off)
	}
	rows := [4]string{"(DI)", "(DI)(R12*1)", "(DI)(R12*2)", "(R11)(R12*2)"}
	g.loop(name + "_loop")
	g.p("VMOVUPS (DX), Y30") // the 4 rows' (s, z) pairs
	g.p("MOVQ BX, R13")
	for t := range 4 {
		g.p("VMULPS.BCST (R13), Y30, Y31") // (s, z)·X
		g.p("VADDPS Y31, Y%d, Y%d", 16+t, 16+t)
		if t < 3 {
			g.p("ADDQ AX, R13")
		}
	}
	g.p("MOVQ R9, R13")
	for t := range 4 {
		g.p("VMOVUPS (R13), Z%d", 24+t) // sx of each lane's 8 channels
		if t < 3 {
			g.p("ADDQ AX, R13")
		}
	}
	for r := range 4 {
		g.codes(e, func(off int) string { return fmt.Sprintf("%d%s", off, rows[r]) }, "Z20", "Z21", "Z28")
		for ta := 0; ta < 4; ta += 2 {
			tb := ta + 1
			g.p("VPXORD Z22, Z22, Z22")
			g.p("VPXORD Z23, Z23, Z23")
			g.p("VPDPBUSD %s, Z20, Z22", xt(ta, 0))
			g.p("VPDPBUSD %s, Z20, Z23", xt(tb, 0))
			g.p("VPDPBUSD %s, Z21, Z22", xt(ta, 64))
			g.p("VPDPBUSD %s, Z21, Z23", xt(tb, 64))
			g.p("VPMULLD Z29, Z22, Z22") // 254·D1
			g.p("VPMULLD Z29, Z23, Z23")
			g.p("VPDPBUSD %s, Z20, Z22", xt(ta, 128))
			g.p("VPDPBUSD %s, Z20, Z23", xt(tb, 128))
			g.p("VPDPBUSD %s, Z21, Z22", xt(ta, 192))
			g.p("VPDPBUSD %s, Z21, Z23", xt(tb, 192))
			g.p("VCVTDQ2PS Z22, Z22")
			g.p("VCVTDQ2PS Z23, Z23")
			g.p("VMULPS.BCST %d(DX), Z%d, Z30", 8*r, 24+ta) // u_l = s·sx_l
			g.p("VMULPS.BCST %d(DX), Z%d, Z31", 8*r, 24+tb)
			g.p("VMULPS Z30, Z22, Z22")
			g.p("VMULPS Z31, Z23, Z23")
			g.p("VADDPS Z22, Z%d, Z%d", 4*r+ta, 4*r+ta)
			g.p("VADDPS Z23, Z%d, Z%d", 4*r+tb, 4*r+tb)
		}
	}
	g.p("ADDQ $256, SI")
	g.p("ADDQ $256, R8")
	g.p("ADDQ $%d, DI", e.gbytes)
	g.p("ADDQ $%d, R11", e.gbytes)
	g.p("ADDQ $64, R9")
	g.p("ADDQ $4, BX")
	g.p("ADDQ ps+88(FP), DX")
	g.p("DECQ CX")
	g.p("JNZ %s_loop", name)
	g.label(name + "_reduce")
	for t := range 4 {
		g.p("VMOVUPS Y%d, %d(SP)", 16+t, 32*t)
	}
	g.p("MOVQ dst+64(FP), DI")
	g.p("MOVQ ds+72(FP), DX")
	for t := range 4 {
		for r := range 4 {
			a := 4*r + t
			g.hsum512(a)
			g.p("VADDSS %d(SP), X%d, X%d", 32*t+8*r+4, a, a) // + Σ z·X
			g.p("VMOVSS X%d, %d(DI)", a, 4*r)
		}
		if t < 3 {
			g.p("ADDQ DX, DI")
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

// int4XRatio is the weight of x's first int8 code term against its second
// (qint4.go: c = 254·q1 + q2).
const int4XRatio = 254

// kernelInt4AVX2 (MR = NR = 1) is kernelInt4VNNI for AVX2: VPMADDUBSW
// (unsigned 4-bit codes × signed x codes, pairs summed in int16: at most
// 2·15·127) for the low and the high nibbles, the two added in int16 (at
// most 4·15·127 = 7620, no saturation), then VPMADDWD by 254 for the q1 term
// and by ones for the q2 term gives the same int32 lane sums 254·D1 + D2 as
// VPDPBUSD; the float combination is the same.
func (g *gen) kernelInt4AVX2() {
	name := "int4AVX2_1x1"
	fmt.Fprintf(&g.s, "\n// func %s(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
	g.p("MOVQ xq+0(FP), SI")
	g.p("MOVQ sx+8(FP), R9")
	g.p("MOVQ xsum+16(FP), R10")
	g.p("MOVQ w+24(FP), DI")
	g.p("MOVQ ws+32(FP), BX")
	g.p("MOVQ rowBytes+40(FP), CX")
	g.p("LEAQ (DI)(BX*1), R8") // prefetch: the next row
	g.p("VXORPS Y0, Y0, Y0")
	g.p("VXORPS Y1, Y1, Y1")
	g.p("VXORPS Y2, Y2, Y2")
	g.p("MOVL $0x0f0f0f0f, AX")
	g.p("MOVQ AX, X11")
	g.p("VPBROADCASTD X11, Y11")
	g.p("MOVL $0x00010001, AX")
	g.p("MOVQ AX, X10")
	g.p("VPBROADCASTD X10, Y10")
	g.p("MOVL $0x%08x, AX", int4XRatio<<16|int4XRatio)
	g.p("MOVQ AX, X15")
	g.p("VPBROADCASTD X15, Y15")
	g.p("XORQ AX, AX")
	g.p("MOVQ pz+56(FP), DX")
	g.p("MOVQ ps+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	g.p("PREFETCHT0 (R8)")
	g.p("ADDQ $64, R8")
	g.p("VBROADCASTSS (DX), Y5") // s
	g.p("VMOVSS (R10), X12")     // X
	for h := range 2 {
		g.p("VMOVDQU %d(DI)(AX*1), Y6", 32*h)
		g.p("VPAND Y11, Y6, Y7")
		g.p("VPSRLD $4, Y6, Y8")
		g.p("VPAND Y11, Y8, Y8")
		g.p("VPMADDUBSW %d(SI)(AX*4), Y7, Y9", 32*h)
		g.p("VPMADDUBSW %d(SI)(AX*4), Y8, Y13", 64+32*h)
		g.p("VPADDW Y13, Y9, Y9")
		g.p("VPMADDWD Y15, Y9, Y9") // 254·D1
		g.p("VPMADDUBSW %d(SI)(AX*4), Y7, Y13", 128+32*h)
		g.p("VPMADDUBSW %d(SI)(AX*4), Y8, Y14", 192+32*h)
		g.p("VPADDW Y14, Y13, Y13")
		g.p("VPMADDWD Y10, Y13, Y13") // D2
		g.p("VPADDD Y13, Y9, Y9")
		g.p("VCVTDQ2PS Y9, Y9")
		g.p("VMULPS %d(R9), Y5, Y13", 32*h) // u_l = s·sx_l
		g.p("VMULPS Y13, Y9, Y9")
		g.p("VADDPS Y9, Y%d, Y%d", h, h)
	}
	g.p("VMOVSS 4(DX), X13")
	g.p("VMULSS X12, X13, X13")
	g.p("VADDSS X13, X2, X2")
	g.p("ADDQ $64, AX")
	g.p("ADDQ BX, DX")
	g.p("ADDQ $64, R9")
	g.p("ADDQ $4, R10")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.p("MOVQ dst+48(FP), DI")
	g.p("VADDPS Y1, Y0, Y0")
	g.p("VEXTRACTF128 $1, Y0, X14")
	g.p("VADDPS X14, X0, X0")
	g.p("VMOVHLPS X0, X0, X14")
	g.p("VADDPS X14, X0, X0")
	g.p("VMOVSHDUP X0, X14")
	g.p("VADDSS X14, X0, X0")
	g.p("VADDSS X2, X0, X0")
	g.p("VMOVSS X0, (DI)")
	g.p("VZEROUPPER")
	g.p("RET")
}

// kernelInt4Quant writes int4QuantXAVX512 (qint4.go's quantizeInt4X for
// whole groups of 128 channels, AVX-512 F): per 16 channels (blocks 2i and
// 2i+1) the floats are permuted into the tiles' byte order (each block's
// low-nibble channels 0, 4, 1, 5 of both blocks, then the high-nibble ones
// 2, 6, 3, 7), each block's max|x| taken on the bits (a 128-bit lane holds
// 4 of a block's channels: a max within lanes, then across the 256-bit
// halves), sx = max/32258 in float32, c = x·(1/sx) in float64 rounded to
// the nearest even integer (VCVTPD2DQ under the default rounding, as
// math.RoundToEven then int32), clamped to ±32258; q1 = ((c + 32385)·66053
// >> 24) − 127, which is floor((c + 127)/254) for c + 32385 < 2¹⁶ (and the
// product stays below 2³²), q2 = c − 254·q1, both narrowed to bytes; and
// each block's Σ c. Blocks whose sx is 0, ±Inf or NaN get garbage codes
// here: the Go caller zeroes them (and sets sx to NaN for ±Inf).
func (g *gen) kernelInt4Quant() {
	name := "int4QuantXAVX512"
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xq *int8, sx *float32, cs *int32, groups int)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ xq+8(FP), DI")
	g.p("MOVQ sx+16(FP), R8")
	g.p("MOVQ cs+24(FP), R9")
	g.p("MOVQ groups+32(FP), CX")
	g.p("VMOVDQU32 int4QConst<>(SB), Z31") // the permutation
	g.quantXPrologue(name)
	for i := range 8 {
		g.p("VPERMD %d(SI), Z31, Z0", 64*i)
		g.p("VPANDD Z30, Z0, Z1")
		g.p("VPSHUFD $0x4e, Z1, Z2")
		g.p("VPMAXUD Z2, Z1, Z1")
		g.p("VPSHUFD $0xb1, Z1, Z2")
		g.p("VPMAXUD Z2, Z1, Z1")
		g.p("VSHUFI32X4 $0x4e, Z1, Z1, Z2")
		g.p("VPMAXUD Z2, Z1, Z1")
		g.p("VDIVPS Z29, Z1, Z2") // sx
		g.p("VMOVSS X2, %d(R8)", 8*i)
		g.p("VEXTRACTF32X4 $1, Z2, X3")
		g.p("VMOVSS X3, %d(R8)", 8*i+4)
		// 1/sx for lanes 0-7 (blocks 2i, 2i+1 four times each), which
		// serves both halves of the channels (the same block pattern).
		g.p("VCVTPS2PD Y2, Z4")
		g.p("VDIVPD Z4, Z28, Z4")
		g.p("VCVTPS2PD Y0, Z6")
		g.p("VEXTRACTF64X4 $1, Z0, Y7")
		g.p("VCVTPS2PD Y7, Z7")
		g.p("VMULPD Z4, Z6, Z6")
		g.p("VMULPD Z4, Z7, Z7")
		g.p("VCVTPD2DQ Z6, Y6")
		g.p("VCVTPD2DQ Z7, Y7")
		g.p("VINSERTI64X4 $1, Y7, Z6, Z6")
		g.p("VPMINSD Z27, Z6, Z6")
		g.p("VPMAXSD Z26, Z6, Z6") // c
		g.p("VPADDD Z25, Z6, Z8")
		g.p("VPMULLD Z24, Z8, Z8")
		g.p("VPSRLD $24, Z8, Z8")
		g.p("VPSUBD Z23, Z8, Z8") // q1
		g.p("VPMULLD Z22, Z8, Z9")
		g.p("VPSUBD Z9, Z6, Z9") // q2
		g.p("VPMOVDB Z8, X10")
		g.p("VMOVQ X10, %d(DI)", 8*i)
		g.p("VPEXTRQ $1, X10, %d(DI)", 64+8*i)
		g.p("VPMOVDB Z9, X11")
		g.p("VMOVQ X11, %d(DI)", 128+8*i)
		g.p("VPEXTRQ $1, X11, %d(DI)", 192+8*i)
		g.p("VPSHUFD $0x4e, Z6, Z10") // Σ c per block
		g.p("VPADDD Z10, Z6, Z10")
		g.p("VPSHUFD $0xb1, Z10, Z11")
		g.p("VPADDD Z11, Z10, Z10")
		g.p("VSHUFI32X4 $0x4e, Z10, Z10, Z11")
		g.p("VPADDD Z11, Z10, Z10")
		g.p("VMOVD X10, %d(R9)", 8*i)
		g.p("VEXTRACTI32X4 $1, Z10, X11")
		g.p("VMOVD X11, %d(R9)", 8*i+4)
	}
	g.p("ADDQ $512, SI")
	g.p("ADDQ $256, DI")
	g.p("ADDQ $64, R8")
	g.p("ADDQ $64, R9")
	g.p("DECQ CX")
	g.p("JNE %s_loop", name)
	g.label(name + "_done")
	g.p("VZEROUPPER")
	g.p("RET")
}

// int4XMax is the largest x code of the integer int4 path (qint4.go).
const int4XMax = 127 * int4XRatio

// --- int3 with integer dot products (AVX-512 VNNI + VBMI; qint3.go) ---

// int3QPerm returns int3QuantXVBMI's VPERMB tables: for term t (q1, q2),
// output byte o < 36 is word j = o/12's pass p = o%12/4 byte e = o%4, the
// code of block channel int3PassChan(j, p, e) (qint3.go), taken from byte
// 32t + that channel of the block's 64 code bytes (q1 of channels 0-31,
// then q2).
func int3QPerm() [2][64]byte {
	var r [2][64]byte
	for t := range 2 {
		for o := range 36 {
			j, p, e := o/12, o%12/4, o%4
			ch := 10*j + 4*p + e
			if p == 2 && e >= 2 {
				ch = 28 + e
			}
			r[t][o] = byte(32*t + ch)
		}
	}
	return r
}

// quantXPrologue writes the constants the x quantizers (kernelInt4Quant,
// kernelInt3Quant) keep in registers — Z30 the |x| mask, Z29 32258.0, Z27 and
// Z26 the code's clamp ±int4XMax, Z25, Z24 and Z23 the terms of q1 =
// ((c + 32385)·66053 >> 24) − 127, Z22 int4XRatio (q2 = c − 254·q1), Z28 1.0
// in float64 — then skips to name_done when CX (the count) is 0 and opens
// name_loop.
func (g *gen) quantXPrologue(name string) {
	for _, c := range []struct {
		reg string
		v   uint32
	}{{"Z30", 0x7fffffff}, {"Z29", 0x46fc0400 /* 32258.0 */}, {"Z27", int4XMax}, {"Z26", uint32(0x100000000 - int4XMax)}, {"Z25", int4XMax + int4XRatio/2}, {"Z24", 66053}, {"Z23", 127}, {"Z22", int4XRatio}} {
		g.p("MOVL $0x%08x, AX", c.v)
		g.p("VPBROADCASTD AX, %s", c.reg)
	}
	g.p("MOVQ $0x3ff0000000000000, AX") // 1.0
	g.p("VPBROADCASTQ AX, Z28")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_done", name)
	g.loop(name + "_loop")
}

// kernelInt3Quant writes int3QuantXVBMI (qint3.go's quantizeInt3X for
// whole chunks of 512 channels, AVX-512 + VBMI): per block of 32 channels
// (two zmm) max|x| on the bits, sx = max/32258 (stored for the block's
// three words), c = rint(x·(1/sx)) in float64 clamped to ±32258, q1 and q2
// as in kernelInt4Quant, the 32 q1 and 32 q2 bytes permuted by VPERMB into
// the 9 dwords (3 words × 3 passes) of each term and stored at their places
// (384i + 64p + 4l of the chunk, + 192 for q2; word v = 3b + j, i = v/16,
// l = v%16), and the block's Σ c. Blocks whose sx is 0, ±Inf or NaN get
// garbage codes here: the Go caller zeroes them (and sets sx to NaN).
func (g *gen) kernelInt3Quant() {
	name := "int3QuantXVBMI"
	fmt.Fprintf(&g.s, "\n// func %s(x *float32, xq *int8, sxw *float32, cs *int32, chunks int)\n", name)
	fmt.Fprintf(&g.s, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	g.p("MOVQ x+0(FP), SI")
	g.p("MOVQ xq+8(FP), DI")
	g.p("MOVQ sxw+16(FP), R8")
	g.p("MOVQ cs+24(FP), R9")
	g.p("MOVQ chunks+32(FP), CX")
	g.p("VMOVDQU8 int3QConst<>+0(SB), Z20")
	g.p("VMOVDQU8 int3QConst<>+64(SB), Z21")
	g.quantXPrologue(name)
	for b := range 16 {
		g.p("VMOVDQU32 %d(SI), Z0", 128*b)
		g.p("VMOVDQU32 %d(SI), Z1", 128*b+64)
		g.p("VPANDD Z30, Z0, Z2")
		g.p("VPANDD Z30, Z1, Z3")
		g.p("VPMAXUD Z3, Z2, Z2")
		for _, sh := range []string{"VSHUFI32X4 $0x4e, Z2, Z2, Z3", "VSHUFI32X4 $0xb1, Z2, Z2, Z3", "VPSHUFD $0x4e, Z2, Z3", "VPSHUFD $0xb1, Z2, Z3"} {
			g.p("%s", sh)
			g.p("VPMAXUD Z3, Z2, Z2")
		}
		g.p("VDIVPS Z29, Z2, Z2") // sx in every lane
		for j := range 3 {
			g.p("VMOVSS X2, %d(R8)", 4*(3*b+j))
		}
		g.p("VCVTPS2PD Y2, Z4")
		g.p("VDIVPD Z4, Z28, Z4") // 1/sx
		for h, src := range []string{"Z0", "Z1"} {
			lo, hi := fmt.Sprintf("Z%d", 6+2*h), fmt.Sprintf("Z%d", 7+2*h)
			loY, hiY := fmt.Sprintf("Y%d", 6+2*h), fmt.Sprintf("Y%d", 7+2*h)
			g.p("VCVTPS2PD Y%s, %s", src[1:], lo)
			g.p("VEXTRACTF64X4 $1, %s, %s", src, hiY)
			g.p("VCVTPS2PD %s, %s", hiY, hi)
			g.p("VMULPD Z4, %s, %s", lo, lo)
			g.p("VMULPD Z4, %s, %s", hi, hi)
			g.p("VCVTPD2DQ %s, %s", lo, loY)
			g.p("VCVTPD2DQ %s, %s", hi, hiY)
			g.p("VINSERTI64X4 $1, %s, %s, %s", hiY, lo, lo)
			g.p("VPMINSD Z27, %s, %s", lo, lo)
			g.p("VPMAXSD Z26, %s, %s", lo, lo) // c of channels 16h..16h+15
		}
		// Σ c over the block.
		g.p("VPADDD Z8, Z6, Z10")
		for _, sh := range []string{"VSHUFI32X4 $0x4e, Z10, Z10, Z11", "VSHUFI32X4 $0xb1, Z10, Z10, Z11", "VPSHUFD $0x4e, Z10, Z11", "VPSHUFD $0xb1, Z10, Z11"} {
			g.p("%s", sh)
			g.p("VPADDD Z11, Z10, Z10")
		}
		g.p("VMOVD X10, %d(R9)", 4*b)
		// q1, q2 of both halves, narrowed: Z12 = q1 of channels 0-31, then q2.
		for h, c := range []string{"Z6", "Z8"} {
			q1, q2 := fmt.Sprintf("Z%d", 14+2*h), fmt.Sprintf("Z%d", 15+2*h)
			g.p("VPADDD Z25, %s, %s", c, q1)
			g.p("VPMULLD Z24, %s, %s", q1, q1)
			g.p("VPSRLD $24, %s, %s", q1, q1)
			g.p("VPSUBD Z23, %s, %s", q1, q1)
			g.p("VPMULLD Z22, %s, %s", q1, q2)
			g.p("VPSUBD %s, %s, %s", q2, c, q2)
		}
		g.p("VPMOVDB Z14, X12")
		g.p("VPMOVDB Z16, X13")
		g.p("VINSERTI128 $1, X13, Y12, Y12")
		g.p("VPMOVDB Z15, X13")
		g.p("VPMOVDB Z17, X11")
		g.p("VINSERTI128 $1, X11, Y13, Y13")
		g.p("VINSERTI64X4 $1, Y13, Z12, Z12")
		for t := range 2 {
			g.p("VPERMB Z12, Z%d, Z14", 20+t)
			for lane := range 3 {
				src := "X14"
				if lane > 0 {
					g.p("VEXTRACTI32X4 $%d, Z14, X15", lane)
					src = "X15"
				}
				for k := range 4 {
					o := 4*lane + k // dword o: word o/3, pass o%3
					if o >= 9 {
						break
					}
					v := 3*b + o/3
					at := 384*(v/16) + 192*t + 64*(o%3) + 4*(v%16)
					if k == 0 {
						g.p("VMOVD %s, %d(DI)", src, at)
					} else {
						g.p("VPEXTRD $%d, %s, %d(DI)", k, src, at)
					}
				}
			}
		}
	}
	g.p("ADDQ $2048, SI")
	g.p("ADDQ $%d, DI", 1152)
	g.p("ADDQ $192, R8")
	g.p("ADDQ $64, R9")
	g.p("DECQ CX")
	g.p("JNE %s_loop", name)
	g.label(name + "_done")
	g.p("VZEROUPPER")
	g.p("RET")
}

// int3IConsts returns int3VNNI's constant vectors as 64-byte rows: the
// VPMULTISHIFTQB controls of passes 0 and 1 (fields 0-3 and 4-7 of each
// word: a byte of dword lane l takes the qword's bits from 32(l mod 2) +
// the field's offset), then per zmm i of a chunk (words 16i..16i+15, word
// j = (i + l) mod 3 of its block) the controls of pass 2 (fields 8 and 9,
// then bit 15 and bit 31 shifted up to bit j), the masks of pass 2 (7, 7,
// 1<<j, 1<<j), and the permutation that gives lane l its group's scale,
// (16i + l)/12.
func int3IConsts() [][64]byte {
	var rows [][64]byte
	shift := func(f int) int { r := f % 10; return 3*(r/2) + 16*(r%2) }
	for pass := range 2 {
		var r [64]byte
		for l := range 16 {
			for e := range 4 {
				r[4*l+e] = byte(32*(l%2) + shift(4*pass+e))
			}
		}
		rows = append(rows, r)
	}
	for i := range 3 {
		var ctl, mask, perm [64]byte
		for l := range 16 {
			j := (i + l) % 3
			for e, c := range [4]int{shift(8), shift(9), 15 - j, 31 - j} {
				ctl[4*l+e] = byte(32*(l%2) + c)
			}
			mask[4*l], mask[4*l+1], mask[4*l+2], mask[4*l+3] = 7, 7, 1<<j, 1<<j
			perm[4*l] = byte((16*i + l) / 12)
		}
		rows = append(rows, ctl, mask, perm)
	}
	return rows
}

// kernelInt3VNNI: per chunk of 512 channels (48 words, 3 zmm) and row c,
// each zmm's words widened to 12 bytes by three VPMULTISHIFTQB + masks
// (pass p's byte e of lane l is the code, or channel 30's or 31's code bit
// j moved to bit j, of word 16i + l), D = 254·D1 + D2 exact from six
// VPDPBUSD with the token's two code terms, acc_c += float(D)·(s·sx) with
// s the lane's group scale (VPERMD of the chunk's 4) and sx its block's,
// and the chunk's 4 lanes z·X̂ added in an xmm.
func (g *gen) kernelInt3VNNI(nr int) {
	name := fmt.Sprintf("int3VNNI_1x%d", nr)
	g.intTilePrologue(name, nr)
	g.p("VMOVDQU32 int3IConst<>+0(SB), Z8")
	g.p("VMOVDQU32 int3IConst<>+64(SB), Z9")
	for i := range 3 {
		g.p("VMOVDQU32 int3IConst<>+%d(SB), Z%d", 128+192*i, 10+i)
		g.p("VMOVDQU32 int3IConst<>+%d(SB), Z%d", 192+192*i, 13+i)
		g.p("VMOVDQU32 int3IConst<>+%d(SB), Z%d", 256+192*i, 18+i)
	}
	g.p("MOVL $0x07070707, AX")
	g.p("VPBROADCASTD AX, Z16")
	g.p("MOVL $%d, AX", int4XRatio)
	g.p("VPBROADCASTD AX, Z17")
	g.p("XORQ AX, AX")
	g.p("MOVQ pz+56(FP), DX")
	g.p("MOVQ ps+64(FP), BX")
	g.p("TESTQ CX, CX")
	g.p("JEQ %s_reduce", name)
	g.loop(name + "_loop")
	for off := 0; off < nr*192; off += 64 {
		g.p("PREFETCHT0 %d(R8)", off)
	}
	g.p("ADDQ $%d, R8", nr*192)
	for c := range nr {
		g.p("VMOVUPS %d(DX), Z28", 32*c) // the row's 4 scales, 4 zeros
		for i := range 3 {
			g.p("VMOVDQU32 %d(%s)(AX*1), Z21", 64*i, wrows[c])
			g.p("VPMULTISHIFTQB Z21, Z8, Z22")
			g.p("VPANDD Z16, Z22, Z22")
			g.p("VPMULTISHIFTQB Z21, Z9, Z23")
			g.p("VPANDD Z16, Z23, Z23")
			g.p("VPMULTISHIFTQB Z21, Z%d, Z24", 10+i)
			g.p("VPANDD Z%d, Z24, Z24", 13+i)
			g.p("VPXORD Z25, Z25, Z25")
			// x codes at 384i + 192t + 64p of the chunk's 1152 bytes.
			for t := range 2 {
				for p, r := range []string{"Z22", "Z23", "Z24"} {
					g.p("VPDPBUSD %d(SI), %s, Z25", 384*i+192*t+64*p, r)
				}
				if t == 0 {
					g.p("VPMULLD Z17, Z25, Z25")
				}
			}
			g.p("VCVTDQ2PS Z25, Z25")
			g.p("VPERMD Z28, Z%d, Z26", 18+i) // s of the lane's group
			g.p("VMULPS %d(R9), Z26, Z26", 64*i)
			g.p("VMULPS Z26, Z25, Z25")
			g.p("VADDPS Z25, Z%d, Z%d", c, c)
		}
		g.p("VMOVUPS %d(DX), X29", 32*c+16) // z
		g.p("VMULPS (R10), X29, X29")
		g.p("VADDPS X29, X%d, X%d", 4+c, 4+c)
	}
	g.p("ADDQ $192, AX")
	g.p("ADDQ $1152, SI")
	g.p("ADDQ BX, DX")
	g.p("ADDQ $192, R9")
	g.p("ADDQ $16, R10")
	g.p("CMPQ AX, CX")
	g.p("JLT %s_loop", name)
	g.label(name + "_reduce")
	g.p("MOVQ dst+48(FP), DI")
	for c := range nr {
		a, z := c, 4+c
		g.hsum512(a)
		g.p("VMOVHLPS X%d, X%d, X30", z, z) // (z0·X0 + z2·X2) + (z1·X1 + z3·X3)
		g.p("VADDPS X30, X%d, X%d", z, z)
		g.p("VMOVSHDUP X%d, X30", z)
		g.p("VADDSS X30, X%d, X%d", z, z)
		g.p("VADDSS X%d, X%d, X%d", z, a, a)
		g.p("VMOVSS X%d, %d(DI)", a, 4*c)
	}
	g.p("VZEROUPPER")
	g.p("RET")
}

const header = "// Code generated by gen_dot.go; DO NOT EDIT.\n\n"

func main() {
	var asm gen
	asm.s.WriteString(header)
	asm.s.WriteString("//go:build !purego\n\n#include \"textflag.h\"\n")
	// int3's constants: the gather index 3l, and the permutations that
	// spread a row's 4 scales and 4 zeros of a chunk over the lanes l/4.
	for l := range 16 {
		fmt.Fprintf(&asm.s, "DATA int3Const<>+%d(SB)/4, $%d\n", 4*l, 3*l)
	}
	for l := range 16 {
		fmt.Fprintf(&asm.s, "DATA int3Const<>+%d(SB)/4, $%d\n", 64+4*l, l/4)
	}
	for l := range 16 {
		fmt.Fprintf(&asm.s, "DATA int3Const<>+%d(SB)/4, $%d\n", 128+4*l, 4+l/4)
	}
	asm.s.WriteString("GLOBL int3Const<>(SB), RODATA|NOPTR, $192\n")
	// int4QuantXAVX512's permutation: 16 channels (two blocks of 8) into
	// the tiles' byte order.
	for i, ch := range []int{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15} {
		fmt.Fprintf(&asm.s, "DATA int4QConst<>+%d(SB)/4, $%d\n", 4*i, ch)
	}
	asm.s.WriteString("GLOBL int4QConst<>(SB), RODATA|NOPTR, $64\n")
	for r, row := range int3IConsts() {
		for q := range 8 {
			var v uint64
			for b := range 8 {
				v |= uint64(row[8*q+b]) << (8 * b)
			}
			fmt.Fprintf(&asm.s, "DATA int3IConst<>+%d(SB)/8, $0x%016x\n", 64*r+8*q, v)
		}
	}
	fmt.Fprintf(&asm.s, "GLOBL int3IConst<>(SB), RODATA|NOPTR, $%d\n", 64*len(int3IConsts()))
	for t, row := range int3QPerm() {
		for q := range 8 {
			var v uint64
			for b := range 8 {
				v |= uint64(row[8*q+b]) << (8 * b)
			}
			fmt.Fprintf(&asm.s, "DATA int3QConst<>+%d(SB)/8, $0x%016x\n", 64*t+8*q, v)
		}
	}
	asm.s.WriteString("GLOBL int3QConst<>(SB), RODATA|NOPTR, $128\n")
	var decl strings.Builder
	decl.WriteString(header)
	decl.WriteString("//go:build !purego\n\npackage cpu\n\nimport \"unsafe\"\n\n")
	declare := func(name string) {
		fmt.Fprintf(&decl, "//go:noescape\nfunc %s(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)\n\n", name)
	}
	for _, f := range formats {
		for _, t := range tiles512 {
			asm.kernel512(f, t[0], t[1])
			declare(funcName(f, t[0], t[1], "AVX512"))
		}
		if f.name == "F32" {
			asm.kernel512pf(f, 4, 4, false)
			declare(funcName(f, 4, 4, "AVX512") + cachedSuffix)
		}
		for _, t := range tiles256 {
			asm.kernel256(f, t[1])
			declare(funcName(f, t[0], t[1], "AVX2"))
		}
	}
	for _, f := range wqformats {
		for _, t := range tiles512 {
			asm.kernelWQ512(f, t[0], t[1])
			declare(funcName(wfmt{name: f.name}, t[0], t[1], "AVX512"))
		}
		for _, t := range tiles256 {
			asm.kernelWQ256(f, t[1])
			declare(funcName(wfmt{name: f.name}, t[0], t[1], "AVX2"))
		}
	}
	for _, nr := range []int{1, 4} {
		asm.kernelWQ3_512(nr)
		declare(funcName(wfmt{name: "WQ3G128"}, 1, nr, "AVX512"))
	}
	for _, f := range formats[1:] {
		asm.widen512(f)
		fmt.Fprintf(&decl, "//go:noescape\nfunc widen%sAVX512(dst *float32, w unsafe.Pointer, k16 int, sc *float32, ss uintptr)\n\n", f.name)
	}
	decl.WriteString("// asmWidens lists the widening kernels by tileFormats name.\nvar asmWidens = map[string]widenFunc{\n")
	for _, f := range formats[1:] {
		fmt.Fprintf(&decl, "\t%q: widen%sAVX512,\n", f.name, f.name)
	}
	decl.WriteString("}\n\n")
	for _, e := range []intElem{intInt4, intInt8} {
		for _, nr := range []int{1, 4} {
			asm.kernelInt4VNNI(e, nr)
			fmt.Fprintf(&decl, "//go:noescape\nfunc %sVNNI_1x%d(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)\n\n", e.name, nr)
		}
		asm.kernelInt4VNNI4x4(e)
		fmt.Fprintf(&decl, "//go:noescape\nfunc %sVNNI_4x4(xq *int8, xs uintptr, sx *float32, xsum *float32, ss uintptr, w unsafe.Pointer, ws uintptr, groups int, dst *float32, ds uintptr, pz *float32, ps uintptr)\n\n", e.name)
	}
	asm.kernelInt4AVX2()
	asm.kernelInt4Quant()
	asm.kernelInt3Quant()
	decl.WriteString("//go:noescape\nfunc int3QuantXVBMI(x *float32, xq *int8, sxw *float32, cs *int32, chunks int)\n\n")
	for _, nr := range []int{1, 4} {
		asm.kernelInt3VNNI(nr)
		fmt.Fprintf(&decl, "//go:noescape\nfunc int3VNNI_1x%d(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)\n\n", nr)
	}
	decl.WriteString("//go:noescape\nfunc int4QuantXAVX512(x *float32, xq *int8, sx *float32, cs *int32, groups int)\n\n")
	decl.WriteString("//go:noescape\nfunc int4AVX2_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)\n\n")
	// The dispatch table: kernels by level, format and tile.
	decl.WriteString("// asmDots lists the generated tiles by level, format and (MR, NR).\nvar asmDots = []asmDot{\n")
	for _, f := range formats {
		for _, t := range tiles512 {
			fmt.Fprintf(&decl, "\t{avx512: true, format: %q, mr: %d, nr: %d, fn: %s},\n", f.name, t[0], t[1], funcName(f, t[0], t[1], "AVX512"))
		}
		if f.name == "F32" {
			fmt.Fprintf(&decl, "\t{avx512: true, format: %q, mr: 4, nr: 4, cached: true, fn: %s},\n", f.name, funcName(f, 4, 4, "AVX512")+cachedSuffix)
		}
		for _, t := range tiles256 {
			fmt.Fprintf(&decl, "\t{avx512: false, format: %q, mr: %d, nr: %d, fn: %s},\n", f.name, t[0], t[1], funcName(f, t[0], t[1], "AVX2"))
		}
	}
	for _, f := range wqformats {
		for _, t := range tiles512 {
			fmt.Fprintf(&decl, "\t{avx512: true, format: %q, mr: %d, nr: %d, fn: %s},\n", f.name, t[0], t[1], funcName(wfmt{name: f.name}, t[0], t[1], "AVX512"))
		}
		for _, t := range tiles256 {
			fmt.Fprintf(&decl, "\t{avx512: false, format: %q, mr: %d, nr: %d, fn: %s},\n", f.name, t[0], t[1], funcName(wfmt{name: f.name}, t[0], t[1], "AVX2"))
		}
	}
	for _, nr := range []int{1, 4} {
		fmt.Fprintf(&decl, "\t{avx512: true, format: %q, mr: 1, nr: %d, fn: %s},\n", "WQ3G128", nr, funcName(wfmt{name: "WQ3G128"}, 1, nr, "AVX512"))
	}
	decl.WriteString("}\n")
	src, err := format.Source([]byte(decl.String()))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("dot_amd64.s", asm.s.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("dot_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}

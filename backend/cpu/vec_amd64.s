//go:build !purego

#include "textflag.h"

// Elementwise float32 kernels of ops.go (AVX2, 8 lanes; used at the AVX2
// and AVX-512 levels). Each computes exactly what its pure-Go reference in
// vec.go computes, operation for operation (no fused multiply-add), so the
// levels agree bit for bit. n is a multiple of 8; the callers do the rest.

// The constants of expNeg (vec.go): clamp bounds, log2(e), the round-to-
// integer magic 1.5·2^23, Cody-Waite ln2 = c1 + c2, Cephes expf's
// polynomial p0..p5, and 1.
DATA vecConst<>+0(SB)/4, $0xc2ae0000  // -87
DATA vecConst<>+4(SB)/4, $0x42b00000  // 88
DATA vecConst<>+8(SB)/4, $0x3fb8aa3b  // log2(e)
DATA vecConst<>+12(SB)/4, $0x4b400000 // 1.5·2^23
DATA vecConst<>+16(SB)/4, $0x3f318000 // c1 = 0.693359375
DATA vecConst<>+20(SB)/4, $0xb95e8083 // c2 = -2.12194440e-4
DATA vecConst<>+24(SB)/4, $0x39506967 // p0
DATA vecConst<>+28(SB)/4, $0x3ab743ce // p1
DATA vecConst<>+32(SB)/4, $0x3c088908 // p2
DATA vecConst<>+36(SB)/4, $0x3d2aa9c1 // p3
DATA vecConst<>+40(SB)/4, $0x3e2aaaaa // p4
DATA vecConst<>+44(SB)/4, $0x3f000000 // p5
DATA vecConst<>+48(SB)/4, $0x3f800000 // 1
DATA vecConst<>+52(SB)/4, $0x80000000 // sign bit
DATA vecConst<>+56(SB)/4, $127        // exponent bias
GLOBL vecConst<>(SB), RODATA|NOPTR, $60

// func addAVX2(dst, a, b *float32, n int)
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ AX, AX
add_loop:
	CMPQ AX, CX
	JGE add_done
	VMOVUPS (SI)(AX*4), Y0
	VADDPS (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP add_loop
add_done:
	VZEROUPPER
	RET

// func scaleMulAVX2(dst, x, w *float32, n int, r float32)
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS r+32(FP), Y1
	XORQ AX, AX
sm_loop:
	CMPQ AX, CX
	JGE sm_done
	VMULPS (SI)(AX*4), Y1, Y0
	VMULPS (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP sm_loop
sm_done:
	VZEROUPPER
	RET

// func ropeAVX2(lo, hi, cos, sin *float32, n int)
TEXT ·ropeAVX2(SB), NOSPLIT, $0-40
	MOVQ lo+0(FP), DI
	MOVQ hi+8(FP), SI
	MOVQ cos+16(FP), DX
	MOVQ sin+24(FP), BX
	MOVQ n+32(FP), CX
	XORQ AX, AX
rope_loop:
	CMPQ AX, CX
	JGE rope_done
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS (SI)(AX*4), Y1
	VMOVUPS (DX)(AX*4), Y2
	VMOVUPS (BX)(AX*4), Y3
	VMULPS Y2, Y0, Y4
	VMULPS Y3, Y1, Y5
	VSUBPS Y5, Y4, Y4
	VMULPS Y2, Y1, Y6
	VMULPS Y3, Y0, Y7
	VADDPS Y7, Y6, Y6
	VMOVUPS Y4, (DI)(AX*4)
	VMOVUPS Y6, (SI)(AX*4)
	ADDQ $8, AX
	JMP rope_loop
rope_done:
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, u *float32, n int)
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS vecConst<>+0(SB), Y8   // lo
	VBROADCASTSS vecConst<>+4(SB), Y9   // hi
	VBROADCASTSS vecConst<>+8(SB), Y10  // log2e
	VBROADCASTSS vecConst<>+12(SB), Y11 // magic
	VBROADCASTSS vecConst<>+48(SB), Y12 // 1
	VBROADCASTSS vecConst<>+52(SB), Y13 // sign
	VPBROADCASTD vecConst<>+56(SB), Y14 // 127
	XORQ AX, AX
sw_loop:
	CMPQ AX, CX
	JGE sw_done
	VMOVUPS (SI)(AX*4), Y0             // g
	VXORPS Y13, Y0, Y1                 // x = -g
	VMAXPS Y8, Y1, Y1                  // x = max(x, lo)
	VMINPS Y9, Y1, Y1                  // x = min(x, hi)
	VMULPS Y10, Y1, Y2                 // t = x·log2e
	VADDPS Y11, Y2, Y2                 // n = (t + magic) - magic
	VSUBPS Y11, Y2, Y2
	VBROADCASTSS vecConst<>+16(SB), Y3 // r = (x - n·c1) - n·c2
	VMULPS Y2, Y3, Y3
	VSUBPS Y3, Y1, Y1
	VBROADCASTSS vecConst<>+20(SB), Y3
	VMULPS Y2, Y3, Y3
	VSUBPS Y3, Y1, Y1
	VBROADCASTSS vecConst<>+24(SB), Y4 // p = p0
	VMULPS Y1, Y4, Y4                  // p = p·r + p1
	VBROADCASTSS vecConst<>+28(SB), Y5
	VADDPS Y5, Y4, Y4
	VMULPS Y1, Y4, Y4
	VBROADCASTSS vecConst<>+32(SB), Y5
	VADDPS Y5, Y4, Y4
	VMULPS Y1, Y4, Y4
	VBROADCASTSS vecConst<>+36(SB), Y5
	VADDPS Y5, Y4, Y4
	VMULPS Y1, Y4, Y4
	VBROADCASTSS vecConst<>+40(SB), Y5
	VADDPS Y5, Y4, Y4
	VMULPS Y1, Y4, Y4
	VBROADCASTSS vecConst<>+44(SB), Y5
	VADDPS Y5, Y4, Y4
	VMULPS Y1, Y4, Y4                  // y = ((p·r)·r + r) + 1
	VMULPS Y1, Y4, Y4
	VADDPS Y1, Y4, Y4
	VADDPS Y12, Y4, Y4
	VCVTPS2DQ Y2, Y2                   // y·2^n
	VPADDD Y14, Y2, Y2
	VPSLLD $23, Y2, Y2
	VMULPS Y2, Y4, Y4
	VADDPS Y12, Y4, Y4                 // silu = g / (1 + e)
	VDIVPS Y4, Y0, Y0
	VMULPS (DX)(AX*4), Y0, Y0          // · u
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP sw_loop
sw_done:
	VZEROUPPER
	RET

// func sumSquaresAVX2(x *float32, n int, sc *[32]float32)
// Kahan-compensated sums of squares in 16 float32 lanes (lane l: elements
// l, l+16, ...): sc[l] the sum, sc[16+l] its compensation. n is a multiple
// of 16.
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ sc+16(FP), DI
	VXORPS Y0, Y0, Y0 // s, lanes 0-7
	VXORPS Y1, Y1, Y1 // s, lanes 8-15
	VXORPS Y2, Y2, Y2 // c, lanes 0-7
	VXORPS Y3, Y3, Y3 // c, lanes 8-15
	XORQ AX, AX
ss_loop:
	CMPQ AX, CX
	JGE ss_done
	VMOVUPS (SI)(AX*4), Y4
	VMULPS Y4, Y4, Y4 // x·x
	VSUBPS Y2, Y4, Y4 // y = x·x - c
	VADDPS Y4, Y0, Y5 // t = s + y
	VSUBPS Y0, Y5, Y6 // c = (t - s) - y
	VSUBPS Y4, Y6, Y2
	VMOVAPS Y5, Y0    // s = t
	VMOVUPS 32(SI)(AX*4), Y4
	VMULPS Y4, Y4, Y4
	VSUBPS Y3, Y4, Y4
	VADDPS Y4, Y1, Y5
	VSUBPS Y1, Y5, Y6
	VSUBPS Y4, Y6, Y3
	VMOVAPS Y5, Y1
	ADDQ $16, AX
	JMP ss_loop
ss_done:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

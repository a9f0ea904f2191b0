//go:build !purego

#include "textflag.h"

// Elementwise float32 kernels of ops.go (AVX2, 8 lanes; used at the AVX2
// and AVX-512 levels). Each computes exactly what its pure-Go reference in
// vec.go computes, operation for operation (no fused multiply-add), so the
// levels agree bit for bit. n is a multiple of 8; the callers do the rest.

// The constants of siluF64 (vec.go): clamp bounds, log2(e), the round-to-
// integer magic 1.5·2^52, fdlibm's ln2 = ln2hi + ln2lo (n·ln2hi exact), the
// Taylor coefficients 1/k! for k = 2..9, 1, the sign bit and the exponent
// bias; then geluTanhF64's two.
DATA vecConst<>+0(SB)/8, $0xc086200000000000   // -708
DATA vecConst<>+8(SB)/8, $0x4086200000000000   // 708
DATA vecConst<>+16(SB)/8, $0x3ff71547652b82fe  // log2(e)
DATA vecConst<>+24(SB)/8, $0x4338000000000000  // 1.5·2^52
DATA vecConst<>+32(SB)/8, $0x3fe62e42fee00000  // ln2hi
DATA vecConst<>+40(SB)/8, $0x3dea39ef35793c76  // ln2lo
DATA vecConst<>+48(SB)/8, $0x3ec71de3a556c734  // 1/9!
DATA vecConst<>+56(SB)/8, $0x3efa01a01a01a01a  // 1/8!
DATA vecConst<>+64(SB)/8, $0x3f2a01a01a01a01a  // 1/7!
DATA vecConst<>+72(SB)/8, $0x3f56c16c16c16c17  // 1/6!
DATA vecConst<>+80(SB)/8, $0x3f81111111111111  // 1/5!
DATA vecConst<>+88(SB)/8, $0x3fa5555555555555  // 1/4!
DATA vecConst<>+96(SB)/8, $0x3fc5555555555555  // 1/3!
DATA vecConst<>+104(SB)/8, $0x3fe0000000000000 // 1/2!
DATA vecConst<>+112(SB)/8, $0x3ff0000000000000 // 1
DATA vecConst<>+120(SB)/8, $0x8000000000000000 // sign bit
DATA vecConst<>+128(SB)/8, $1023               // exponent bias
DATA vecConst<>+136(SB)/8, $0x3fa6e4e26d4801f7 // geluCubic 0.044715
DATA vecConst<>+144(SB)/8, $0xbff9884533d43651 // geluNegK −2·√(2/π)
GLOBL vecConst<>(SB), RODATA|NOPTR, $152

// func addSIMD(dst, a, b *float32, n int)
TEXT ·addSIMD(SB), NOSPLIT, $0-32
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

// func scaleMulSIMD(dst, x, w *float32, n int, r float32)
TEXT ·scaleMulSIMD(SB), NOSPLIT, $0-36
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

// func ropeSIMD(lo, hi, cos, sin *float32, n int)
TEXT ·ropeSIMD(SB), NOSPLIT, $0-40
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

// func swigluSIMD(dst, gate, u *float32, n int)
// silu in float64, 4 lanes at a time (siluF64), rounded once to float32,
// times u in float32.
TEXT ·swigluSIMD(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSD vecConst<>+0(SB), Y8   // lo
	VBROADCASTSD vecConst<>+8(SB), Y9   // hi
	VBROADCASTSD vecConst<>+16(SB), Y10 // log2e
	VBROADCASTSD vecConst<>+24(SB), Y11 // magic
	VBROADCASTSD vecConst<>+112(SB), Y12 // 1
	VBROADCASTSD vecConst<>+120(SB), Y13 // sign
	VPBROADCASTQ vecConst<>+128(SB), Y14 // 1023
	XORQ AX, AX
sw_loop:
	CMPQ AX, CX
	JGE sw_done
	VCVTPS2PD (SI)(AX*4), Y0            // g
	VXORPD Y13, Y0, Y1                  // x = -g
	VMAXPD Y8, Y1, Y1                   // x = max(x, lo)
	VMINPD Y9, Y1, Y1                   // x = min(x, hi)
	VMULPD Y10, Y1, Y2                  // n = (x·log2e + magic) - magic
	VADDPD Y11, Y2, Y2
	VSUBPD Y11, Y2, Y2
	VBROADCASTSD vecConst<>+32(SB), Y3  // r = (x - n·ln2hi) - n·ln2lo
	VMULPD Y2, Y3, Y3
	VSUBPD Y3, Y1, Y1
	VBROADCASTSD vecConst<>+40(SB), Y3
	VMULPD Y2, Y3, Y3
	VSUBPD Y3, Y1, Y1
	VBROADCASTSD vecConst<>+48(SB), Y4  // p = 1/9!, then p = p·r + 1/k!
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+56(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+64(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+72(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+80(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+88(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+96(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+104(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4                   // y = ((p·r)·r + r) + 1
	VMULPD Y1, Y4, Y4
	VADDPD Y1, Y4, Y4
	VADDPD Y12, Y4, Y4
	VCVTPD2DQY Y2, X6                   // e = y·2^n
	VPMOVSXDQ X6, Y6
	VPADDQ Y14, Y6, Y6
	VPSLLQ $52, Y6, Y6
	VMULPD Y6, Y4, Y4
	VADDPD Y12, Y4, Y4                  // silu = g / (e + 1)
	VDIVPD Y4, Y0, Y0
	VCVTPD2PSY Y0, X0                   // rounded once to float32
	VMULPS (DX)(AX*4), X0, X0           // · u
	VMOVUPS X0, (DI)(AX*4)
	ADDQ $4, AX
	JMP sw_loop
sw_done:
	VZEROUPPER
	RET

// func gegluSIMD(dst, gate, u *float32, n int)
// gelu_tanh in float64, 4 lanes at a time (geluTanhF64): swigluSIMD with
// x = geluNegK·(g + geluCubic·((g·g)·g)) in place of x = −g.
TEXT ·gegluSIMD(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSD vecConst<>+0(SB), Y8   // lo
	VBROADCASTSD vecConst<>+8(SB), Y9   // hi
	VBROADCASTSD vecConst<>+16(SB), Y10 // log2e
	VBROADCASTSD vecConst<>+24(SB), Y11 // magic
	VBROADCASTSD vecConst<>+112(SB), Y12 // 1
	VPBROADCASTQ vecConst<>+128(SB), Y14 // 1023
	XORQ AX, AX
ge_loop:
	CMPQ AX, CX
	JGE ge_done
	VCVTPS2PD (SI)(AX*4), Y0            // g
	VMULPD Y0, Y0, Y1                   // x = negK·(g + cubic·((g·g)·g))
	VMULPD Y0, Y1, Y1
	VBROADCASTSD vecConst<>+136(SB), Y3
	VMULPD Y3, Y1, Y1
	VADDPD Y0, Y1, Y1
	VBROADCASTSD vecConst<>+144(SB), Y3
	VMULPD Y3, Y1, Y1
	VMAXPD Y8, Y1, Y1                   // x = max(x, lo)
	VMINPD Y9, Y1, Y1                   // x = min(x, hi)
	VMULPD Y10, Y1, Y2                  // n = (x·log2e + magic) - magic
	VADDPD Y11, Y2, Y2
	VSUBPD Y11, Y2, Y2
	VBROADCASTSD vecConst<>+32(SB), Y3  // r = (x - n·ln2hi) - n·ln2lo
	VMULPD Y2, Y3, Y3
	VSUBPD Y3, Y1, Y1
	VBROADCASTSD vecConst<>+40(SB), Y3
	VMULPD Y2, Y3, Y3
	VSUBPD Y3, Y1, Y1
	VBROADCASTSD vecConst<>+48(SB), Y4  // p = 1/9!, then p = p·r + 1/k!
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+56(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+64(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+72(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+80(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+88(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+96(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4
	VBROADCASTSD vecConst<>+104(SB), Y5
	VADDPD Y5, Y4, Y4
	VMULPD Y1, Y4, Y4                   // y = ((p·r)·r + r) + 1
	VMULPD Y1, Y4, Y4
	VADDPD Y1, Y4, Y4
	VADDPD Y12, Y4, Y4
	VCVTPD2DQY Y2, X6                   // e = y·2^n
	VPMOVSXDQ X6, Y6
	VPADDQ Y14, Y6, Y6
	VPSLLQ $52, Y6, Y6
	VMULPD Y6, Y4, Y4
	VADDPD Y12, Y4, Y4                  // gelu = g / (e + 1)
	VDIVPD Y4, Y0, Y0
	VCVTPD2PSY Y0, X0                   // rounded once to float32
	VMULPS (DX)(AX*4), X0, X0           // · u
	VMOVUPS X0, (DI)(AX*4)
	ADDQ $4, AX
	JMP ge_loop
ge_done:
	VZEROUPPER
	RET

// func swigluAVX512(dst, gate, u *float32, n int)
// silu in float64, 16 lanes a loop (two zmm streams of 8), the same
// operations per lane as swigluSIMD (so the same bits); n is a multiple of 16.
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSD vecConst<>+0(SB), Z31 // lo
	VBROADCASTSD vecConst<>+8(SB), Z30 // hi
	VBROADCASTSD vecConst<>+16(SB), Z29 // log2e
	VBROADCASTSD vecConst<>+24(SB), Z28 // magic
	VBROADCASTSD vecConst<>+112(SB), Z27 // 1
	VBROADCASTSD vecConst<>+120(SB), Z26 // sign
	VBROADCASTSD vecConst<>+32(SB), Z24 // ln2hi
	VBROADCASTSD vecConst<>+40(SB), Z23 // ln2lo
	VBROADCASTSD vecConst<>+48(SB), Z22 // 1/9!
	VBROADCASTSD vecConst<>+56(SB), Z21 // 1/8!
	VBROADCASTSD vecConst<>+64(SB), Z20 // 1/7!
	VBROADCASTSD vecConst<>+72(SB), Z19 // 1/6!
	VBROADCASTSD vecConst<>+80(SB), Z18 // 1/5!
	VBROADCASTSD vecConst<>+88(SB), Z17 // 1/4!
	VBROADCASTSD vecConst<>+96(SB), Z16 // 1/3!
	VBROADCASTSD vecConst<>+104(SB), Z15 // 1/2!
	VBROADCASTSD vecConst<>+136(SB), Z14 // geluCubic
	VBROADCASTSD vecConst<>+144(SB), Z13 // geluNegK
	VPBROADCASTQ vecConst<>+128(SB), Z25 // 1023
	XORQ AX, AX
swigluavx512_loop:
	CMPQ AX, CX
	JGE swigluavx512_done
	VCVTPS2PD 0(SI)(AX*4), Z0
	VCVTPS2PD 32(SI)(AX*4), Z6
	VXORPD Z26, Z0, Z1
	VXORPD Z26, Z6, Z7
	VMAXPD Z31, Z1, Z1
	VMAXPD Z31, Z7, Z7
	VMINPD Z30, Z1, Z1
	VMINPD Z30, Z7, Z7
	VMULPD Z29, Z1, Z2
	VMULPD Z29, Z7, Z8
	VADDPD Z28, Z2, Z2
	VADDPD Z28, Z8, Z8
	VSUBPD Z28, Z2, Z2
	VSUBPD Z28, Z8, Z8
	VMULPD Z2, Z24, Z3
	VMULPD Z8, Z24, Z9
	VSUBPD Z3, Z1, Z1
	VSUBPD Z9, Z7, Z7
	VMULPD Z2, Z23, Z3
	VMULPD Z8, Z23, Z9
	VSUBPD Z3, Z1, Z1
	VSUBPD Z9, Z7, Z7
	VMULPD Z1, Z22, Z4
	VMULPD Z7, Z22, Z10
	VADDPD Z21, Z4, Z4
	VADDPD Z21, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z20, Z4, Z4
	VADDPD Z20, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z19, Z4, Z4
	VADDPD Z19, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z18, Z4, Z4
	VADDPD Z18, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z17, Z4, Z4
	VADDPD Z17, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z16, Z4, Z4
	VADDPD Z16, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z15, Z4, Z4
	VADDPD Z15, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z1, Z4, Z4
	VADDPD Z7, Z10, Z10
	VADDPD Z27, Z4, Z4
	VADDPD Z27, Z10, Z10
	VCVTPD2DQ Z2, Y5
	VCVTPD2DQ Z8, Y11
	VPMOVSXDQ Y5, Z5
	VPMOVSXDQ Y11, Z11
	VPADDQ Z25, Z5, Z5
	VPADDQ Z25, Z11, Z11
	VPSLLQ $52, Z5, Z5
	VPSLLQ $52, Z11, Z11
	VMULPD Z5, Z4, Z4
	VMULPD Z11, Z10, Z10
	VADDPD Z27, Z4, Z4
	VADDPD Z27, Z10, Z10
	VDIVPD Z4, Z0, Z0
	VDIVPD Z10, Z6, Z6
	VCVTPD2PS Z0, Y0
	VCVTPD2PS Z6, Y6
	VMULPS 0(DX)(AX*4), Y0, Y0
	VMULPS 32(DX)(AX*4), Y6, Y6
	VMOVUPS Y0, 0(DI)(AX*4)
	VMOVUPS Y6, 32(DI)(AX*4)
	ADDQ $16, AX
	JMP swigluavx512_loop
swigluavx512_done:
	VZEROUPPER
	RET

// func gegluAVX512(dst, gate, u *float32, n int)
// gelu_tanh in float64, 16 lanes a loop (two zmm streams of 8), the same
// operations per lane as gegluSIMD (so the same bits); n is a multiple of 16.
TEXT ·gegluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSD vecConst<>+0(SB), Z31 // lo
	VBROADCASTSD vecConst<>+8(SB), Z30 // hi
	VBROADCASTSD vecConst<>+16(SB), Z29 // log2e
	VBROADCASTSD vecConst<>+24(SB), Z28 // magic
	VBROADCASTSD vecConst<>+112(SB), Z27 // 1
	VBROADCASTSD vecConst<>+120(SB), Z26 // sign
	VBROADCASTSD vecConst<>+32(SB), Z24 // ln2hi
	VBROADCASTSD vecConst<>+40(SB), Z23 // ln2lo
	VBROADCASTSD vecConst<>+48(SB), Z22 // 1/9!
	VBROADCASTSD vecConst<>+56(SB), Z21 // 1/8!
	VBROADCASTSD vecConst<>+64(SB), Z20 // 1/7!
	VBROADCASTSD vecConst<>+72(SB), Z19 // 1/6!
	VBROADCASTSD vecConst<>+80(SB), Z18 // 1/5!
	VBROADCASTSD vecConst<>+88(SB), Z17 // 1/4!
	VBROADCASTSD vecConst<>+96(SB), Z16 // 1/3!
	VBROADCASTSD vecConst<>+104(SB), Z15 // 1/2!
	VBROADCASTSD vecConst<>+136(SB), Z14 // geluCubic
	VBROADCASTSD vecConst<>+144(SB), Z13 // geluNegK
	VPBROADCASTQ vecConst<>+128(SB), Z25 // 1023
	XORQ AX, AX
gegluavx512_loop:
	CMPQ AX, CX
	JGE gegluavx512_done
	VCVTPS2PD 0(SI)(AX*4), Z0
	VCVTPS2PD 32(SI)(AX*4), Z6
	VMULPD Z0, Z0, Z1
	VMULPD Z6, Z6, Z7
	VMULPD Z0, Z1, Z1
	VMULPD Z6, Z7, Z7
	VMULPD Z14, Z1, Z1
	VMULPD Z14, Z7, Z7
	VADDPD Z0, Z1, Z1
	VADDPD Z6, Z7, Z7
	VMULPD Z13, Z1, Z1
	VMULPD Z13, Z7, Z7
	VMAXPD Z31, Z1, Z1
	VMAXPD Z31, Z7, Z7
	VMINPD Z30, Z1, Z1
	VMINPD Z30, Z7, Z7
	VMULPD Z29, Z1, Z2
	VMULPD Z29, Z7, Z8
	VADDPD Z28, Z2, Z2
	VADDPD Z28, Z8, Z8
	VSUBPD Z28, Z2, Z2
	VSUBPD Z28, Z8, Z8
	VMULPD Z2, Z24, Z3
	VMULPD Z8, Z24, Z9
	VSUBPD Z3, Z1, Z1
	VSUBPD Z9, Z7, Z7
	VMULPD Z2, Z23, Z3
	VMULPD Z8, Z23, Z9
	VSUBPD Z3, Z1, Z1
	VSUBPD Z9, Z7, Z7
	VMULPD Z1, Z22, Z4
	VMULPD Z7, Z22, Z10
	VADDPD Z21, Z4, Z4
	VADDPD Z21, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z20, Z4, Z4
	VADDPD Z20, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z19, Z4, Z4
	VADDPD Z19, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z18, Z4, Z4
	VADDPD Z18, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z17, Z4, Z4
	VADDPD Z17, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z16, Z4, Z4
	VADDPD Z16, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z15, Z4, Z4
	VADDPD Z15, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VMULPD Z1, Z4, Z4
	VMULPD Z7, Z10, Z10
	VADDPD Z1, Z4, Z4
	VADDPD Z7, Z10, Z10
	VADDPD Z27, Z4, Z4
	VADDPD Z27, Z10, Z10
	VCVTPD2DQ Z2, Y5
	VCVTPD2DQ Z8, Y11
	VPMOVSXDQ Y5, Z5
	VPMOVSXDQ Y11, Z11
	VPADDQ Z25, Z5, Z5
	VPADDQ Z25, Z11, Z11
	VPSLLQ $52, Z5, Z5
	VPSLLQ $52, Z11, Z11
	VMULPD Z5, Z4, Z4
	VMULPD Z11, Z10, Z10
	VADDPD Z27, Z4, Z4
	VADDPD Z27, Z10, Z10
	VDIVPD Z4, Z0, Z0
	VDIVPD Z10, Z6, Z6
	VCVTPD2PS Z0, Y0
	VCVTPD2PS Z6, Y6
	VMULPS 0(DX)(AX*4), Y0, Y0
	VMULPS 32(DX)(AX*4), Y6, Y6
	VMOVUPS Y0, 0(DI)(AX*4)
	VMOVUPS Y6, 32(DI)(AX*4)
	ADDQ $16, AX
	JMP gegluavx512_loop
gegluavx512_done:
	VZEROUPPER
	RET

// func sumSquaresSIMD(x *float32, n int, sc *[32]float32)
// Kahan-compensated sums of squares in 16 float32 lanes (lane l: elements
// l, l+16, ...): sc[l] the sum, sc[16+l] its compensation. n is a multiple
// of 16.
TEXT ·sumSquaresSIMD(SB), NOSPLIT, $0-24
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

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

// The AVX-512 kernels of the gated activations: swigluSIMD's and gegluSIMD's
// operations per lane, 8 float64 lanes a zmm, two streams of 8 floats a loop
// (16 elements; n a multiple of 16), every constant in a register:
// Z31 lo, Z30 hi, Z29 log2e, Z28 magic, Z27 1, Z26 the sign bit, Z25 the
// exponent bias, Z24/Z23 ln2 hi/lo, Z22..Z15 1/9!..1/2!, Z14 geluCubic, Z13
// geluNegK (GLU_CONSTS).
#define GLU_CONSTS \
	VBROADCASTSD vecConst<>+0(SB), Z31 \
	VBROADCASTSD vecConst<>+8(SB), Z30 \
	VBROADCASTSD vecConst<>+16(SB), Z29 \
	VBROADCASTSD vecConst<>+24(SB), Z28 \
	VBROADCASTSD vecConst<>+112(SB), Z27 \
	VBROADCASTSD vecConst<>+120(SB), Z26 \
	VBROADCASTSD vecConst<>+32(SB), Z24 \
	VBROADCASTSD vecConst<>+40(SB), Z23 \
	VBROADCASTSD vecConst<>+48(SB), Z22 \
	VBROADCASTSD vecConst<>+56(SB), Z21 \
	VBROADCASTSD vecConst<>+64(SB), Z20 \
	VBROADCASTSD vecConst<>+72(SB), Z19 \
	VBROADCASTSD vecConst<>+80(SB), Z18 \
	VBROADCASTSD vecConst<>+88(SB), Z17 \
	VBROADCASTSD vecConst<>+96(SB), Z16 \
	VBROADCASTSD vecConst<>+104(SB), Z15 \
	VBROADCASTSD vecConst<>+136(SB), Z14 \
	VBROADCASTSD vecConst<>+144(SB), Z13 \
	VPBROADCASTQ vecConst<>+128(SB), Z25

// GLU_DIV2: g / (e^x + 1) in float64 for two streams of 8 lanes (a and b),
// x in Xa/Xb (clamped here), g in Ga/Gb, the results left in Ga/Gb; N, T,
// P, E and YE (E's low half) are scratch. The steps of glu64 (vec.go), each
// product rounded before its add; the streams' instructions alternate so
// that their dependency chains overlap.
#define GLU_DIV2(Ga, Xa, Na, Ta, Pa, Ea, YEa, Gb, Xb, Nb, Tb, Pb, Eb, YEb) \
	VMAXPD Z31, Xa, Xa \
	VMAXPD Z31, Xb, Xb \
	VMINPD Z30, Xa, Xa \
	VMINPD Z30, Xb, Xb \
	VMULPD Z29, Xa, Na \
	VMULPD Z29, Xb, Nb \
	VADDPD Z28, Na, Na \
	VADDPD Z28, Nb, Nb \
	VSUBPD Z28, Na, Na \
	VSUBPD Z28, Nb, Nb \
	VMULPD Na, Z24, Ta \
	VMULPD Nb, Z24, Tb \
	VSUBPD Ta, Xa, Xa \
	VSUBPD Tb, Xb, Xb \
	VMULPD Na, Z23, Ta \
	VMULPD Nb, Z23, Tb \
	VSUBPD Ta, Xa, Xa \
	VSUBPD Tb, Xb, Xb \
	VMULPD Xa, Z22, Pa \
	VMULPD Xb, Z22, Pb \
	VADDPD Z21, Pa, Pa \
	VADDPD Z21, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z20, Pa, Pa \
	VADDPD Z20, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z19, Pa, Pa \
	VADDPD Z19, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z18, Pa, Pa \
	VADDPD Z18, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z17, Pa, Pa \
	VADDPD Z17, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z16, Pa, Pa \
	VADDPD Z16, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Z15, Pa, Pa \
	VADDPD Z15, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VMULPD Xa, Pa, Pa \
	VMULPD Xb, Pb, Pb \
	VADDPD Xa, Pa, Pa \
	VADDPD Xb, Pb, Pb \
	VADDPD Z27, Pa, Pa \
	VADDPD Z27, Pb, Pb \
	VCVTPD2DQ Na, YEa \
	VCVTPD2DQ Nb, YEb \
	VPMOVSXDQ YEa, Ea \
	VPMOVSXDQ YEb, Eb \
	VPADDQ Z25, Ea, Ea \
	VPADDQ Z25, Eb, Eb \
	VPSLLQ $52, Ea, Ea \
	VPSLLQ $52, Eb, Eb \
	VMULPD Ea, Pa, Pa \
	VMULPD Eb, Pb, Pb \
	VADDPD Z27, Pa, Pa \
	VADDPD Z27, Pb, Pb \
	VDIVPD Pa, Ga, Ga \
	VDIVPD Pb, Gb, Gb

// SILU_X: x = −g. GELU_X: x = geluNegK·(g + geluCubic·((g·g)·g)).
#define SILU_X(G, X) \
	VXORPD Z26, G, X
#define GELU_X(G, X) \
	VMULPD G, G, X \
	VMULPD G, X, X \
	VMULPD Z14, X, X \
	VADDPD G, X, X \
	VMULPD Z13, X, X

// GLU_STORE: G rounded once to float32, times u, stored at OFF.
#define GLU_STORE(G, YG, OFF) \
	VCVTPD2PS G, YG \
	VMULPS OFF(DX)(AX*4), YG, YG \
	VMOVUPS YG, OFF(DI)(AX*4)

// func gluAVX512(dst, gate, u *float32, n int, gelu bool)
// silu (gelu false) or gelu_tanh (gelu true) times u, 16 elements a loop
// (see GLU_CONSTS); n a multiple of 16.
TEXT ·gluAVX512(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	MOVBLZX gelu+32(FP), R8
	GLU_CONSTS
	XORQ AX, AX
loop:
	CMPQ AX, CX
	JGE done
	VCVTPS2PD (SI)(AX*4), Z0
	VCVTPS2PD 32(SI)(AX*4), Z6
	TESTQ R8, R8
	JNZ gelux
	SILU_X(Z0, Z1)
	SILU_X(Z6, Z7)
	JMP gludiv
gelux:
	GELU_X(Z0, Z1)
	GELU_X(Z6, Z7)
gludiv:
	GLU_DIV2(Z0, Z1, Z2, Z3, Z4, Z5, Y5, Z6, Z7, Z8, Z9, Z10, Z11, Y11)
	GLU_STORE(Z0, Y0, 0)
	GLU_STORE(Z6, Y6, 32)
	ADDQ $16, AX
	JMP loop
done:
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

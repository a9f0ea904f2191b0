//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// The integer PV with 8-bit weights (AVX-512 VNNI + VBMI; kernels.go's
// pvU8, docs/perf/cpu-attention.md v18). Per 64 channels and four tokens,
// the packed codes of the four tokens are put by VPERMT2B (int4: two
// vectors of 32 bytes per token) or VPERMB (int2: 16 bytes per token,
// gathered into the four 128-bit lanes of one vector) into vectors whose
// 32-bit lane L holds byte L of each token, so that one shift and one mask
// give, in every lane, the four tokens' codes of one channel: int4 lane L
// of P0 & 15 holds channel 2L, of (P0 >> 4) & 15 channel 2L+1 (P1: 32 + the
// same); int2 lane L of (P >> 2m) & 3 channel 4L+m. VPDPBUSD multiplies
// them (signed operand) by the row's four u8 weights (one broadcast dword,
// the unsigned operand) and adds the four products to the lane's int32
// sum: exact while n·255·15 < 2^31 (n <= PVMaxTokens). At the end of each
// 64 channels the sums are put back in channel order (VPERMT2D, and
// VPERMT2Q for int2), converted and added times the row's step to the
// float accumulators.

// u8I4Perm<>: VPERMT2B indexes into [t0 | t1] and [t2 | t3] (32 packed
// bytes per token): vector 0's lane L holds byte L of t0..t3, vector 1's
// byte 16+L. u8I2Perm<>: VPERMB indexes into the gathered 16 bytes of
// t0..t3: lane L holds byte L of each. u8DwIdx<> interleaves the dwords of
// lanes 0..7 (then 8..15) of two vectors; u8QwIdx<> the qwords 0..3 (then
// 4..7).
DATA u8I4Perm<>+0(SB)/8, $0x6141210160402000
DATA u8I4Perm<>+8(SB)/8, $0x6343230362422202
DATA u8I4Perm<>+16(SB)/8, $0x6545250564442404
DATA u8I4Perm<>+24(SB)/8, $0x6747270766462606
DATA u8I4Perm<>+32(SB)/8, $0x6949290968482808
DATA u8I4Perm<>+40(SB)/8, $0x6b4b2b0b6a4a2a0a
DATA u8I4Perm<>+48(SB)/8, $0x6d4d2d0d6c4c2c0c
DATA u8I4Perm<>+56(SB)/8, $0x6f4f2f0f6e4e2e0e
DATA u8I4Perm<>+64(SB)/8, $0x7151311170503010
DATA u8I4Perm<>+72(SB)/8, $0x7353331372523212
DATA u8I4Perm<>+80(SB)/8, $0x7555351574543414
DATA u8I4Perm<>+88(SB)/8, $0x7757371776563616
DATA u8I4Perm<>+96(SB)/8, $0x7959391978583818
DATA u8I4Perm<>+104(SB)/8, $0x7b5b3b1b7a5a3a1a
DATA u8I4Perm<>+112(SB)/8, $0x7d5d3d1d7c5c3c1c
DATA u8I4Perm<>+120(SB)/8, $0x7f5f3f1f7e5e3e1e
GLOBL u8I4Perm<>(SB), RODATA|NOPTR, $128
DATA u8I2Perm<>+0(SB)/8, $0x3121110130201000
DATA u8I2Perm<>+8(SB)/8, $0x3323130332221202
DATA u8I2Perm<>+16(SB)/8, $0x3525150534241404
DATA u8I2Perm<>+24(SB)/8, $0x3727170736261606
DATA u8I2Perm<>+32(SB)/8, $0x3929190938281808
DATA u8I2Perm<>+40(SB)/8, $0x3b2b1b0b3a2a1a0a
DATA u8I2Perm<>+48(SB)/8, $0x3d2d1d0d3c2c1c0c
DATA u8I2Perm<>+56(SB)/8, $0x3f2f1f0f3e2e1e0e
GLOBL u8I2Perm<>(SB), RODATA|NOPTR, $64
DATA u8DwIdx<>+0(SB)/4, $0
DATA u8DwIdx<>+4(SB)/4, $16
DATA u8DwIdx<>+8(SB)/4, $1
DATA u8DwIdx<>+12(SB)/4, $17
DATA u8DwIdx<>+16(SB)/4, $2
DATA u8DwIdx<>+20(SB)/4, $18
DATA u8DwIdx<>+24(SB)/4, $3
DATA u8DwIdx<>+28(SB)/4, $19
DATA u8DwIdx<>+32(SB)/4, $4
DATA u8DwIdx<>+36(SB)/4, $20
DATA u8DwIdx<>+40(SB)/4, $5
DATA u8DwIdx<>+44(SB)/4, $21
DATA u8DwIdx<>+48(SB)/4, $6
DATA u8DwIdx<>+52(SB)/4, $22
DATA u8DwIdx<>+56(SB)/4, $7
DATA u8DwIdx<>+60(SB)/4, $23
DATA u8DwIdx<>+64(SB)/4, $8
DATA u8DwIdx<>+68(SB)/4, $24
DATA u8DwIdx<>+72(SB)/4, $9
DATA u8DwIdx<>+76(SB)/4, $25
DATA u8DwIdx<>+80(SB)/4, $10
DATA u8DwIdx<>+84(SB)/4, $26
DATA u8DwIdx<>+88(SB)/4, $11
DATA u8DwIdx<>+92(SB)/4, $27
DATA u8DwIdx<>+96(SB)/4, $12
DATA u8DwIdx<>+100(SB)/4, $28
DATA u8DwIdx<>+104(SB)/4, $13
DATA u8DwIdx<>+108(SB)/4, $29
DATA u8DwIdx<>+112(SB)/4, $14
DATA u8DwIdx<>+116(SB)/4, $30
DATA u8DwIdx<>+120(SB)/4, $15
DATA u8DwIdx<>+124(SB)/4, $31
GLOBL u8DwIdx<>(SB), RODATA|NOPTR, $128
DATA u8QwIdx<>+0(SB)/8, $0
DATA u8QwIdx<>+8(SB)/8, $8
DATA u8QwIdx<>+16(SB)/8, $1
DATA u8QwIdx<>+24(SB)/8, $9
DATA u8QwIdx<>+32(SB)/8, $2
DATA u8QwIdx<>+40(SB)/8, $10
DATA u8QwIdx<>+48(SB)/8, $3
DATA u8QwIdx<>+56(SB)/8, $11
DATA u8QwIdx<>+64(SB)/8, $4
DATA u8QwIdx<>+72(SB)/8, $12
DATA u8QwIdx<>+80(SB)/8, $5
DATA u8QwIdx<>+88(SB)/8, $13
DATA u8QwIdx<>+96(SB)/8, $6
DATA u8QwIdx<>+104(SB)/8, $14
DATA u8QwIdx<>+112(SB)/8, $7
DATA u8QwIdx<>+120(SB)/8, $15
GLOBL u8QwIdx<>(SB), RODATA|NOPTR, $128

// U8CVT adds four vectors of int32 sums (channels c0..c0+63 in order),
// converted and times the row's step Z26, to the floats at (AX).
#define U8CVT(A, B, C, D) \
	VCVTDQ2PS   A, A             \
	VCVTDQ2PS   B, B             \
	VCVTDQ2PS   C, C             \
	VCVTDQ2PS   D, D             \
	VFMADD213PS (AX), Z26, A     \
	VFMADD213PS 64(AX), Z26, B   \
	VFMADD213PS 128(AX), Z26, C  \
	VFMADD213PS 192(AX), Z26, D  \
	VMOVUPS     A, (AX)          \
	VMOVUPS     B, 64(AX)        \
	VMOVUPS     C, 128(AX)       \
	VMOVUPS     D, 192(AX)

// U8OUT4 is one row's epilogue for int4: even channels in A0, A1 and odd
// ones in B0, B1 (lane L: channel 2L, 2L+1; then 32 + the same), added to
// the row's floats in that order, the lane order (A0, B0, A1, B1: the
// accumulators stay in it through a task and u8UnlaneAVX512 puts them in
// channel order at its end, v66). The accumulators are clobbered.
#define U8OUT4(A0, B0, A1, B1) \
	U8CVT(A0, B0, A1, B1)

// U8OUT2 is one row's epilogue for int2: lane L of Am holds channel 4L+m;
// dwords of A0 and A1 (A2 and A3) interleaved (Z24, Z25) give channel
// pairs 4k, 4k+1 (4k+2, 4k+3) per qword, whose interleave (Z30, Z31:
// u8QwIdx) is channel order. Z20..Z22 scratch; the accumulators are
// clobbered.
#define U8OUT2(A0, A1, A2, A3) \
	VMOVDQA32 A0, Z20          \
	VPERMT2D  A1, Z24, Z20     \
	VPERMT2D  A1, Z25, A0      \
	VMOVDQA32 A2, Z21          \
	VPERMT2D  A3, Z24, Z21     \
	VPERMT2D  A3, Z25, A2      \
	VMOVDQA64 Z20, Z22         \
	VPERMT2Q  Z21, Z30, Z22    \
	VPERMT2Q  Z21, Z31, Z20    \
	VMOVDQA64 A0, Z21          \
	VPERMT2Q  A2, Z30, Z21     \
	VPERMT2Q  A2, Z31, A0      \
	U8CVT(Z22, Z20, Z21, A0)

// The pvU8 kernels' shared pieces (pvU8I4x4VBMI ... pvU8I2x2VBMI: four,
// three or two rows of int4 or int2 codes, one task's 64-channel passes).
// Registers: BX the pass's first channel, R8 its weights (ldq a channel
// group, R10 = ldw a row), SI the codes (DX a token's packed row), CX the
// token quads left, R14/R15 the prefetch pointer and lines left, Z23 the
// code mask, Z28 (and Z29) the code permutes, Z16..Z19 a quad's codes.

// PVU8ZERO zeroes four accumulators.
#define PVU8ZERO(A, B, C, D) \
	VPXORD A, A, A \
	VPXORD B, B, B \
	VPXORD C, C, C \
	VPXORD D, D, D

// PVU8PASS points R8 at pass BX's weights and SI at its codes (BX >> SHIFT
// bytes in: $1 int4, $2 int2) and sets CX to the task's token quads (n/4).
#define PVU8PASS(SHIFT) \
	MOVQ  gshift+72(FP), CX \
	MOVQ  BX, R8 \
	SHRQ  CX, R8 \
	IMULQ ldq+40(FP), R8 \
	ADDQ  wq+24(FP), R8 \
	MOVQ  packed+48(FP), SI \
	MOVQ  BX, AX \
	SHRQ  SHIFT, AX \
	ADDQ  AX, SI \
	MOVQ  n+56(FP), CX \
	SHRQ  $2, CX

// PVU8PF prefetches up to two of the pfLines lines left at R14; the
// caller's next line is its label nopf, where it jumps when none is left.
#define PVU8PF \
	TESTQ      R15, R15 \
	JZ         nopf \
	PREFETCHT1 (R14) \
	ADDQ       $64, R14 \
	DECQ       R15 \
	JZ         nopf \
	PREFETCHT1 (R14) \
	ADDQ       $64, R14 \
	DECQ       R15

// PVU8CODES4 loads four tokens' packed int4 codes of the pass and unpacks
// them: lane L of Z16..Z19 holds channels 2L, 2L+1, 32+2L, 33+2L of t0..t3
// (one byte a token). Z20..Z22 scratch.
#define PVU8CODES4 \
	LEAQ         (SI)(DX*2), AX \
	VMOVDQU64    (SI), Y20 \
	VINSERTI64X4 $1, (SI)(DX*1), Z20, Z20 \
	VMOVDQU64    (AX), Y21 \
	VINSERTI64X4 $1, (AX)(DX*1), Z21, Z21 \
	VMOVDQA64    Z20, Z22 \
	VPERMT2B     Z21, Z28, Z22 \
	VPERMT2B     Z21, Z29, Z20 \
	VPSRLW       $4, Z22, Z17 \
	VPSRLW       $4, Z20, Z19 \
	VPANDD       Z23, Z22, Z16 \
	VPANDD       Z23, Z17, Z17 \
	VPANDD       Z23, Z20, Z18 \
	VPANDD       Z23, Z19, Z19

// PVU8CODES2 is PVU8CODES4 for int2: lane L of Z16..Z19 holds channels
// 4L..4L+3 of t0..t3. Z20 scratch.
#define PVU8CODES2 \
	LEAQ         (SI)(DX*2), AX \
	VMOVDQU64    (SI), X20 \
	VINSERTI32X4 $1, (SI)(DX*1), Z20, Z20 \
	VINSERTI32X4 $2, (AX), Z20, Z20 \
	VINSERTI32X4 $3, (AX)(DX*1), Z20, Z20 \
	VPERMB       Z20, Z28, Z20 \
	VPSRLW       $2, Z20, Z17 \
	VPSRLW       $4, Z20, Z18 \
	VPSRLW       $6, Z20, Z19 \
	VPANDD       Z23, Z20, Z16 \
	VPANDD       Z23, Z17, Z17 \
	VPANDD       Z23, Z18, Z18 \
	VPANDD       Z23, Z19, Z19

// PVU8DOT adds one row's four weights W (broadcast dwords) times the
// quad's codes Z16..Z19 into its accumulators A..D.
#define PVU8DOT(W, A, B, C, D) \
	VPDPBUSD Z16, W, A \
	VPDPBUSD Z17, W, B \
	VPDPBUSD Z18, W, C \
	VPDPBUSD Z19, W, D

// PVU8NEXT steps to the next token quad (weights 4 bytes on, codes four
// packed rows on) and counts it; the caller's JNZ loops.
#define PVU8NEXT \
	ADDQ $4, R8 \
	LEAQ (SI)(DX*4), SI \
	DECQ CX

// func pvU8I4x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 4 rows of packed int4 codes (kernels.go): accumulators
// Z0..Z15 (row r: Z4r..Z4r+3), codes Z16..Z19, weights Z24..Z27.
TEXT ·pvU8I4x4VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         d+64(FP), DX
	SHRQ         $1, DX              // packed row stride: d/2
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I4Perm<>+0(SB), Z28
	VMOVDQU64    u8I4Perm<>+64(SB), Z29
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8ZERO(Z8, Z9, Z10, Z11)
	PVU8ZERO(Z12, Z13, Z14, Z15)
	PVU8PASS($1)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES4
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8DOT(Z26, Z8, Z9, Z10, Z11)
	PVU8DOT(Z27, Z12, Z13, Z14, Z15)
	PVU8NEXT
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT4(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT4(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT4(Z8, Z9, Z10, Z11)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	U8OUT4(Z12, Z13, Z14, Z15)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I4x3VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 3 rows of packed int4 codes (kernels.go; a group of three rows,
// R % 4 == 3, without a zero fourth row's work, v86): pvU8I4x4VBMI without
// its fourth row. Accumulators Z0..Z11 (row r: Z4r..Z4r+3), codes
// Z16..Z19, weights Z24..Z26.
TEXT ·pvU8I4x3VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	MOVQ         d+64(FP), DX
	SHRQ         $1, DX              // packed row stride: d/2
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I4Perm<>+0(SB), Z28
	VMOVDQU64    u8I4Perm<>+64(SB), Z29
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8ZERO(Z8, Z9, Z10, Z11)
	PVU8PASS($1)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES4
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8DOT(Z26, Z8, Z9, Z10, Z11)
	PVU8NEXT
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT4(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT4(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT4(Z8, Z9, Z10, Z11)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I4x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 2 rows of packed int4 codes (kernels.go): accumulators
// Z0..Z7 (row r: Z4r..Z4r+3), codes Z16..Z19, weights Z24..Z25.
TEXT ·pvU8I4x2VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         d+64(FP), DX
	SHRQ         $1, DX              // packed row stride: d/2
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I4Perm<>+0(SB), Z28
	VMOVDQU64    u8I4Perm<>+64(SB), Z29
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8PASS($1)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES4
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8NEXT
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT4(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT4(Z4, Z5, Z6, Z7)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I2x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 4 rows of packed int2 codes (kernels.go): accumulators
// Z0..Z15 (row r: Z4r..Z4r+3), codes Z16..Z19, weights Z24..Z27.
TEXT ·pvU8I2x4VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         d+64(FP), DX
	SHRQ         $2, DX              // packed row stride: d/4
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I2Perm<>+0(SB), Z28
	VMOVDQU64    u8QwIdx<>+0(SB), Z30
	VMOVDQU64    u8QwIdx<>+64(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8ZERO(Z8, Z9, Z10, Z11)
	PVU8ZERO(Z12, Z13, Z14, Z15)
	PVU8PASS($2)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES2
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8DOT(Z26, Z8, Z9, Z10, Z11)
	PVU8DOT(Z27, Z12, Z13, Z14, Z15)
	PVU8NEXT
	JNZ          quad
out:
	VMOVDQU32    u8DwIdx<>+0(SB), Z24
	VMOVDQU32    u8DwIdx<>+64(SB), Z25
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT2(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT2(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT2(Z8, Z9, Z10, Z11)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	U8OUT2(Z12, Z13, Z14, Z15)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I2x3VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 3 rows of packed int2 codes (kernels.go; a group of three rows,
// R % 4 == 3, without a zero fourth row's work, v86): pvU8I2x4VBMI without
// its fourth row. Accumulators Z0..Z11 (row r: Z4r..Z4r+3), codes
// Z16..Z19, weights Z24..Z26.
TEXT ·pvU8I2x3VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	MOVQ         d+64(FP), DX
	SHRQ         $2, DX              // packed row stride: d/4
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I2Perm<>+0(SB), Z28
	VMOVDQU64    u8QwIdx<>+0(SB), Z30
	VMOVDQU64    u8QwIdx<>+64(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8ZERO(Z8, Z9, Z10, Z11)
	PVU8PASS($2)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES2
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8DOT(Z26, Z8, Z9, Z10, Z11)
	PVU8NEXT
	JNZ          quad
out:
	VMOVDQU32    u8DwIdx<>+0(SB), Z24
	VMOVDQU32    u8DwIdx<>+64(SB), Z25
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT2(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT2(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT2(Z8, Z9, Z10, Z11)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I2x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 2 rows of packed int2 codes (kernels.go): accumulators
// Z0..Z7 (row r: Z4r..Z4r+3), codes Z16..Z19, weights Z24..Z25.
TEXT ·pvU8I2x2VBMI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         d+64(FP), DX
	SHRQ         $2, DX              // packed row stride: d/4
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z23
	VMOVDQU64    u8I2Perm<>+0(SB), Z28
	VMOVDQU64    u8QwIdx<>+0(SB), Z30
	VMOVDQU64    u8QwIdx<>+64(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	PVU8ZERO(Z0, Z1, Z2, Z3)
	PVU8ZERO(Z4, Z5, Z6, Z7)
	PVU8PASS($2)
	JZ    out
quad:
	PVU8PF
nopf:
	PVU8CODES2
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	PVU8DOT(Z24, Z0, Z1, Z2, Z3)
	PVU8DOT(Z25, Z4, Z5, Z6, Z7)
	PVU8NEXT
	JNZ          quad
out:
	VMOVDQU32    u8DwIdx<>+0(SB), Z24
	VMOVDQU32    u8DwIdx<>+64(SB), Z25
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT2(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT2(Z4, Z5, Z6, Z7)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// U8STEP is a row's u8 weight step from its largest weight in X0: Δ =
// max/255 in X3 and 1/Δ in X4, both 0 where the max is not above 0 (no
// weight, or NaN: GT_OQ is false). X1, X2, X5 and AX scratch.
#define U8STEP \
	VXORPS   X1, X1, X1         \
	MOVL     $0x437f0000, AX    \
	VMOVD    AX, X2             \
	VDIVSS   X2, X0, X3         \
	VDIVSS   X0, X2, X4         \
	VCMPSS   $0x1e, X1, X0, X5  \
	VANDPS   X5, X3, X3         \
	VANDPS   X5, X4, X4

// EXPU8 is the exp of 16 values d in Z1 (x - m), in Z4: t = d·log2 e +
// 1.5·2^23 by one FMA, whose low mantissa bits hold n = rint(d·log2 e);
// f = d·log2 e - n; 2^f by three FMAs (c3 first); 2^n added to the
// exponent bits; 0 where d < expU8Min (GE_OQ: also for NaN). The constants
// are in Z21, Z22, Z25..Z29 (softmaxU8AVX512's prologue); Z2, Z3, K1
// scratch.
#define EXPU8 \
	VCMPPS      $0x1d, Z21, Z1, K1 \
	VMOVAPS     Z25, Z2            \
	VFMADD231PS Z22, Z1, Z2        \
	VSUBPS      Z25, Z2, Z3        \
	VFMSUB231PS Z22, Z1, Z3        \
	VMOVAPS     Z26, Z4            \
	VFMADD213PS Z27, Z3, Z4        \
	VFMADD213PS Z28, Z3, Z4        \
	VFMADD213PS Z29, Z3, Z4        \
	VPSLLD      $23, Z2, Z2        \
	VPADDD.Z    Z2, Z4, K1, Z4

// EXPU8B is EXPU8 on other registers, for the second row of softmaxU8's
// row pairs: d in Z16, the exp in Z19; Z17, Z18, K2 scratch.
#define EXPU8B \
	VCMPPS      $0x1d, Z21, Z16, K2 \
	VMOVAPS     Z25, Z17            \
	VFMADD231PS Z22, Z16, Z17       \
	VSUBPS      Z25, Z17, Z18       \
	VFMSUB231PS Z22, Z16, Z18       \
	VMOVAPS     Z26, Z19            \
	VFMADD213PS Z27, Z18, Z19       \
	VFMADD213PS Z28, Z18, Z19       \
	VFMADD213PS Z29, Z18, Z19       \
	VPSLLD      $23, Z17, Z17       \
	VPADDD.Z    Z17, Z19, K2, Z19

// func quantWRowsU8AVX512(wq *uint8, ldw, ldq int, p *float32, ldp int, s, z *float32, lds, n, groups, rows int, mid float32, delta, zsum *float32)
// quantWRowsU8 (kernels.go) in two loops over the rows, so that the rows'
// latency chains (the max's fold, the divisions) overlap: first per row the
// largest weight p·s over all groups (kept in delta[r]) and the zeros' sums
// Σ p·z (lanes folded as in sum16); then per row the step Δ = max/255 and
// per group the weights rounded to u8 steps (VCVTPS2DQ: to nearest even;
// VPMOVUSDB), and the residues w - Δ·rint(w/Δ) summed by lanes, folded,
// times mid and added to the group's zero sum.
TEXT ·quantWRowsU8AVX512(SB), NOSPLIT, $0-112
	MOVQ   lds+56(FP), R10
	SHLQ   $2, R10
	MOVQ   groups+72(FP), R12
	MOVQ   delta+96(FP), DX
	XORQ   R14, R14             // row
row1:
	CMPQ   R14, rows+80(FP)
	JGE    pass2
	MOVQ   ldp+32(FP), SI
	IMULQ  R14, SI
	SHLQ   $2, SI
	ADDQ   p+24(FP), SI         // p row
	MOVQ   R14, R15
	IMULQ  R12, R15
	SHLQ   $2, R15
	ADDQ   zsum+104(FP), R15    // zsum row
	VPXORD Z5, Z5, Z5           // max
	MOVQ   s+40(FP), R13
	MOVQ   z+48(FP), R9
	MOVQ   R12, BX
max1:
	XORQ   AX, AX
	VPXORD Z6, Z6, Z6           // Σ p·z lanes
	MOVQ   n+64(FP), CX
	SHRQ   $4, CX
	JZ     max3
max2:
	VMOVUPS     (SI)(AX*1), Z2
	VFMADD231PS (R9)(AX*1), Z2, Z6
	VMULPS      (R13)(AX*1), Z2, Z2
	VMAXPS      Z2, Z5, Z5
	ADDQ        $64, AX
	DECQ        CX
	JNZ         max2
max3:
	VMOVAPS Z6, Z0
	HSUM16(VADDPS)
	VMOVSS  X0, (R15)
	ADDQ    $4, R15
	ADDQ    R10, R13
	ADDQ    R10, R9
	DECQ    BX
	JNZ     max1
	VMOVAPS Z5, Z0
	HSUM16(VMAXPS)
	VMOVSS  X0, (DX)(R14*4)
	INCQ    R14
	JMP     row1
pass2:
	XORQ   R14, R14
row2:
	CMPQ     R14, rows+80(FP)
	JGE      done
	MOVQ     ldp+32(FP), SI
	IMULQ    R14, SI
	SHLQ     $2, SI
	ADDQ     p+24(FP), SI
	VMOVSS   (DX)(R14*4), X0    // the row's max
	U8STEP
	VMOVSS       X3, (DX)(R14*4)
	VBROADCASTSS X4, Z7
	VBROADCASTSS X3, Z8
	MOVQ         ldw+8(FP), DI
	IMULQ        R14, DI
	ADDQ         wq+0(FP), DI
	MOVQ         ldq+16(FP), R11
	MOVQ         s+40(FP), R13
	MOVQ         R14, R15
	IMULQ        R12, R15
	SHLQ         $2, R15
	ADDQ         zsum+104(FP), R15
	MOVQ         R12, BX
q1:
	XORQ   AX, AX
	XORQ   R9, R9
	VPXORD Z6, Z6, Z6           // residue lanes
	MOVQ   n+64(FP), CX
	SHRQ   $4, CX
	JZ     q3
q2:
	VMOVUPS   (SI)(AX*1), Z2
	VMULPS    (R13)(AX*1), Z2, Z2   // w
	VMULPS    Z7, Z2, Z3
	VCVTPS2DQ Z3, Z3
	VPMOVUSDB Z3, X4
	VMOVDQU   X4, (DI)(R9*1)
	VCVTDQ2PS Z3, Z3
	VMULPS    Z8, Z3, Z3            // Δ·rint(w/Δ)
	VSUBPS    Z3, Z2, Z2
	VADDPS    Z2, Z6, Z6
	ADDQ      $64, AX
	ADDQ      $16, R9
	DECQ      CX
	JNZ       q2
q3:
	VMOVAPS Z6, Z0
	HSUM16(VADDPS)
	VMULSS  mid+88(FP), X0, X0
	VADDSS  (R15), X0, X0
	VMOVSS  X0, (R15)
	ADDQ    $4, R15
	ADDQ    R10, R13
	ADDQ    R11, DI
	DECQ    BX
	JNZ     q1
	INCQ    R14
	JMP     row2
done:
	VZEROUPPER
	RET

// Constants of softmaxU8AVX512 (kernels.go, expU8): expU8Min, log2 e,
// 1.5·2^23, and the degree-3 polynomial for 2^f, c3 first.
DATA expu8<>+0(SB)/4, $-86.64339
DATA expu8<>+4(SB)/4, $1.44269504088896341
DATA expu8<>+8(SB)/4, $12582912.0
DATA expu8<>+12(SB)/4, $0.05517167
DATA expu8<>+16(SB)/4, $0.24261113
DATA expu8<>+20(SB)/4, $0.69326097
DATA expu8<>+24(SB)/4, $0.99992806
GLOBL expu8<>(SB), RODATA|NOPTR, $28

// u8PackIdx<> puts the dwords of VPACKUSDW then VPACKUSWB of four vectors
// (dword 4l+j: vector j's bytes 4l..4l+3) back in order: dword 4j+l.
DATA u8PackIdx<>+0(SB)/4, $0
DATA u8PackIdx<>+4(SB)/4, $4
DATA u8PackIdx<>+8(SB)/4, $8
DATA u8PackIdx<>+12(SB)/4, $12
DATA u8PackIdx<>+16(SB)/4, $1
DATA u8PackIdx<>+20(SB)/4, $5
DATA u8PackIdx<>+24(SB)/4, $9
DATA u8PackIdx<>+28(SB)/4, $13
DATA u8PackIdx<>+32(SB)/4, $2
DATA u8PackIdx<>+36(SB)/4, $6
DATA u8PackIdx<>+40(SB)/4, $10
DATA u8PackIdx<>+44(SB)/4, $14
DATA u8PackIdx<>+48(SB)/4, $3
DATA u8PackIdx<>+52(SB)/4, $7
DATA u8PackIdx<>+56(SB)/4, $11
DATA u8PackIdx<>+60(SB)/4, $15
GLOBL u8PackIdx<>(SB), RODATA|NOPTR, $64

// u8PairIdx<> picks the even floats of two vectors (cvtPairs' and
// deinterleave's pairIdx<>, which is local to kernels_avx512_amd64.s).
DATA u8PairIdx<>+0(SB)/4, $0
DATA u8PairIdx<>+4(SB)/4, $2
DATA u8PairIdx<>+8(SB)/4, $4
DATA u8PairIdx<>+12(SB)/4, $6
DATA u8PairIdx<>+16(SB)/4, $8
DATA u8PairIdx<>+20(SB)/4, $10
DATA u8PairIdx<>+24(SB)/4, $12
DATA u8PairIdx<>+28(SB)/4, $14
DATA u8PairIdx<>+32(SB)/4, $16
DATA u8PairIdx<>+36(SB)/4, $18
DATA u8PairIdx<>+40(SB)/4, $20
DATA u8PairIdx<>+44(SB)/4, $22
DATA u8PairIdx<>+48(SB)/4, $24
DATA u8PairIdx<>+52(SB)/4, $26
DATA u8PairIdx<>+56(SB)/4, $28
DATA u8PairIdx<>+60(SB)/4, $30
GLOBL u8PairIdx<>(SB), RODATA|NOPTR, $64

// PAIRS2SZ converts the 16 fp16 (scale, zero) pairs at R13+AX (64 bytes)
// to the scales in Z11 and the zeros in Z10, as cvtPairs does (Z30, Z31
// its even and odd indices); Z8 scratch.
#define PAIRS2SZ \
	VCVTPH2PS (R13)(AX*1), Z11   \
	VCVTPH2PS 32(R13)(AX*1), Z8  \
	VMOVAPS   Z11, Z10           \
	VPERMT2PS Z8, Z30, Z11       \
	VPERMT2PS Z8, Z31, Z10

// SROW2 puts the scales (or pairs) of row R14's one group in R13: s, or s2
// from row rows/2 on (v80). DX scratch.
#define SROW2 \
	MOVQ    s+48(FP), R13      \
	MOVQ    rows+88(FP), DX    \
	SHRQ    $1, DX             \
	CMPQ    R14, DX            \
	CMOVQGE s2+144(FP), R13

// func softmaxU8AVX512(wq *uint8, ldw, ldq int, x *float32, ldx int, m, s, z *float32, lds, n, groups, rows int, mid float32, delta, zsum, lsum, sw *float32, pairs int, s2 *float32)
// softmaxU8 (kernels.go) in two loops over the rows, so that the rows'
// latency chains (the folds, the divisions) overlap. First, per row: the
// exp of x - m in place (d = x - m; t = d·log2 e + 1.5·2^23 by one FMA,
// whose low mantissa bits hold n = rint(d·log2 e); f = d·log2 e - n by one
// FMA; 2^f by three FMAs; 2^n added to the exponent bits: 5 multiplier
// operations per 16 values against expSubAVX512's 8) and its lane sums;
// then per group Σ p·z, Σ w and the largest w (w = p·s). Second, per row:
// Δ = max/255, and per group the weights rounded to u8 steps (VCVTPS2DQ:
// to nearest even; VPMOVUSDB) with their integer sum, and the zeros' sum
// plus mid·(Σ w - Δ·Σ wq). With one group the first loop takes two rows
// at a time (their chains side by side, s and z loaded once, before the
// stores: v53) and stores w = p·s in x instead of p, so that the second
// multiplies w by 1/Δ alone (the same product: v76); the second packs 64
// codes a step (VPACKUSDW, VPACKUSWB, VPERMD: the same bytes as VPMOVUSDB
// for codes 0..255, which w >= 0 and Δ = max w/255 give: v54). With pairs
// not 0 (one group) s points to the n fp16 (scale, zero) pairs as a block
// stores them (z unused), 64 bytes a 16 tokens as 16 floats are, and the
// first loop converts each 16 tokens' pairs itself (cvtPairs' operations,
// in registers: the same floats, so the same bits; v79). With one group
// the rows [rows/2, rows) read their scales (or pairs) from s2 instead of s
// (s2 = s: one block; two int4 blocks' rows in one call, v80); rows/2 even,
// so that no row pair straddles the two.
TEXT ·softmaxU8AVX512(SB), NOSPLIT, $0-152
	VBROADCASTSS expu8<>+0(SB), Z21  // expU8Min
	VBROADCASTSS expu8<>+4(SB), Z22  // log2 e
	VBROADCASTSS expu8<>+8(SB), Z25  // 1.5·2^23
	VBROADCASTSS expu8<>+12(SB), Z26 // c3
	VBROADCASTSS expu8<>+16(SB), Z27 // c2
	VBROADCASTSS expu8<>+20(SB), Z28 // c1
	VBROADCASTSS expu8<>+24(SB), Z29 // c0
	VMOVDQU32    u8PairIdx<>(SB), Z30  // the scales' positions in the pairs (even floats)
	MOVL         $1, AX
	VPBROADCASTD AX, Z31
	VPADDD       Z31, Z30, Z31       // the zeros' (odd floats)
	MOVQ         lds+64(FP), R10
	SHLQ         $2, R10
	MOVQ         groups+80(FP), R12
	MOVQ         n+72(FP), R8
	SHRQ         $4, R8             // vectors per row
	XORQ         R14, R14           // row
row1:
	CMPQ         R14, rows+88(FP)
	JGE          pass2
	MOVQ         ldx+32(FP), SI
	IMULQ        R14, SI
	SHLQ         $2, SI
	ADDQ         x+24(FP), SI       // x row
	MOVQ         m+40(FP), AX
	VBROADCASTSS (AX)(R14*4), Z20
	VPXORD       Z0, Z0, Z0         // Σ p lanes
	MOVQ         SI, DI
	MOVQ         R8, CX
	TESTQ        CX, CX
	JZ           exp3
	CMPQ         R12, $1
	JEQ          one
exp2:
	VMOVUPS      (DI), Z1
	VSUBPS       Z20, Z1, Z1        // d = x - m
	EXPU8                           // Z4 = e^d
	VMOVUPS      Z4, (DI)
	VADDPS       Z4, Z0, Z0
	ADDQ         $64, DI
	DECQ         CX
	JNZ          exp2
exp3:
	HSUM16(VADDPS)
	MOVQ         lsum+120(FP), AX
	VMOVSS       X0, (AX)(R14*4)
	MOVQ         R14, R15
	CMPQ         R12, $1
	JNE          grp0
	VPXORD       Z5, Z5, Z5         // no tokens: no sums, max 0
	MOVQ         zsum+112(FP), DX
	VMOVSS       X5, (DX)(R14*4)
	MOVQ         sw+128(FP), DX
	VMOVSS       X5, (DX)(R14*4)
	JMP          rmax
one: // one group: the group's sums in the exp's loop (its FMA chain hidden)
	LEAQ         1(R14), DX
	CMPQ         DX, rows+88(FP)
	JLT          two
	SROW2
	MOVQ         z+56(FP), R9
	XORQ         AX, AX
	VPXORD       Z5, Z5, Z5         // max w
	VPXORD       Z6, Z6, Z6         // Σ p·z lanes
	VPXORD       Z7, Z7, Z7         // Σ w lanes
	CMPQ         pairs+136(FP), $0
	JNE          exp1h
exp1: // z and s loaded before p's store: the three arrays share their low 12 address bits (4K aliasing)
	VMOVUPS      (SI)(AX*1), Z1
	VMOVUPS      (R9)(AX*1), Z10    // z
	VMOVUPS      (R13)(AX*1), Z11   // s
exp1c:
	VSUBPS       Z20, Z1, Z1
	EXPU8                           // p
	VADDPS       Z4, Z0, Z0
	VFMADD231PS  Z10, Z4, Z6
	VMULPS       Z11, Z4, Z4        // w
	VMOVUPS      Z4, (SI)(AX*1)     // x = w (v76)
	VPMAXSD      Z4, Z5, Z5
	VADDPS       Z4, Z7, Z7
	ADDQ         $64, AX
	DECQ         CX
	JZ           exp1d
	CMPQ         pairs+136(FP), $0
	JEQ          exp1
exp1h: // the pairs converted in registers (v79)
	VMOVUPS      (SI)(AX*1), Z1
	PAIRS2SZ
	JMP          exp1c
exp1d:
	HSUM16(VADDPS)
	MOVQ         lsum+120(FP), AX
	VMOVSS       X0, (AX)(R14*4)
	VMOVAPS      Z6, Z0
	HSUM16(VADDPS)
	MOVQ         zsum+112(FP), DX
	VMOVSS       X0, (DX)(R14*4)
	VMOVAPS      Z7, Z0
	HSUM16(VADDPS)
	MOVQ         sw+128(FP), DX
	VMOVSS       X0, (DX)(R14*4)
	JMP          rmax
two: // rows r and r+1 side by side (two chains in flight; s and z loaded once), each row's sums as in exp1
	MOVQ         ldx+32(FP), DI
	SHLQ         $2, DI
	ADDQ         SI, DI             // row r+1
	MOVQ         m+40(FP), AX
	VBROADCASTSS 4(AX)(R14*4), Z23
	SROW2
	MOVQ         z+56(FP), R9
	XORQ         AX, AX
	VPXORD       Z5, Z5, Z5         // row r: max w
	VPXORD       Z6, Z6, Z6         // Σ p·z lanes
	VPXORD       Z7, Z7, Z7         // Σ w lanes
	VPXORD       Z12, Z12, Z12      // row r+1: Σ p lanes
	VPXORD       Z13, Z13, Z13      // max w
	VPXORD       Z14, Z14, Z14      // Σ p·z lanes
	VPXORD       Z15, Z15, Z15      // Σ w lanes
	CMPQ         pairs+136(FP), $0
	JNE          exp1bh
exp1b:
	VMOVUPS      (SI)(AX*1), Z1
	VMOVUPS      (DI)(AX*1), Z16
	VMOVUPS      (R9)(AX*1), Z10    // z
	VMOVUPS      (R13)(AX*1), Z11   // s
exp1bc:
	VSUBPS       Z20, Z1, Z1
	VSUBPS       Z23, Z16, Z16
	EXPU8                           // row r's p
	EXPU8B                          // row r+1's p
	VADDPS       Z4, Z0, Z0
	VADDPS       Z19, Z12, Z12
	VFMADD231PS  Z10, Z4, Z6
	VFMADD231PS  Z10, Z19, Z14
	VMULPS       Z11, Z4, Z4        // w
	VMULPS       Z11, Z19, Z19
	VMOVUPS      Z4, (SI)(AX*1)     // x = w (v76)
	VMOVUPS      Z19, (DI)(AX*1)
	VPMAXSD      Z4, Z5, Z5
	VPMAXSD      Z19, Z13, Z13
	VADDPS       Z4, Z7, Z7
	VADDPS       Z19, Z15, Z15
	ADDQ         $64, AX
	DECQ         CX
	JZ           exp1bd
	CMPQ         pairs+136(FP), $0
	JEQ          exp1b
exp1bh: // the pairs converted in registers (v79)
	VMOVUPS      (SI)(AX*1), Z1
	VMOVUPS      (DI)(AX*1), Z16
	PAIRS2SZ
	JMP          exp1bc
exp1bd:
	MOVQ         lsum+120(FP), AX
	MOVQ         zsum+112(FP), DX
	MOVQ         sw+128(FP), BX
	HSUM16(VADDPS)
	VMOVSS       X0, (AX)(R14*4)
	VMOVAPS      Z6, Z0
	HSUM16(VADDPS)
	VMOVSS       X0, (DX)(R14*4)
	VMOVAPS      Z7, Z0
	HSUM16(VADDPS)
	VMOVSS       X0, (BX)(R14*4)
	VMOVAPS      Z12, Z0
	HSUM16(VADDPS)
	VMOVSS       X0, 4(AX)(R14*4)
	VMOVAPS      Z14, Z0
	HSUM16(VADDPS)
	VMOVSS       X0, 4(DX)(R14*4)
	VMOVAPS      Z15, Z0
	HSUM16(VADDPS)
	VMOVSS       X0, 4(BX)(R14*4)
	VMOVAPS      Z5, Z0
	HSUM16(VMAXPS)
	MOVQ         delta+104(FP), DX
	VMOVSS       X0, (DX)(R14*4)    // row r's max until the second loop
	VMOVAPS      Z13, Z5
	INCQ         R14
	JMP          rmax
grp0:
	IMULQ        R12, R15
	SHLQ         $2, R15            // the row's first group sum (bytes)
	VPXORD       Z5, Z5, Z5         // max w
	MOVQ         s+48(FP), R13
	MOVQ         z+56(FP), R9
	MOVQ         R12, BX
grp1:
	XORQ         AX, AX
	VPXORD       Z6, Z6, Z6         // Σ p·z lanes
	VPXORD       Z7, Z7, Z7         // Σ w lanes
	MOVQ         R8, CX
	TESTQ        CX, CX
	JZ           grp3
grp2:
	VMOVUPS      (SI)(AX*1), Z2
	VFMADD231PS  (R9)(AX*1), Z2, Z6
	VMULPS       (R13)(AX*1), Z2, Z2 // w
	VMAXPS       Z2, Z5, Z5
	VADDPS       Z2, Z7, Z7
	ADDQ         $64, AX
	DECQ         CX
	JNZ          grp2
grp3:
	VMOVAPS      Z6, Z0
	HSUM16(VADDPS)
	MOVQ         zsum+112(FP), DX
	VMOVSS       X0, (DX)(R15*1)
	VMOVAPS      Z7, Z0
	HSUM16(VADDPS)
	MOVQ         sw+128(FP), DX
	VMOVSS       X0, (DX)(R15*1)
	ADDQ         $4, R15
	ADDQ         R10, R13
	ADDQ         R10, R9
	DECQ         BX
	JNZ          grp1
rmax:
	VMOVAPS      Z5, Z0
	HSUM16(VMAXPS)
	MOVQ         delta+104(FP), DX
	VMOVSS       X0, (DX)(R14*4)    // the row's max until the second loop
	INCQ         R14
	JMP          row1
pass2:
	MOVQ         ldq+16(FP), R11
	VMOVDQU32    u8PackIdx<>(SB), Z24
	XORQ         R14, R14
row2:
	CMPQ         R14, rows+88(FP)
	JGE          done
	MOVQ         ldx+32(FP), SI
	IMULQ        R14, SI
	SHLQ         $2, SI
	ADDQ         x+24(FP), SI
	MOVQ         delta+104(FP), DX
	VMOVSS       (DX)(R14*4), X0    // the row's max
	U8STEP
	VMOVSS       X3, (DX)(R14*4)
	VBROADCASTSS X4, Z8
	MOVQ         ldw+8(FP), DI
	IMULQ        R14, DI
	ADDQ         wq+0(FP), DI
	MOVQ         s+48(FP), R13
	MOVQ         R14, R15
	IMULQ        R12, R15
	SHLQ         $2, R15
	MOVQ         R12, BX
q1:
	XORQ         AX, AX
	XORQ         R9, R9
	VPXORD       Z6, Z6, Z6         // Σ wq lanes (int32)
	MOVQ         R8, CX
	CMPQ         R12, $1
	JEQ          w1
	CMPQ         CX, $4
	JLT          q2t
q4: // 64 weights a step: their codes (0..255) packed by VPACKUSDW, VPACKUSWB and put in order by VPERMD
	VMOVUPS      (SI)(AX*1), Z2
	VMULPS       (R13)(AX*1), Z2, Z2
	VMULPS       Z8, Z2, Z2
	VCVTPS2DQ    Z2, Z2
	VPADDD       Z2, Z6, Z6
	VMOVUPS      64(SI)(AX*1), Z10
	VMULPS       64(R13)(AX*1), Z10, Z10
	VMULPS       Z8, Z10, Z10
	VCVTPS2DQ    Z10, Z10
	VPADDD       Z10, Z6, Z6
	VMOVUPS      128(SI)(AX*1), Z11
	VMULPS       128(R13)(AX*1), Z11, Z11
	VMULPS       Z8, Z11, Z11
	VCVTPS2DQ    Z11, Z11
	VPADDD       Z11, Z6, Z6
	VMOVUPS      192(SI)(AX*1), Z12
	VMULPS       192(R13)(AX*1), Z12, Z12
	VMULPS       Z8, Z12, Z12
	VCVTPS2DQ    Z12, Z12
	VPADDD       Z12, Z6, Z6
	VPACKUSDW    Z10, Z2, Z2        // lane l: words of tokens 4l..4l+3 of vectors 0, 1
	VPACKUSDW    Z12, Z11, Z11      // of vectors 2, 3
	VPACKUSWB    Z11, Z2, Z2        // dword 4l+j: vector j's tokens 4l..4l+3
	VPERMD       Z2, Z24, Z2        // dword 4j+l
	VMOVDQU64    Z2, (DI)(R9*1)
	ADDQ         $256, AX
	ADDQ         $64, R9
	SUBQ         $4, CX
	CMPQ         CX, $4
	JGE          q4
q2t:
	TESTQ        CX, CX
	JZ           q3
q2:
	VMOVUPS      (SI)(AX*1), Z2
	VMULPS       (R13)(AX*1), Z2, Z2 // w
	VMULPS       Z8, Z2, Z2          // w/Δ
	VCVTPS2DQ    Z2, Z2
	VPMOVUSDB    Z2, X9
	VMOVDQU      X9, (DI)(R9*1)
	VPADDD       Z2, Z6, Z6
	ADDQ         $64, AX
	ADDQ         $16, R9
	DECQ         CX
	JNZ          q2
	JMP          q3
w1: // one group: x holds w = p·s from the first loop (v76), so w/Δ is one product
	CMPQ         CX, $4
	JLT          w2t
w4: // q4 without the product by s
	VMULPS       (SI)(AX*1), Z8, Z2
	VCVTPS2DQ    Z2, Z2
	VPADDD       Z2, Z6, Z6
	VMULPS       64(SI)(AX*1), Z8, Z10
	VCVTPS2DQ    Z10, Z10
	VPADDD       Z10, Z6, Z6
	VMULPS       128(SI)(AX*1), Z8, Z11
	VCVTPS2DQ    Z11, Z11
	VPADDD       Z11, Z6, Z6
	VMULPS       192(SI)(AX*1), Z8, Z12
	VCVTPS2DQ    Z12, Z12
	VPADDD       Z12, Z6, Z6
	VPACKUSDW    Z10, Z2, Z2
	VPACKUSDW    Z12, Z11, Z11
	VPACKUSWB    Z11, Z2, Z2
	VPERMD       Z2, Z24, Z2
	VMOVDQU64    Z2, (DI)(R9*1)
	ADDQ         $256, AX
	ADDQ         $64, R9
	SUBQ         $4, CX
	CMPQ         CX, $4
	JGE          w4
w2t:
	TESTQ        CX, CX
	JZ           q3
w2:
	VMULPS       (SI)(AX*1), Z8, Z2  // w/Δ
	VCVTPS2DQ    Z2, Z2
	VPMOVUSDB    Z2, X9
	VMOVDQU      X9, (DI)(R9*1)
	VPADDD       Z2, Z6, Z6
	ADDQ         $64, AX
	ADDQ         $16, R9
	DECQ         CX
	JNZ          w2
q3:
	VEXTRACTI64X4 $1, Z6, Y7
	VPADDD        Y7, Y6, Y6
	VEXTRACTI128  $1, Y6, X7
	VPADDD        X7, X6, X6
	VPSHUFD       $0x4e, X6, X7
	VPADDD        X7, X6, X6
	VPSHUFD       $0xb1, X6, X7
	VPADDD        X7, X6, X6
	VCVTDQ2PS     X6, X6            // Σ wq, exact (< 2^24)
	VMULSS        X3, X6, X6        // Δ·Σ wq
	MOVQ          sw+128(FP), DX
	VMOVSS        (DX)(R15*1), X7
	VSUBSS        X6, X7, X7        // Σ w - Δ·Σ wq
	VMULSS        mid+96(FP), X7, X7
	MOVQ          zsum+112(FP), DX
	VADDSS        (DX)(R15*1), X7, X7
	VMOVSS        X7, (DX)(R15*1)
	ADDQ          $4, R15
	ADDQ          R10, R13
	ADDQ          R11, DI
	DECQ          BX
	JNZ           q1
	INCQ          R14
	JMP           row2
done:
	VZEROUPPER
	RET

// func u8UnlaneAVX512(acc *float32, n int)
// unlaneU8 (kernels.go): n floats (a multiple of 64) from int4 pvU8's lane
// order to channel order, 64 at a time: even channels a0, a1 and odd ones
// b0, b1 (vectors 0, 2 and 1, 3) interleaved by dwords (u8DwIdx), as
// U8OUT4 did per call before v66. Floats move as they are (the same bits).
TEXT ·u8UnlaneAVX512(SB), NOSPLIT, $0-16
	MOVQ      acc+0(FP), AX
	MOVQ      n+8(FP), CX
	SHRQ      $6, CX
	JZ        udone
	VMOVDQU32 u8DwIdx<>+0(SB), Z24
	VMOVDQU32 u8DwIdx<>+64(SB), Z25
ustep:
	VMOVDQU32 (AX), Z0
	VMOVDQU32 64(AX), Z1
	VMOVDQU32 128(AX), Z2
	VMOVDQU32 192(AX), Z3
	VMOVDQA32 Z0, Z20
	VPERMT2D  Z1, Z24, Z20
	VPERMT2D  Z1, Z25, Z0
	VMOVDQA32 Z2, Z21
	VPERMT2D  Z3, Z24, Z21
	VPERMT2D  Z3, Z25, Z2
	VMOVDQU32 Z20, (AX)
	VMOVDQU32 Z0, 64(AX)
	VMOVDQU32 Z21, 128(AX)
	VMOVDQU32 Z2, 192(AX)
	ADDQ      $256, AX
	DECQ      CX
	JNZ       ustep
	VZEROUPPER
udone:
	RET

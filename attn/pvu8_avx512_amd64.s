//go:build !purego

#include "textflag.h"

// The integer PV with 8-bit weights (AVX-512 VNNI + VBMI; kernels.go's
// pvU8, docs/perf/cpu-attention.md v18): per 64 channels and four tokens,
// the packed int4 or int2 codes of the four tokens are gathered into one or
// two vectors, put by VPERMB/VPERMT2B into qwords that hold one or two
// source bytes of each token, and VPMULTISHIFTQB + VPANDD extract them so
// that the 32-bit lane of channel c (in channel order: vector k holds
// channels 16k..16k+15) holds the four tokens' codes of c, one per byte:
// VPDPBUSD then multiplies them (signed operand) by the row's four u8
// weights (one broadcast dword, the unsigned operand) and adds the four
// products to the channel's int32 sum. Exact in int32 (n·255·15 < 2^31 for
// n <= PVMaxTokens), then converted and added times the row's step to the
// float accumulators. No output permutation: the lanes are in channel order.

// u8I4Perm<> (VPERMT2B indexes into [t0 | t1] and [t2 | t3], the 32 packed
// bytes of each of four tokens; table 2 at 64+): vector 0's qword q holds
// byte q of the four tokens, then byte 8+q; vector 1's bytes 16+q and 24+q.
// u8I4Ctl<> (VPMULTISHIFTQB, one qword broadcast): the first qword picks
// the low nibbles (bits 8i) of bytes 0..3, then their high nibbles (8i+4):
// channels 2q and 2q+1 of the first source byte; the second qword the same
// from bytes 4..7.
// u8I2Perm<> (VPERMB indexes into the four tokens' 16 packed bytes, one
// 128-bit lane per token): vector 0's qwords 2m and 2m+1 hold byte m of the
// four tokens, then byte 4+m; vector 1's bytes 8+m and 12+m.
// u8I2Ctl<>: qword q of control 0 picks bits 8i+4(q%2) (channel 2q's code
// of token i) and then 8i+4(q%2)+2 (channel 2q+1) of bytes 0..3; control 1
// the same from bytes 4..7.
DATA u8I4Perm<>+0(SB)/8, $0x6848280860402000
DATA u8I4Perm<>+8(SB)/8, $0x6949290961412101
DATA u8I4Perm<>+16(SB)/8, $0x6a4a2a0a62422202
DATA u8I4Perm<>+24(SB)/8, $0x6b4b2b0b63432303
DATA u8I4Perm<>+32(SB)/8, $0x6c4c2c0c64442404
DATA u8I4Perm<>+40(SB)/8, $0x6d4d2d0d65452505
DATA u8I4Perm<>+48(SB)/8, $0x6e4e2e0e66462606
DATA u8I4Perm<>+56(SB)/8, $0x6f4f2f0f67472707
DATA u8I4Perm<>+64(SB)/8, $0x7858381870503010
DATA u8I4Perm<>+72(SB)/8, $0x7959391971513111
DATA u8I4Perm<>+80(SB)/8, $0x7a5a3a1a72523212
DATA u8I4Perm<>+88(SB)/8, $0x7b5b3b1b73533313
DATA u8I4Perm<>+96(SB)/8, $0x7c5c3c1c74543414
DATA u8I4Perm<>+104(SB)/8, $0x7d5d3d1d75553515
DATA u8I4Perm<>+112(SB)/8, $0x7e5e3e1e76563616
DATA u8I4Perm<>+120(SB)/8, $0x7f5f3f1f77573717
GLOBL u8I4Perm<>(SB), RODATA|NOPTR, $128
DATA u8I2Perm<>+0(SB)/8, $0x3424140430201000
DATA u8I2Perm<>+8(SB)/8, $0x3424140430201000
DATA u8I2Perm<>+16(SB)/8, $0x3525150531211101
DATA u8I2Perm<>+24(SB)/8, $0x3525150531211101
DATA u8I2Perm<>+32(SB)/8, $0x3626160632221202
DATA u8I2Perm<>+40(SB)/8, $0x3626160632221202
DATA u8I2Perm<>+48(SB)/8, $0x3727170733231303
DATA u8I2Perm<>+56(SB)/8, $0x3727170733231303
DATA u8I2Perm<>+64(SB)/8, $0x3c2c1c0c38281808
DATA u8I2Perm<>+72(SB)/8, $0x3c2c1c0c38281808
DATA u8I2Perm<>+80(SB)/8, $0x3d2d1d0d39291909
DATA u8I2Perm<>+88(SB)/8, $0x3d2d1d0d39291909
DATA u8I2Perm<>+96(SB)/8, $0x3e2e1e0e3a2a1a0a
DATA u8I2Perm<>+104(SB)/8, $0x3e2e1e0e3a2a1a0a
DATA u8I2Perm<>+112(SB)/8, $0x3f2f1f0f3b2b1b0b
DATA u8I2Perm<>+120(SB)/8, $0x3f2f1f0f3b2b1b0b
GLOBL u8I2Perm<>(SB), RODATA|NOPTR, $128
DATA u8I2Ctl<>+0(SB)/8, $0x1a120a0218100800
DATA u8I2Ctl<>+8(SB)/8, $0x1e160e061c140c04
DATA u8I2Ctl<>+16(SB)/8, $0x1a120a0218100800
DATA u8I2Ctl<>+24(SB)/8, $0x1e160e061c140c04
DATA u8I2Ctl<>+32(SB)/8, $0x1a120a0218100800
DATA u8I2Ctl<>+40(SB)/8, $0x1e160e061c140c04
DATA u8I2Ctl<>+48(SB)/8, $0x1a120a0218100800
DATA u8I2Ctl<>+56(SB)/8, $0x1e160e061c140c04
DATA u8I2Ctl<>+64(SB)/8, $0x3a322a2238302820
DATA u8I2Ctl<>+72(SB)/8, $0x3e362e263c342c24
DATA u8I2Ctl<>+80(SB)/8, $0x3a322a2238302820
DATA u8I2Ctl<>+88(SB)/8, $0x3e362e263c342c24
DATA u8I2Ctl<>+96(SB)/8, $0x3a322a2238302820
DATA u8I2Ctl<>+104(SB)/8, $0x3e362e263c342c24
DATA u8I2Ctl<>+112(SB)/8, $0x3a322a2238302820
DATA u8I2Ctl<>+120(SB)/8, $0x3e362e263c342c24
GLOBL u8I2Ctl<>(SB), RODATA|NOPTR, $128
DATA u8I4Ctl<>+0(SB)/8, $0x1c140c0418100800
DATA u8I4Ctl<>+8(SB)/8, $0x3c342c2438302820
GLOBL u8I4Ctl<>(SB), RODATA|NOPTR, $16

// U8OUT adds one row's four int32 sums (channels c0..c0+63 in order),
// converted and times the row's step Z26, to the floats at (AX).
#define U8OUT(A, B, C, D) \
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

// func pvU8I4x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 4 rows of packed int4 codes (kernels.go).
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
	VPBROADCASTQ u8I4Ctl<>+0(SB), Z30
	VPBROADCASTQ u8I4Ctl<>+8(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ  gshift+72(FP), CX
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ ldq+40(FP), R8
	ADDQ  wq+24(FP), R8              // this 64-channel pass's weights
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $1, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $2, CX
	JZ    out
quad:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	LEAQ         (SI)(DX*2), AX
	VMOVDQU64    (SI), Y20
	VINSERTI64X4 $1, (SI)(DX*1), Z20, Z20
	VMOVDQU64    (AX), Y21
	VINSERTI64X4 $1, (AX)(DX*1), Z21, Z21
	VMOVDQA64    Z20, Z22
	VPERMT2B     Z21, Z28, Z22
	VPERMT2B     Z21, Z29, Z20
	VPMULTISHIFTQB Z22, Z30, Z16
	VPMULTISHIFTQB Z22, Z31, Z17
	VPMULTISHIFTQB Z20, Z30, Z18
	VPMULTISHIFTQB Z20, Z31, Z19
	VPANDD       Z23, Z16, Z16
	VPANDD       Z23, Z17, Z17
	VPANDD       Z23, Z18, Z18
	VPANDD       Z23, Z19, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	VPDPBUSD     Z16, Z24, Z0
	VPDPBUSD     Z17, Z24, Z1
	VPDPBUSD     Z18, Z24, Z2
	VPDPBUSD     Z19, Z24, Z3
	VPDPBUSD     Z16, Z25, Z4
	VPDPBUSD     Z17, Z25, Z5
	VPDPBUSD     Z18, Z25, Z6
	VPDPBUSD     Z19, Z25, Z7
	VPDPBUSD     Z16, Z26, Z8
	VPDPBUSD     Z17, Z26, Z9
	VPDPBUSD     Z18, Z26, Z10
	VPDPBUSD     Z19, Z26, Z11
	VPDPBUSD     Z16, Z27, Z12
	VPDPBUSD     Z17, Z27, Z13
	VPDPBUSD     Z18, Z27, Z14
	VPDPBUSD     Z19, Z27, Z15
	ADDQ         $4, R8
	LEAQ         (SI)(DX*4), SI
	DECQ         CX
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT(Z8, Z9, Z10, Z11)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	U8OUT(Z12, Z13, Z14, Z15)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I4x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 2 rows of packed int4 codes (kernels.go).
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
	VPBROADCASTQ u8I4Ctl<>+0(SB), Z30
	VPBROADCASTQ u8I4Ctl<>+8(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ  gshift+72(FP), CX
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ ldq+40(FP), R8
	ADDQ  wq+24(FP), R8              // this 64-channel pass's weights
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $1, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $2, CX
	JZ    out
quad:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	LEAQ         (SI)(DX*2), AX
	VMOVDQU64    (SI), Y20
	VINSERTI64X4 $1, (SI)(DX*1), Z20, Z20
	VMOVDQU64    (AX), Y21
	VINSERTI64X4 $1, (AX)(DX*1), Z21, Z21
	VMOVDQA64    Z20, Z22
	VPERMT2B     Z21, Z28, Z22
	VPERMT2B     Z21, Z29, Z20
	VPMULTISHIFTQB Z22, Z30, Z16
	VPMULTISHIFTQB Z22, Z31, Z17
	VPMULTISHIFTQB Z20, Z30, Z18
	VPMULTISHIFTQB Z20, Z31, Z19
	VPANDD       Z23, Z16, Z16
	VPANDD       Z23, Z17, Z17
	VPANDD       Z23, Z18, Z18
	VPANDD       Z23, Z19, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPDPBUSD     Z16, Z24, Z0
	VPDPBUSD     Z17, Z24, Z1
	VPDPBUSD     Z18, Z24, Z2
	VPDPBUSD     Z19, Z24, Z3
	VPDPBUSD     Z16, Z25, Z4
	VPDPBUSD     Z17, Z25, Z5
	VPDPBUSD     Z18, Z25, Z6
	VPDPBUSD     Z19, Z25, Z7
	ADDQ         $4, R8
	LEAQ         (SI)(DX*4), SI
	DECQ         CX
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT(Z4, Z5, Z6, Z7)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I2x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 4 rows of packed int2 codes (kernels.go).
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
	VMOVDQU64    u8I2Perm<>+64(SB), Z29
	VMOVDQU64    u8I2Ctl<>+0(SB), Z30
	VMOVDQU64    u8I2Ctl<>+64(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ  gshift+72(FP), CX
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ ldq+40(FP), R8
	ADDQ  wq+24(FP), R8              // this 64-channel pass's weights
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $2, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $2, CX
	JZ    out
quad:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	LEAQ         (SI)(DX*2), AX
	VMOVDQU64    (SI), X20
	VINSERTI32X4 $1, (SI)(DX*1), Z20, Z20
	VINSERTI32X4 $2, (AX), Z20, Z20
	VINSERTI32X4 $3, (AX)(DX*1), Z20, Z20
	VPERMB       Z20, Z28, Z22
	VPERMB       Z20, Z29, Z20
	VPMULTISHIFTQB Z22, Z30, Z16
	VPMULTISHIFTQB Z22, Z31, Z17
	VPMULTISHIFTQB Z20, Z30, Z18
	VPMULTISHIFTQB Z20, Z31, Z19
	VPANDD       Z23, Z16, Z16
	VPANDD       Z23, Z17, Z17
	VPANDD       Z23, Z18, Z18
	VPANDD       Z23, Z19, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	VPDPBUSD     Z16, Z24, Z0
	VPDPBUSD     Z17, Z24, Z1
	VPDPBUSD     Z18, Z24, Z2
	VPDPBUSD     Z19, Z24, Z3
	VPDPBUSD     Z16, Z25, Z4
	VPDPBUSD     Z17, Z25, Z5
	VPDPBUSD     Z18, Z25, Z6
	VPDPBUSD     Z19, Z25, Z7
	VPDPBUSD     Z16, Z26, Z8
	VPDPBUSD     Z17, Z26, Z9
	VPDPBUSD     Z18, Z26, Z10
	VPDPBUSD     Z19, Z26, Z11
	VPDPBUSD     Z16, Z27, Z12
	VPDPBUSD     Z17, Z27, Z13
	VPDPBUSD     Z18, Z27, Z14
	VPDPBUSD     Z19, Z27, Z15
	ADDQ         $4, R8
	LEAQ         (SI)(DX*4), SI
	DECQ         CX
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	U8OUT(Z8, Z9, Z10, Z11)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	U8OUT(Z12, Z13, Z14, Z15)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func pvU8I2x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvU8 for 2 rows of packed int2 codes (kernels.go).
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
	VMOVDQU64    u8I2Perm<>+64(SB), Z29
	VMOVDQU64    u8I2Ctl<>+0(SB), Z30
	VMOVDQU64    u8I2Ctl<>+64(SB), Z31
	XORQ         BX, BX              // c0, channels
half:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ  gshift+72(FP), CX
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ ldq+40(FP), R8
	ADDQ  wq+24(FP), R8              // this 64-channel pass's weights
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $2, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $2, CX
	JZ    out
quad:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	LEAQ         (SI)(DX*2), AX
	VMOVDQU64    (SI), X20
	VINSERTI32X4 $1, (SI)(DX*1), Z20, Z20
	VINSERTI32X4 $2, (AX), Z20, Z20
	VINSERTI32X4 $3, (AX)(DX*1), Z20, Z20
	VPERMB       Z20, Z28, Z22
	VPERMB       Z20, Z29, Z20
	VPMULTISHIFTQB Z22, Z30, Z16
	VPMULTISHIFTQB Z22, Z31, Z17
	VPMULTISHIFTQB Z20, Z30, Z18
	VPMULTISHIFTQB Z20, Z31, Z19
	VPANDD       Z23, Z16, Z16
	VPANDD       Z23, Z17, Z17
	VPANDD       Z23, Z18, Z18
	VPANDD       Z23, Z19, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPDPBUSD     Z16, Z24, Z0
	VPDPBUSD     Z17, Z24, Z1
	VPDPBUSD     Z18, Z24, Z2
	VPDPBUSD     Z19, Z24, Z3
	VPDPBUSD     Z16, Z25, Z4
	VPDPBUSD     Z17, Z25, Z5
	VPDPBUSD     Z18, Z25, Z6
	VPDPBUSD     Z19, Z25, Z7
	ADDQ         $4, R8
	LEAQ         (SI)(DX*4), SI
	DECQ         CX
	JNZ          quad
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS 0(R13), Z26
	U8OUT(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	U8OUT(Z4, Z5, Z6, Z7)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// HSUM16 folds the 16 lanes of Z0 into X0's first float in the order of
// sum16 (kernels.go): halves 8, 4, 2, 1. OP is VADDPS or VMAXPS.
#define HSUM16(OP) \
	VEXTRACTF64X4 $1, Z0, Y1 \
	OP            Y1, Y0, Y0 \
	VEXTRACTF128  $1, Y0, X1 \
	OP            X1, X0, X0 \
	VPERMILPS     $0x0e, X0, X1 \
	OP            X1, X0, X0 \
	VPERMILPS     $0x01, X0, X1 \
	OP            X1, X0, X0

// func quantWRowsU8AVX512(wq *uint8, ldw, ldq int, p *float32, ldp int, s, z *float32, lds, n, groups, rows int, mid float32, delta, zsum *float32)
// quantWRowsU8 (kernels.go): per row, the largest weight p·s over all
// groups and the zeros' sums Σ p·z (lanes folded as in sum16) in a first
// pass; then per group the weights rounded to u8 steps Δ = max/255
// (VCVTPS2DQ: to nearest even; VPMOVUSDB), and the residues
// w - Δ·rint(w/Δ) summed by lanes, folded, times mid and added to the
// group's zero sum.
TEXT ·quantWRowsU8AVX512(SB), NOSPLIT, $0-112
	MOVQ   lds+56(FP), R10
	SHLQ   $2, R10
	XORQ   R14, R14             // row
row:
	CMPQ   R14, rows+80(FP)
	JGE    done
	MOVQ   ldp+32(FP), SI
	IMULQ  R14, SI
	SHLQ   $2, SI
	ADDQ   p+24(FP), SI         // p row
	MOVQ   groups+72(FP), R12
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
	VMOVAPS  Z5, Z0
	HSUM16(VMAXPS)
	MOVQ     delta+96(FP), DX
	MOVL     $0, (DX)(R14*4)
	VXORPS   X1, X1, X1
	VXORPS   X3, X3, X3         // Δ
	VXORPS   X4, X4, X4         // 1/Δ
	MOVL     $0x437f0000, AX    // 255.0
	VMOVD    AX, X2
	VUCOMISS X1, X0
	JLS      quant
	VDIVSS   X2, X0, X3
	VMOVSS   X3, (DX)(R14*4)
	VDIVSS   X0, X2, X4
quant:
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
	XORQ   DX, DX
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
	VMOVDQU   X4, (DI)(DX*1)
	VCVTDQ2PS Z3, Z3
	VMULPS    Z8, Z3, Z3            // Δ·rint(w/Δ)
	VSUBPS    Z3, Z2, Z2
	VADDPS    Z2, Z6, Z6
	ADDQ      $64, AX
	ADDQ      $16, DX
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
	JMP     row
done:
	VZEROUPPER
	RET

//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The int4 integer path's tile for arm64 with the dot-product extension
// (qint4.go explains the arithmetic; int4VNNI_1x1 is amd64's): per group of
// 128 channels, lane l of the 16 is packed word l; its integer sums
// d1 = Σ nibble·q1 and d2 = Σ nibble·q2 come from SDOT (four byte products
// into a 32-bit lane: the low nibbles against x's q1 and q2 bytes for them,
// then the high nibbles), d = 254·d1 + d2 (MLA, exact in int32), then
// acc_l += float32(float32(d)·(s·sx_l)) and zs += float32(z·X̂), and the
// output is tree(acc) + zs: dotInt4Generic's bits. The Go assembler lacks
// these instructions for arm64: WORD encodings behind macros named by their
// mnemonics, register arguments V-register numbers. R18 is never used.

// SDOT Vd.4S, Vn.16B, Vm.16B (FEAT_DotProd)
#define SDOT(d, n, m) WORD $(0x4E809400 | ((m)<<16) | ((n)<<5) | (d))

// MLA Vd.4S, Vn.4S, Vm.4S (integer: Vd += Vn·Vm)
#define MLA4S(d, n, m) WORD $(0x4EA09400 | ((m)<<16) | ((n)<<5) | (d))

// MOVI Vd.4S, #254 and MOVI Vd.16B, #0x0f
#define MOVI254(d) WORD $(0x4F0707C0 | (d))
#define MOVI0F(d) WORD $(0x4F00E5E0 | (d))

// AND Vd.16B, Vn.16B, Vm.16B and USHR Vd.16B, Vn.16B, #4
#define AND16B(d, n, m) WORD $(0x4E201C00 | ((m)<<16) | ((n)<<5) | (d))
#define USHR4B(d, n) WORD $(0x6F0C0400 | ((n)<<5) | (d))

// LANES4 handles lanes 4k..4k+3 (words in Vw, x's q1 bytes for the low and
// high nibbles in Vq1l and Vq1h, q2's in Vq2l and Vq2h) into accumulator
// Va: V24-V27 are scratch, V29 holds s, V30 254, V31 the nibble mask; R1
// (sx) advances by 4 floats.
#define LANES4(w, q1l, q1h, q2l, q2h, a) \
	AND16B(24, w, 31); \
	USHR4B(25, w); \
	VEOR V26.B16, V26.B16, V26.B16; \
	VEOR V27.B16, V27.B16, V27.B16; \
	SDOT(26, 24, q1l); \
	SDOT(26, 25, q1h); \
	SDOT(27, 24, q2l); \
	SDOT(27, 25, q2h); \
	MLA4S(27, 26, 30); \
	SCVTF4S(27, 27); \
	VLD1.P 16(R1), [V26.S4]; \
	FMUL4S(26, 29, 26); \
	FMUL4S(27, 27, 26); \
	FADD4S(a, a, 27)

// func int4SDOT_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)
TEXT ·int4SDOT_1x1(SB), NOSPLIT, $0-72
	MOVD xq+0(FP), R0
	MOVD sx+8(FP), R1
	MOVD xsum+16(FP), R2
	MOVD w+24(FP), R3
	MOVD rowBytes+40(FP), R5
	MOVD dst+48(FP), R6
	MOVD pz+56(FP), R7
	MOVD ps+64(FP), R8
	MOVI0F(31)
	MOVI254(30)
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V28.B16, V28.B16, V28.B16 // zs (F28)
	CBZ R5, i4_reduce
i4_group:
	VLD1R (R7), [V29.S4]  // s
	FMOVS 4(R7), F24      // z
	FMOVS.P 4(R2), F25    // X̂
	FMULS F24, F25, F25
	FADDS F25, F28, F28   // zs += float32(z·X̂)
	ADD R8, R7, R7
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]     // q1, low nibbles
	VLD1.P 64(R0), [V4.B16, V5.B16, V6.B16, V7.B16]     // q1, high nibbles
	VLD1.P 64(R0), [V8.B16, V9.B16, V10.B16, V11.B16]   // q2, low nibbles
	VLD1.P 64(R0), [V12.B16, V13.B16, V14.B16, V15.B16] // q2, high nibbles
	VLD1.P 64(R3), [V20.B16, V21.B16, V22.B16, V23.B16] // 16 packed words
	LANES4(20, 0, 4, 8, 12, 16)
	LANES4(21, 1, 5, 9, 13, 17)
	LANES4(22, 2, 6, 10, 14, 18)
	LANES4(23, 3, 7, 11, 15, 19)
	SUBS $64, R5, R5
	BNE i4_group
i4_reduce:
	FADD4S(16, 16, 18)
	FADD4S(17, 17, 19)
	FADD4S(16, 16, 17)
	EXT8(17, 16, 16)
	FADD4S(16, 16, 17)
	FADDPS(0, 16)
	FADDS F28, F0, F0
	FMOVS F0, (R6)
	RET

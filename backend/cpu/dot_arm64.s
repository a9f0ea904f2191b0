//go:build !purego

// NEON tiles of Linear for arm64 (dot_asm_arm64.go lists them): for one row
// of x against 1 or 4 weight rows, the canonical sum of dot.go. The 16 lanes
// of the canonical order are four 128-bit accumulators per output (lanes
// 0-3, 4-7, 8-11, 12-15); a product is rounded before its add (FMUL then
// FADD, never FMLA), and the lanes reduce by dot.go's tree (acc_l +
// acc_{l+8}, then + l+4, + l+2, + l+1), so every output is bitwise the
// pure-Go tile's. Weights widen exactly: BF16 by SHLL #16, F16 by FCVTL, I8
// by SXTL, SCVTF and a multiply by the group's scale (float32(q)·scale, as
// weight.i8Value).
//
// The Go assembler has no vector floating-point arithmetic for arm64, so
// those instructions are WORD encodings made by the macros below, each
// named by its mnemonic; register arguments are V-register numbers. R18 (the
// platform register on darwin) is never used.

#include "textflag.h"
#include "neon_arm64.h"

// SHLL Vd.4S, Vn.4H, #16 and SHLL2 Vd.4S, Vn.8H, #16 (bf16 -> float32 bits)
#define SHLL16(d, n) WORD $(0x2E613800 | ((n)<<5) | (d))
#define SHLL16HI(d, n) WORD $(0x6E613800 | ((n)<<5) | (d))

// FCVTL Vd.4S, Vn.4H and FCVTL2 Vd.4S, Vn.8H (fp16 -> float32, exact)
#define FCVTL(d, n) WORD $(0x0E217800 | ((n)<<5) | (d))
#define FCVTL2(d, n) WORD $(0x4E217800 | ((n)<<5) | (d))

// SXTL Vd.8H, Vn.8B and SXTL2 Vd.8H, Vn.16B (int8 -> int16)
#define SXTLB(d, n) WORD $(0x0F08A400 | ((n)<<5) | (d))
#define SXTL2B(d, n) WORD $(0x4F08A400 | ((n)<<5) | (d))

// SXTL Vd.4S, Vn.4H and SXTL2 Vd.4S, Vn.8H (int16 -> int32)
#define SXTLH(d, n) WORD $(0x0F10A400 | ((n)<<5) | (d))
#define SXTL2H(d, n) WORD $(0x4F10A400 | ((n)<<5) | (d))

// ZERO4 clears four vector registers.
#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16

// LOADW_* load the next 16 weights of the row at rp (advancing rp) into
// V4-V7 as float32: lanes 0-3, 4-7, 8-11, 12-15. They use V8-V9 (BF16,
// F16) or V12-V14 (I8) as scratch.
#define LOADW_F32(rp) \
	VLD1.P 64(rp), [V4.S4, V5.S4, V6.S4, V7.S4]

#define LOADW_BF16(rp) \
	VLD1.P 32(rp), [V8.H8, V9.H8]; \
	SHLL16(4, 8); \
	SHLL16HI(5, 8); \
	SHLL16(6, 9); \
	SHLL16HI(7, 9)

#define LOADW_F16(rp) \
	VLD1.P 32(rp), [V8.H8, V9.H8]; \
	FCVTL(4, 8); \
	FCVTL2(5, 8); \
	FCVTL(6, 9); \
	FCVTL2(7, 9)

// LOADW_I8 also multiplies by the row's scale, broadcast in V(s).
#define LOADW_I8(rp, s) \
	VLD1.P 16(rp), [V12.B16]; \
	SXTLB(13, 12); \
	SXTL2B(14, 12); \
	SXTLH(4, 13); \
	SXTL2H(5, 13); \
	SXTLH(6, 14); \
	SXTL2H(7, 14); \
	SCVTF4S(4, 4); \
	SCVTF4S(5, 5); \
	SCVTF4S(6, 6); \
	SCVTF4S(7, 7); \
	FMUL4S(4, 4, s); \
	FMUL4S(5, 5, s); \
	FMUL4S(6, 6, s); \
	FMUL4S(7, 7, s)

// ACC adds the products of x (V0-V3) and the weights (V4-V7, overwritten)
// to the accumulators Va..Vd: lane by lane, the product rounded first.
#define ACC(a, b, c, d) \
	FMUL4S(4, 0, 4); \
	FMUL4S(5, 1, 5); \
	FMUL4S(6, 2, 6); \
	FMUL4S(7, 3, 7); \
	FADD4S(a, a, 4); \
	FADD4S(b, b, 5); \
	FADD4S(c, c, 6); \
	FADD4S(d, d, 7)

// REDUCE reduces the accumulators Va..Vd (lanes 0-15) into Sr by the
// canonical tree: v = lanes l + l+8 (Va+Vc, Vb+Vd), r = v_l + v_{l+4}, u_l
// = r_l + r_{l+2} (r plus r rotated by 8 bytes), s = u_0 + u_1. It
// overwrites Va and Vb.
#define REDUCE(a, b, c, d, r) \
	FADD4S(a, a, c); \
	FADD4S(b, b, d); \
	FADD4S(a, a, b); \
	EXT8(b, a, a); \
	FADD4S(a, a, b); \
	FADDPS(r, a)

// The packed wq formats (qdot.go): FIELD extracts field (w << l) >> r of
// the 16 words' lanes in Vw (in place: shifts l then r, SHL and USHR on
// 32-bit lanes), converts it to float (UCVTF), makes ŵ = s·q + z (Vs, Vz:
// FMUL then FADD, which is the FMA's value since s·q is exact) and adds
// x·ŵ (x lanes in Vx, x = V0-V3 by k) to Va, the product rounded first.
// SHL Vd.4S, Vn.4S, #l (0 <= l < 32) and USHR Vd.4S, Vn.4S, #r (0 < r <= 32)
#define SHL4S(d, n, l) WORD $(0x4F005400 | ((32+(l))<<16) | ((n)<<5) | (d))
#define USHR4S(d, n, r) WORD $(0x6F000400 | ((64-(r))<<16) | ((n)<<5) | (d))
// UCVTF Vd.4S, Vn.4S
#define UCVTF4S(d, n) WORD $(0x6E21D800 | ((n)<<5) | (d))

#define FIELD(w, l, r, s, z, k, a) \
	SHL4S(w, w, l); \
	USHR4S(w, w, r); \
	UCVTF4S(w, w); \
	FMUL4S(w, w, s); \
	FADD4S(w, w, z); \
	FMUL4S(w, w, k); \
	FADD4S(a, a, w)

// The tiles' bodies. Every tile takes (x, xs, w, ws, k16, dst, ds, sc, ss)
// (dot_asm_arm64.go); the 1x4 tiles read rows w, w+ws, w+2ws, w+3ws. The
// labels are each TEXT's own (the assembler scopes labels to a function).

// TILE_1x1 is the 1x1 tile whose 16 weights a step LOAD(rp) widens.
#define TILE_1x1(LOAD) \
	MOVD x+0(FP), R0; \
	MOVD w+16(FP), R1; \
	MOVD k16+32(FP), R5; \
	MOVD dst+40(FP), R6; \
	ZERO4(V16, V17, V18, V19); \
	CBZ R5, reduce; \
loop: \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	LOAD(R1); \
	ACC(16, 17, 18, 19); \
	SUBS $16, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE(16, 17, 18, 19, 8); \
	FMOVS F8, 0(R6); \
	RET

// ROWS_1x4 sets R1-R4 to the four weight rows and R5, R6 to k16 and dst,
// and clears the 1x4 tiles' accumulators V16-V31.
#define ROWS_1x4 \
	MOVD x+0(FP), R0; \
	MOVD w+16(FP), R1; \
	MOVD ws+24(FP), R10; \
	ADD R10, R1, R2; \
	ADD R10, R2, R3; \
	ADD R10, R3, R4; \
	MOVD k16+32(FP), R5; \
	MOVD dst+40(FP), R6; \
	ZERO4(V16, V17, V18, V19); \
	ZERO4(V20, V21, V22, V23); \
	ZERO4(V24, V25, V26, V27); \
	ZERO4(V28, V29, V30, V31)

// REDUCE_1x4 stores the 1x4 tiles' four sums at dst.
#define REDUCE_1x4 \
	REDUCE(16, 17, 18, 19, 8); \
	FMOVS F8, 0(R6); \
	REDUCE(20, 21, 22, 23, 9); \
	FMOVS F9, 4(R6); \
	REDUCE(24, 25, 26, 27, 10); \
	FMOVS F10, 8(R6); \
	REDUCE(28, 29, 30, 31, 11); \
	FMOVS F11, 12(R6)

// TILE_1x4 is the 1x4 tile whose 16 weights a step and row LOAD(rp) widens.
#define TILE_1x4(LOAD) \
	ROWS_1x4; \
	CBZ R5, reduce; \
loop: \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	LOAD(R1); \
	ACC(16, 17, 18, 19); \
	LOAD(R2); \
	ACC(20, 21, 22, 23); \
	LOAD(R3); \
	ACC(24, 25, 26, 27); \
	LOAD(R4); \
	ACC(28, 29, 30, 31); \
	SUBS $16, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE_1x4; \
	RET

// I8_1x1 is the I8 1x1 tile for groups of chunks·16 weights: each group
// broadcasts its row's scale (sc, a stride of ss a group) into V8.
#define I8_1x1(chunks) \
	MOVD x+0(FP), R0; \
	MOVD w+16(FP), R1; \
	MOVD k16+32(FP), R5; \
	MOVD dst+40(FP), R6; \
	MOVD sc+56(FP), R8; \
	MOVD ss+64(FP), R9; \
	MOVD $0, R7; \
	ZERO4(V16, V17, V18, V19); \
	CBZ R5, reduce; \
loop: \
	CBNZ R7, chunk; \
	VLD1R (R8), [V8.S4]; \
	ADD R9, R8, R8; \
	MOVD $chunks, R7; \
chunk: \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	LOADW_I8(R1, 8); \
	ACC(16, 17, 18, 19); \
	SUB $1, R7, R7; \
	SUBS $16, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE(16, 17, 18, 19, 8); \
	FMOVS F8, 0(R6); \
	RET

// I8_1x4 is I8_1x1 for four rows: their scales sc[0..3] in V8-V11. R7 counts
// the chunks of 16 left in the current group.
#define I8_1x4(chunks) \
	ROWS_1x4; \
	MOVD sc+56(FP), R8; \
	MOVD ss+64(FP), R9; \
	MOVD $0, R7; \
	CBZ R5, reduce; \
loop: \
	CBNZ R7, chunk; \
	VLD1R (R8), [V8.S4]; \
	ADD $4, R8, R11; \
	VLD1R (R11), [V9.S4]; \
	ADD $8, R8, R11; \
	VLD1R (R11), [V10.S4]; \
	ADD $12, R8, R11; \
	VLD1R (R11), [V11.S4]; \
	ADD R9, R8, R8; \
	MOVD $chunks, R7; \
chunk: \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	LOADW_I8(R1, 8); \
	ACC(16, 17, 18, 19); \
	LOADW_I8(R2, 9); \
	ACC(20, 21, 22, 23); \
	LOADW_I8(R3, 10); \
	ACC(24, 25, 26, 27); \
	LOADW_I8(R4, 11); \
	ACC(28, 29, 30, 31); \
	SUB $1, R7, R7; \
	SUBS $16, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE_1x4; \
	RET

// func dotF32_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotF32_1x1NEON(SB), NOSPLIT, $0-72
	TILE_1x1(LOADW_F32)

// func dotF32_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotF32_1x4NEON(SB), NOSPLIT, $0-72
	TILE_1x4(LOADW_F32)

// func dotBF16_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotBF16_1x1NEON(SB), NOSPLIT, $0-72
	TILE_1x1(LOADW_BF16)

// func dotBF16_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotBF16_1x4NEON(SB), NOSPLIT, $0-72
	TILE_1x4(LOADW_BF16)

// func dotF16_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotF16_1x1NEON(SB), NOSPLIT, $0-72
	TILE_1x1(LOADW_F16)

// func dotF16_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotF16_1x4NEON(SB), NOSPLIT, $0-72
	TILE_1x4(LOADW_F16)

// func dotI8G32_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G32_1x1NEON(SB), NOSPLIT, $0-72
	I8_1x1(2)

// func dotI8G32_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G32_1x4NEON(SB), NOSPLIT, $0-72
	I8_1x4(2)

// func dotI8G64_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G64_1x1NEON(SB), NOSPLIT, $0-72
	I8_1x1(4)

// func dotI8G64_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G64_1x4NEON(SB), NOSPLIT, $0-72
	I8_1x4(4)

// func dotI8G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G128_1x1NEON(SB), NOSPLIT, $0-72
	I8_1x1(8)

// func dotI8G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotI8G128_1x4NEON(SB), NOSPLIT, $0-72
	I8_1x4(8)

// The packed wq tiles (int8 and int4 codes, groups of 128, a scale and a
// zero a row and group at sc + 8·row; the row's bytes in k16). Each step
// reads 64 bytes of a row: 16 words of four (int8) or eight (int4) code
// fields, the field at bit l of every word taken by FIELD(·, l, r, ...)
// against 16 values of x (V0-V3), x advancing by 64 floats a field.

// WQ_ROW applies FIELD at bits l (field width 32 - r) to the row's 16 words
// in V4-V7 with scale and zero in Vs, Vz, adding into a0-a3.
#define WQ_ROW(l, r, s, z, a0, a1, a2, a3) \
	FIELD(4, l, r, s, z, 0, a0); \
	FIELD(5, l, r, s, z, 1, a1); \
	FIELD(6, l, r, s, z, 2, a2); \
	FIELD(7, l, r, s, z, 3, a3)

// WQ_FIELD_1x1 and WQ_FIELD_1x4 are one field of a step for one row (R1)
// and for four (R1-R4, scales and zeros in V8-V15).
#define WQ_FIELD_1x1(l, r) \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1 (R1), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	WQ_ROW(l, r, 8, 9, 16, 17, 18, 19)

#define WQ_FIELD_1x4(l, r) \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1 (R1), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	WQ_ROW(l, r, 8, 9, 16, 17, 18, 19); \
	VLD1 (R2), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	WQ_ROW(l, r, 10, 11, 20, 21, 22, 23); \
	VLD1 (R3), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	WQ_ROW(l, r, 12, 13, 24, 25, 26, 27); \
	VLD1 (R4), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	WQ_ROW(l, r, 14, 15, 28, 29, 30, 31)

// WQ8_STEP and WQ4_STEP are a step's fields, high bits first, each by
// FIELD_(l, r): four int8 fields, eight int4 fields.
#define WQ8_STEP(FIELD_) \
	FIELD_(24, 24); \
	FIELD_(16, 24); \
	FIELD_(8, 24); \
	FIELD_(0, 24)

#define WQ4_STEP(FIELD_) \
	FIELD_(28, 28); \
	FIELD_(24, 28); \
	FIELD_(20, 28); \
	FIELD_(16, 28); \
	FIELD_(12, 28); \
	FIELD_(8, 28); \
	FIELD_(4, 28); \
	FIELD_(0, 28)

// WQ_1x1 is the one-row wq tile whose steps STEP takes, chunks steps a
// group: each group broadcasts the row's scale and zero into V8, V9.
#define WQ_1x1(chunks, STEP) \
	MOVD x+0(FP), R0; \
	MOVD w+16(FP), R1; \
	MOVD k16+32(FP), R5; \
	MOVD dst+40(FP), R6; \
	MOVD sc+56(FP), R8; \
	MOVD ss+64(FP), R9; \
	MOVD $0, R7; \
	ZERO4(V16, V17, V18, V19); \
	CBZ R5, reduce; \
loop: \
	CBNZ R7, chunk; \
	VLD1R (R8), [V8.S4]; \
	ADD $4, R8, R11; \
	VLD1R (R11), [V9.S4]; \
	ADD R9, R8, R8; \
	MOVD $chunks, R7; \
chunk: \
	STEP(WQ_FIELD_1x1); \
	ADD $64, R1; \
	SUB $1, R7, R7; \
	SUBS $64, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE(16, 17, 18, 19, 8); \
	FMOVS F8, 0(R6); \
	RET

// WQ_1x4 is WQ_1x1 for four rows: row c's scale and zero in V8+2c, V9+2c.
#define WQ_1x4(chunks, STEP) \
	ROWS_1x4; \
	MOVD sc+56(FP), R8; \
	MOVD ss+64(FP), R9; \
	MOVD $0, R7; \
	CBZ R5, reduce; \
loop: \
	CBNZ R7, chunk; \
	VLD1R (R8), [V8.S4]; \
	ADD $4, R8, R11; \
	VLD1R (R11), [V9.S4]; \
	ADD $8, R8, R11; \
	VLD1R (R11), [V10.S4]; \
	ADD $12, R8, R11; \
	VLD1R (R11), [V11.S4]; \
	ADD $16, R8, R11; \
	VLD1R (R11), [V12.S4]; \
	ADD $20, R8, R11; \
	VLD1R (R11), [V13.S4]; \
	ADD $24, R8, R11; \
	VLD1R (R11), [V14.S4]; \
	ADD $28, R8, R11; \
	VLD1R (R11), [V15.S4]; \
	ADD R9, R8, R8; \
	MOVD $chunks, R7; \
chunk: \
	STEP(WQ_FIELD_1x4); \
	ADD $64, R1; \
	ADD $64, R2; \
	ADD $64, R3; \
	ADD $64, R4; \
	SUB $1, R7, R7; \
	SUBS $64, R5, R5; \
	BNE loop; \
reduce: \
	REDUCE_1x4; \
	RET

// func dotWQ8G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotWQ8G128_1x1NEON(SB), NOSPLIT, $0-72
	WQ_1x1(2, WQ8_STEP)

// func dotWQ8G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotWQ8G128_1x4NEON(SB), NOSPLIT, $0-72
	WQ_1x4(2, WQ8_STEP)

// func dotWQ4G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotWQ4G128_1x1NEON(SB), NOSPLIT, $0-72
	WQ_1x1(1, WQ4_STEP)

// func dotWQ4G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)
TEXT ·dotWQ4G128_1x4NEON(SB), NOSPLIT, $0-72
	WQ_1x4(1, WQ4_STEP)

//go:build !purego

#include "textflag.h"

// NEON kernels of attn's decode for arm64 (kernels_arm64.go wraps them):
// fp16 conversion, byte codes to float32, int4 unpacking, the float32
// scores, the PV sums, max and dot. The Go assembler has no vector
// floating-point arithmetic for arm64, so those instructions are WORD
// encodings made by the macros below, each named by its mnemonic, register
// arguments V-register numbers. R18 (darwin's platform register) is never
// used.

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FMLA Vd.4S, Vn.4S, Vm.4S (Vd += Vn·Vm, one rounding)
#define FMLA4S(d, n, m) WORD $(0x4E20CC00 | ((m)<<16) | ((n)<<5) | (d))

// FMAX Vd.4S, Vn.4S, Vm.4S
#define FMAX4S(d, n, m) WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d))

// FMAXV Sd, Vn.4S
#define FMAXV4S(d, n) WORD $(0x6E30F800 | ((n)<<5) | (d))

// FADDP Sd, Vn.2S (Sd = Vn.S[0] + Vn.S[1])
#define FADDPS(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// EXT Vd.16B, Vn.16B, Vm.16B, #8
#define EXT8(d, n, m) WORD $(0x6E004000 | ((m)<<16) | ((n)<<5) | (d))

// FCVTL Vd.4S, Vn.4H and FCVTL2 Vd.4S, Vn.8H (fp16 -> float32, exact)
#define FCVTL(d, n) WORD $(0x0E217800 | ((n)<<5) | (d))
#define FCVTL2(d, n) WORD $(0x4E217800 | ((n)<<5) | (d))

// UXTL Vd.8H, Vn.8B and UXTL2 Vd.8H, Vn.16B; UXTL Vd.4S, Vn.4H and UXTL2
// Vd.4S, Vn.8H (zero extension)
#define UXTLB(d, n) WORD $(0x2F08A400 | ((n)<<5) | (d))
#define UXTL2B(d, n) WORD $(0x6F08A400 | ((n)<<5) | (d))
#define UXTLH(d, n) WORD $(0x2F10A400 | ((n)<<5) | (d))
#define UXTL2H(d, n) WORD $(0x6F10A400 | ((n)<<5) | (d))

// UCVTF Vd.4S, Vn.4S (uint32 -> float32)
#define UCVTF4S(d, n) WORD $(0x6E21D800 | ((n)<<5) | (d))

// MOVI Vd.16B, #0x0f
#define MOVI0F(d) WORD $(0x4F00E5E0 | (d))

// AND Vd.16B, Vn.16B, Vm.16B
#define AND16B(d, n, m) WORD $(0x4E201C00 | ((m)<<16) | ((n)<<5) | (d))

// USHR Vd.16B, Vn.16B, #4
#define USHR4B(d, n) WORD $(0x6F0C0400 | ((n)<<5) | (d))

// ZIP1 Vd.16B, Vn.16B, Vm.16B and ZIP2 (bytes of Vn and Vm interleaved,
// Vn's first; ZIP1 the low halves, ZIP2 the high)
#define ZIP1B(d, n, m) WORD $(0x4E003800 | ((m)<<16) | ((n)<<5) | (d))
#define ZIP2B(d, n, m) WORD $(0x4E007800 | ((m)<<16) | ((n)<<5) | (d))

// REDUCE16 sums 16 lanes Va..Vd (lanes 0-3, ..., 12-15) into Sr in
// sum16's order: lanes l + l+8, then + l+4, + l+2, + l+1. It overwrites Va
// and Vb.
#define REDUCE16(a, b, c, d, r) \
	FADD4S(a, a, c); \
	FADD4S(b, b, d); \
	FADD4S(a, a, b); \
	EXT8(b, a, a); \
	FADD4S(a, a, b); \
	FADDPS(r, a)

// func cvtHalfNEON(dst *float32, src *uint16, n int)
// n a multiple of 16.
TEXT ·cvtHalfNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, ch_done
ch_loop:
	VLD1.P 32(R1), [V0.H8, V1.H8]
	FCVTL(4, 0)
	FCVTL2(5, 0)
	FCVTL(6, 1)
	FCVTL2(7, 1)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2, R2
	BNE ch_loop
ch_done:
	RET

// func codesF32NEON(dst *float32, src *uint8, n int)
// n a multiple of 16.
TEXT ·codesF32NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, cf_done
cf_loop:
	VLD1.P 16(R1), [V0.B16]
	UXTLB(1, 0)
	UXTL2B(2, 0)
	UXTLH(4, 1)
	UXTL2H(5, 1)
	UXTLH(6, 2)
	UXTL2H(7, 2)
	UCVTF4S(4, 4)
	UCVTF4S(5, 5)
	UCVTF4S(6, 6)
	UCVTF4S(7, 7)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2, R2
	BNE cf_loop
cf_done:
	RET

// func unpack4NEON(dst *uint8, src *byte, n int)
// n source bytes (a multiple of 16) to 2n codes, the low nibble first.
TEXT ·unpack4NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	MOVI0F(31)
	CBZ R2, u4_done
u4_loop:
	VLD1.P 16(R1), [V0.B16]
	AND16B(1, 0, 31)
	USHR4B(2, 0)
	ZIP1B(3, 1, 2)
	ZIP2B(4, 1, 2)
	VST1.P [V3.B16, V4.B16], 32(R0)
	SUBS $16, R2, R2
	BNE u4_loop
u4_done:
	RET

// func scoresF32NEON(out, q, k, A, B *float32, n, d int, a, b float32)
// out[t] = (a·A[t])·(q·k[t]) + b·B[t] for t < n, k rows of d floats (d a
// multiple of 16): the dot product in 16 lanes (V16-V19, fused
// multiply-adds) reduced as sum16.
TEXT ·scoresF32NEON(SB), NOSPLIT, $0-64
	MOVD out+0(FP), R0
	MOVD q+8(FP), R1
	MOVD k+16(FP), R2
	MOVD A+24(FP), R3
	MOVD B+32(FP), R4
	MOVD n+40(FP), R5
	MOVD d+48(FP), R6
	FMOVS a+56(FP), F20
	FMOVS b+60(FP), F21
	CBZ R5, sc_done
sc_token:
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	MOVD R1, R7
	MOVD R6, R8
sc_chunk:
	VLD1.P 64(R7), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMLA4S(16, 0, 4)
	FMLA4S(17, 1, 5)
	FMLA4S(18, 2, 6)
	FMLA4S(19, 3, 7)
	SUBS $16, R8, R8
	BNE sc_chunk
	REDUCE16(16, 17, 18, 19, 8)
	FMOVS.P 4(R3), F9
	FMOVS.P 4(R4), F10
	FMULS F20, F9, F9   // a·A[t]
	FMULS F9, F8, F8    // · dot
	FMULS F21, F10, F10 // b·B[t]
	FADDS F10, F8, F8
	FMOVS.P F8, 4(R0)
	SUBS $1, R5, R5
	BNE sc_token
sc_done:
	RET

// func pvF32NEON(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, rows, cols int)
// For rows r < rows and 16-column chunks c0 < cols: s = Σ_t w[r·ldw+t]·
// v[t·ldv+c0..c0+16] (tokens of weight 0 skipped, a fused multiply-add per
// term, in token order: axpy's), then acc[r·ldacc+c0..] += s.
TEXT ·pvF32NEON(SB), NOSPLIT, $0-72
	MOVD acc+0(FP), R0
	MOVD ldacc+8(FP), R1
	MOVD w+16(FP), R2
	MOVD ldw+24(FP), R3
	MOVD v+32(FP), R4
	MOVD ldv+40(FP), R5
	MOVD n+48(FP), R6
	MOVD rows+56(FP), R7
	MOVD cols+64(FP), R8
	LSL $2, R1, R1 // strides in bytes
	LSL $2, R3, R3
	LSL $2, R5, R5
	LSL $2, R8, R8 // cols in bytes
	CBZ R7, pv_done
pv_row:
	MOVD $0, R9 // column offset in bytes
pv_chunk:
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	MOVD R2, R10      // w row
	ADD R9, R4, R11   // v + c0
	MOVD R6, R12      // tokens left
	CBZ R12, pv_add
pv_token:
	FMOVS.P 4(R10), F20
	FCMPS $(0.0), F20
	BEQ pv_skip
	VDUP V20.S[0], V20.S4
	VLD1 (R11), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMLA4S(16, 4, 20)
	FMLA4S(17, 5, 20)
	FMLA4S(18, 6, 20)
	FMLA4S(19, 7, 20)
pv_skip:
	ADD R5, R11, R11
	SUBS $1, R12, R12
	BNE pv_token
pv_add:
	ADD R9, R0, R13
	VLD1 (R13), [V0.S4, V1.S4, V2.S4, V3.S4]
	FADD4S(0, 0, 16)
	FADD4S(1, 1, 17)
	FADD4S(2, 2, 18)
	FADD4S(3, 3, 19)
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R13)
	ADD $64, R9, R9
	CMP R8, R9
	BLT pv_chunk
	ADD R1, R0, R0
	ADD R3, R2, R2
	SUBS $1, R7, R7
	BNE pv_row
pv_done:
	RET

// func maxF32NEON(x *float32, n int) float32
// The largest of x[:n] (n a multiple of 16, not 0).
TEXT ·maxF32NEON(SB), NOSPLIT, $0-20
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	VLD1.P 64(R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	SUBS $16, R1, R1
	BEQ mx_reduce
mx_loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMAX4S(16, 16, 0)
	FMAX4S(17, 17, 1)
	FMAX4S(18, 18, 2)
	FMAX4S(19, 19, 3)
	SUBS $16, R1, R1
	BNE mx_loop
mx_reduce:
	FMAX4S(16, 16, 17)
	FMAX4S(18, 18, 19)
	FMAX4S(16, 16, 18)
	FMAXV4S(0, 16)
	FMOVS F0, ret+16(FP)
	RET

// func dotF32NEON(a, b *float32, n int) float32
// Σ a[i]·b[i] in 16 lanes (lane i%16, a fused multiply-add per term)
// reduced as sum16; n a multiple of 16.
TEXT ·dotF32NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	CBZ R2, dt_reduce
dt_loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMLA4S(16, 0, 4)
	FMLA4S(17, 1, 5)
	FMLA4S(18, 2, 6)
	FMLA4S(19, 3, 7)
	SUBS $16, R2, R2
	BNE dt_loop
dt_reduce:
	REDUCE16(16, 17, 18, 19, 0)
	FMOVS F0, ret+24(FP)
	RET

// FSUB, FMUL Vd.4S, Vn.4S, Vm.4S; FMLS Vd.4S, Vn.4S, Vm.4S (Vd -= Vn·Vm,
// one rounding)
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))
#define FMLS4S(d, n, m) WORD $(0x4EA0CC00 | ((m)<<16) | ((n)<<5) | (d))

// FCMGE Vd.4S, Vn.4S, Vm.4S (all ones where Vn >= Vm; false for NaN)
#define FCMGE4S(d, n, m) WORD $(0x6E20E400 | ((m)<<16) | ((n)<<5) | (d))

// FRINTN Vd.4S, Vn.4S (round to nearest, ties to even) and FCVTZS Vd.4S,
// Vn.4S (to int32)
#define FRINTN4S(d, n) WORD $(0x4E218800 | ((n)<<5) | (d))
#define FCVTZS4S(d, n) WORD $(0x4EA1B800 | ((n)<<5) | (d))

// ADD Vd.4S, Vn.4S, Vm.4S (int32) and SHL Vd.4S, Vn.4S, #23
#define ADD4S(d, n, m) WORD $(0x4EA08400 | ((m)<<16) | ((n)<<5) | (d))
#define SHL23(d, n) WORD $(0x4F375400 | ((n)<<5) | (d))

// expSub's constants (kernels.go's exp32): expMin, log2 e, C1, C2, P0..P5,
// 1, and the exponent bias 127 as an int32.
DATA expConst<>+0(SB)/4, $0xc2aeac4f  // expMin
DATA expConst<>+4(SB)/4, $0x3fb8aa3b  // expLog2e
DATA expConst<>+8(SB)/4, $0x3f318000  // expC1
DATA expConst<>+12(SB)/4, $0xb95e8083 // expC2
DATA expConst<>+16(SB)/4, $0x39506967 // expP0
DATA expConst<>+20(SB)/4, $0x3ab743ce // expP1
DATA expConst<>+24(SB)/4, $0x3c088908 // expP2
DATA expConst<>+28(SB)/4, $0x3d2aa9c1 // expP3
DATA expConst<>+32(SB)/4, $0x3e2aaaaa // expP4
DATA expConst<>+36(SB)/4, $0x3f000000 // expP5
DATA expConst<>+40(SB)/4, $0x3f800000 // 1
DATA expConst<>+44(SB)/4, $127        // exponent bias
GLOBL expConst<>(SB), RODATA|NOPTR, $48

// EXP4 replaces Vv (4 scores) by exp32(v − m) (0 below expMin, for −Inf and
// NaN) and adds the results to Va: exp32's steps with its multiply-adds
// fused, as Go compiles them on arm64. V4-V7 are scratch; V16-V28 hold m
// and the constants.
#define EXP4(v, a) \
	FSUB4S(v, v, 16); \
	FCMGE4S(7, v, 17); \
	FMUL4S(4, v, 18); \
	FRINTN4S(4, 4); \
	FMLS4S(v, 4, 19); \
	FMLS4S(v, 4, 20); \
	VMOV V22.B16, V5.B16; \
	FMLA4S(5, 21, v); \
	VMOV V23.B16, V6.B16; \
	FMLA4S(6, 5, v); \
	VMOV V24.B16, V5.B16; \
	FMLA4S(5, 6, v); \
	VMOV V25.B16, V6.B16; \
	FMLA4S(6, 5, v); \
	VMOV V26.B16, V5.B16; \
	FMLA4S(5, 6, v); \
	FMUL4S(6, v, v); \
	FMLA4S(v, 5, 6); \
	FADD4S(v, v, 27); \
	FCVTZS4S(4, 4); \
	ADD4S(4, 4, 28); \
	SHL23(4, 4); \
	FMUL4S(v, v, 4); \
	AND16B(v, v, 7); \
	FADD4S(a, a, v)

// func expSubNEON(x *float32, n int, m float32) float32
// x[i] = exp32(x[i] − m) for i < n (a multiple of 16) and the sum of the
// results in 16 lanes (lane i%16) reduced as sum16.
TEXT ·expSubNEON(SB), NOSPLIT, $0-28
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD $m+16(FP), R2
	VLD1R (R2), [V16.S4]
	MOVD $expConst<>(SB), R3
	VLD1R.P 4(R3), [V17.S4]
	VLD1R.P 4(R3), [V18.S4]
	VLD1R.P 4(R3), [V19.S4]
	VLD1R.P 4(R3), [V20.S4]
	VLD1R.P 4(R3), [V21.S4]
	VLD1R.P 4(R3), [V22.S4]
	VLD1R.P 4(R3), [V23.S4]
	VLD1R.P 4(R3), [V24.S4]
	VLD1R.P 4(R3), [V25.S4]
	VLD1R.P 4(R3), [V26.S4]
	VLD1R.P 4(R3), [V27.S4]
	VLD1R (R3), [V28.S4]
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	CBZ R1, ex_reduce
ex_loop:
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	EXP4(0, 8)
	EXP4(1, 9)
	EXP4(2, 10)
	EXP4(3, 11)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS $16, R1, R1
	BNE ex_loop
ex_reduce:
	REDUCE16(8, 9, 10, 11, 0)
	FMOVS F0, ret+24(FP)
	RET

// The integer-key scores with the dot-product extension (FEAT_DotProd).

// SDOT Vd.4S, Vn.16B, Vm.16B (signed bytes, four products into each 32-bit
// lane, exact)
#define SDOT(d, n, m) WORD $(0x4E809400 | ((m)<<16) | ((n)<<5) | (d))

// ADDP Vd.4S, Vn.4S, Vm.4S (integer pairwise; ADD4S is above)
#define ADDP4S(d, n, m) WORD $(0x4EA0BC00 | ((m)<<16) | ((n)<<5) | (d))

// MOVI Vd.16B, #0x80
#define MOVI80(d) WORD $(0x4F04E400 | (d))

// SCVTF Vd.4S, Vn.4S (int32 -> float32, rounded to nearest; FMUL4S is
// above)
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))

// func scoresU8SDOT(out *float32, q *int8, k *uint8, A, B *float32, n, d int, a, b, c float32, corr int32)
// scoresU8Go's arithmetic four tokens at a time (n a multiple of 4, d of
// 16): SDOT takes signed bytes, so each code is read as code-128 (EOR
// 0x80) and corr = 128·Σq added back: the exact int32 sum Σ q·code. The
// float steps are those Go compiles scoresU8Go to on arm64: a·A[t], times
// float32(s), then B[t]·b added by a fused multiply-add, and where c is not
// 0 (NaN included) out[t]·c by another: the same bits.
TEXT ·scoresU8SDOT(SB), NOSPLIT, $0-72
	MOVD out+0(FP), R0
	MOVD q+8(FP), R1
	MOVD k+16(FP), R2
	MOVD A+24(FP), R3
	MOVD B+32(FP), R4
	MOVD n+40(FP), R5
	MOVD d+48(FP), R6
	FMOVS a+56(FP), F20
	FMOVS b+60(FP), F21
	FMOVS c+64(FP), F22
	MOVW corr+68(FP), R7
	VDUP V20.S[0], V20.S4
	VDUP V21.S[0], V21.S4
	VDUP V22.S[0], V22.S4
	VDUP R7, V23.S4
	MOVI80(31)
	CBZ R5, su_done
su_tokens:
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	MOVD R1, R8         // q
	MOVD R2, R9         // token t's row
	ADD R6, R9, R10     // t+1
	ADD R6, R10, R11    // t+2
	ADD R6, R11, R12    // t+3
	MOVD R6, R13
su_chunk:
	VLD1.P 16(R8), [V4.B16]
	VLD1.P 16(R9), [V5.B16]
	VLD1.P 16(R10), [V6.B16]
	VLD1.P 16(R11), [V7.B16]
	VLD1.P 16(R12), [V16.B16]
	VEOR V31.B16, V5.B16, V5.B16
	VEOR V31.B16, V6.B16, V6.B16
	VEOR V31.B16, V7.B16, V7.B16
	VEOR V31.B16, V16.B16, V16.B16
	SDOT(0, 5, 4)
	SDOT(1, 6, 4)
	SDOT(2, 7, 4)
	SDOT(3, 16, 4)
	SUBS $16, R13, R13
	BNE su_chunk
	MOVD R12, R2        // the next four tokens' rows
	ADDP4S(0, 0, 1)     // lane pairs of tokens t, t+1
	ADDP4S(2, 2, 3)     // t+2, t+3
	ADDP4S(0, 0, 2)     // the four sums, token order
	ADD4S(0, 0, 23)     // + 128·Σq
	SCVTF4S(0, 0)
	VLD1.P 16(R3), [V8.S4]
	VLD1.P 16(R4), [V9.S4]
	FMUL4S(8, 8, 20)    // A[t]·a
	FMUL4S(0, 0, 8)     // float32(s)·(a·A[t])
	FMLA4S(0, 9, 21)    // + B[t]·b, one rounding
	FCMPS $(0.0), F22
	BEQ su_store
	VLD1 (R0), [V10.S4]
	FMLA4S(0, 10, 22)   // + out[t]·c, one rounding
su_store:
	VST1.P [V0.S4], 16(R0)
	SUBS $4, R5, R5
	BNE su_tokens
su_done:
	RET

// ST1 {Vt.4S}, [Xn], #16 (Xn a general register number)
#define ST1P4S(t, n) WORD $(0x4C9F7800 | ((n)<<5) | (t))

// X4SUM folds the four tokens' lane sums of one row, Vt0..Vt3
// (overwritten), into Vt0 by ADDP, adds 128·Σq of the row (corr, at
// coff(R15)) and converts to float32, then takes scoresU8Go's float steps
// with the row's a and b (aoff(R7), boff(R7)): A·a (A in V24), times
// float32(s), B·b (B in V25) added by a fused multiply-add.
#define X4SUM(t0, t1, t2, t3, coff, aoff, boff) \
	ADDP4S(t0, t0, t1); \
	ADDP4S(t2, t2, t3); \
	ADDP4S(t0, t0, t2); \
	FMOVS coff(R15), F30; \
	VDUP V30.S[0], V30.S4; \
	ADD4S(t0, t0, 30); \
	SCVTF4S(t0, t0); \
	FMOVS aoff(R7), F27; \
	VDUP V27.S[0], V27.S4; \
	FMOVS boff(R7), F28; \
	VDUP V28.S[0], V28.S4; \
	FMUL4S(26, 24, 27); \
	FMUL4S(t0, t0, 26); \
	FMLA4S(t0, 25, 28)

// X4ROW is one row's epilogue where c is 0 (out not read): X4SUM, then the
// four scores stored at Rout (register number rout), which advances.
#define X4ROW(t0, t1, t2, t3, coff, aoff, boff, rout) \
	X4SUM(t0, t1, t2, t3, coff, aoff, boff); \
	ST1P4S(t0, rout)

// X4ROWC is X4ROW where c is not 0: out·c (c in V29) added by a fused
// multiply-add before the store.
#define X4ROWC(t0, t1, t2, t3, coff, aoff, boff, Rout, rout) \
	X4SUM(t0, t1, t2, t3, coff, aoff, boff); \
	VLD1 (Rout), [V26.S4]; \
	FMLA4S(t0, 26, 29); \
	ST1P4S(t0, rout)

// func scoresU8x4SDOT(out *float32, ldo int, q *int8, k *uint8, A, B, ab *float32, n, d int, c float32, corr *int32)
// scoresU8SDOT for four query rows at once (the rows of out ldo floats
// apart, q the rows' bcastQ layout at stride 4·d, of which the first of the
// four copies of each 16-byte chunk is read; a in ab[0:4], b in ab[4:8];
// corr[r] = 128·Σq of row r): per 16 channels the four rows' query bytes
// and four tokens' codes (read as code-128), 16 SDOTs into V0-V15 (row r,
// token j in V(4r+j)); n a multiple of 4, d of 16. The same bits as
// scoresU8Go per row.
TEXT ·scoresU8x4SDOT(SB), NOSPLIT, $0-88
	MOVD out+0(FP), R0
	MOVD ldo+8(FP), R19
	MOVD q+16(FP), R1
	MOVD k+24(FP), R2
	MOVD A+32(FP), R3
	MOVD B+40(FP), R4
	MOVD ab+48(FP), R7
	MOVD n+56(FP), R5
	MOVD d+64(FP), R6
	FMOVS c+72(FP), F29
	MOVD corr+80(FP), R15
	VDUP V29.S[0], V29.S4
	MOVI80(31)
	LSL $2, R19, R19    // ldo in bytes
	ADD R19, R0, R20    // out rows 1..3
	ADD R19, R20, R21
	ADD R19, R21, R22
	LSL $2, R6, R16     // the query rows' stride, 4·d bytes
	MOVD $64, R14       // a chunk's four copies
	CBZ R5, s4_done
s4_tokens:
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	MOVD R1, R8         // query rows 0..3
	ADD R16, R8, R23
	ADD R16, R23, R24
	ADD R16, R24, R25
	MOVD R2, R9         // tokens t..t+3
	ADD R6, R9, R10
	ADD R6, R10, R11
	ADD R6, R11, R12
	MOVD R6, R13
s4_chunk:
	VLD1.P (R8)(R14), [V16.B16]
	VLD1.P (R23)(R14), [V17.B16]
	VLD1.P (R24)(R14), [V18.B16]
	VLD1.P (R25)(R14), [V19.B16]
	VLD1.P 16(R9), [V20.B16]
	VLD1.P 16(R10), [V21.B16]
	VLD1.P 16(R11), [V22.B16]
	VLD1.P 16(R12), [V23.B16]
	VEOR V31.B16, V20.B16, V20.B16
	VEOR V31.B16, V21.B16, V21.B16
	VEOR V31.B16, V22.B16, V22.B16
	VEOR V31.B16, V23.B16, V23.B16
	SDOT(0, 20, 16)
	SDOT(1, 21, 16)
	SDOT(2, 22, 16)
	SDOT(3, 23, 16)
	SDOT(4, 20, 17)
	SDOT(5, 21, 17)
	SDOT(6, 22, 17)
	SDOT(7, 23, 17)
	SDOT(8, 20, 18)
	SDOT(9, 21, 18)
	SDOT(10, 22, 18)
	SDOT(11, 23, 18)
	SDOT(12, 20, 19)
	SDOT(13, 21, 19)
	SDOT(14, 22, 19)
	SDOT(15, 23, 19)
	SUBS $16, R13, R13
	BNE s4_chunk
	MOVD R12, R2        // the next four tokens' rows
	VLD1.P 16(R3), [V24.S4]
	VLD1.P 16(R4), [V25.S4]
	FCMPS $(0.0), F29   // c = 0 (not NaN): out is not read
	BEQ s4_plain
	X4ROWC(0, 1, 2, 3, 0, 0, 16, R0, 0)
	X4ROWC(4, 5, 6, 7, 4, 4, 20, R20, 20)
	X4ROWC(8, 9, 10, 11, 8, 8, 24, R21, 21)
	X4ROWC(12, 13, 14, 15, 12, 12, 28, R22, 22)
	B s4_next
s4_plain:
	X4ROW(0, 1, 2, 3, 0, 0, 16, 0)
	X4ROW(4, 5, 6, 7, 4, 4, 20, 20)
	X4ROW(8, 9, 10, 11, 8, 8, 24, 21)
	X4ROW(12, 13, 14, 15, 12, 12, 28, 22)
s4_next:
	SUBS $4, R5, R5
	BNE s4_tokens
s4_done:
	RET

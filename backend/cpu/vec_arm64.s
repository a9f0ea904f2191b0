//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// Elementwise float32 kernels of ops.go for arm64 (NEON, 8 elements a step
// in two 4-lane registers). Each computes exactly what its pure-Go reference
// in vec.go computes, operation for operation (no fused multiply-add), so
// the levels agree bit for bit. n is a multiple of 8 (add, scaleMul, rope)
// or of 16 (sumSquares); the callers do the rest. The vector floating-point
// instructions are WORD encodings (the Go assembler has none for arm64),
// each macro named by its mnemonic, register arguments V-register numbers.

// func addSIMD(dst, a, b *float32, n int)
TEXT ·addSIMD(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD a+8(FP), R1
	MOVD b+16(FP), R2
	MOVD n+24(FP), R3
	CBZ R3, add_done
add_loop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1.P 32(R2), [V2.S4, V3.S4]
	FADD4S(0, 0, 2)
	FADD4S(1, 1, 3)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUBS $8, R3, R3
	BNE add_loop
add_done:
	RET

// func scaleMulSIMD(dst, x, w *float32, n int, r float32)
// dst = w·(x·r), each product rounded.
TEXT ·scaleMulSIMD(SB), NOSPLIT, $0-36
	MOVD dst+0(FP), R0
	MOVD x+8(FP), R1
	MOVD w+16(FP), R2
	MOVD n+24(FP), R3
	MOVD $r+32(FP), R4
	VLD1R (R4), [V4.S4]
	CBZ R3, sm_done
sm_loop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1.P 32(R2), [V2.S4, V3.S4]
	FMUL4S(0, 0, 4)
	FMUL4S(1, 1, 4)
	FMUL4S(0, 2, 0)
	FMUL4S(1, 3, 1)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUBS $8, R3, R3
	BNE sm_loop
sm_done:
	RET

// func ropeSIMD(lo, hi, cos, sin *float32, n int)
// lo' = lo·cos − hi·sin, hi' = hi·cos + lo·sin, each product rounded.
TEXT ·ropeSIMD(SB), NOSPLIT, $0-40
	MOVD lo+0(FP), R0
	MOVD hi+8(FP), R1
	MOVD cos+16(FP), R2
	MOVD sin+24(FP), R3
	MOVD n+32(FP), R4
	CBZ R4, rope_done
rope_loop:
	VLD1 (R0), [V0.S4, V1.S4]     // x1 = lo
	VLD1 (R1), [V2.S4, V3.S4]     // x2 = hi
	VLD1.P 32(R2), [V4.S4, V5.S4] // cos
	VLD1.P 32(R3), [V6.S4, V7.S4] // sin
	FMUL4S(16, 0, 4)              // x1·cos
	FMUL4S(17, 1, 5)
	FMUL4S(18, 2, 6)              // x2·sin
	FMUL4S(19, 3, 7)
	FSUB4S(16, 16, 18)
	FSUB4S(17, 17, 19)
	FMUL4S(20, 2, 4)              // x2·cos
	FMUL4S(21, 3, 5)
	FMUL4S(22, 0, 6)              // x1·sin
	FMUL4S(23, 1, 7)
	FADD4S(20, 20, 22)
	FADD4S(21, 21, 23)
	VST1.P [V16.S4, V17.S4], 32(R0)
	VST1.P [V20.S4, V21.S4], 32(R1)
	SUBS $8, R4, R4
	BNE rope_loop
rope_done:
	RET

// func sumSquaresSIMD(x *float32, n int, sc *[32]float32)
// The 16 Kahan lanes of sumSquares (lane l takes elements l, l+16, ...):
// y = x² − c, t = s + y, c = (t − s) − y, s = t; sc[0:16] gets s and
// sc[16:32] c. s is V16-V19, c V20-V23 (lanes 0-3, ..., 12-15).
TEXT ·sumSquaresSIMD(SB), NOSPLIT, $0-24
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD sc+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	CBZ R1, ss_done
ss_loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMUL4S(0, 0, 0)    // x²
	FMUL4S(1, 1, 1)
	FMUL4S(2, 2, 2)
	FMUL4S(3, 3, 3)
	FSUB4S(0, 0, 20)   // y = x² − c
	FSUB4S(1, 1, 21)
	FSUB4S(2, 2, 22)
	FSUB4S(3, 3, 23)
	FADD4S(4, 16, 0)   // t = s + y
	FADD4S(5, 17, 1)
	FADD4S(6, 18, 2)
	FADD4S(7, 19, 3)
	FSUB4S(20, 4, 16)  // c = (t − s) − y
	FSUB4S(21, 5, 17)
	FSUB4S(22, 6, 18)
	FSUB4S(23, 7, 19)
	FSUB4S(20, 20, 0)
	FSUB4S(21, 21, 1)
	FSUB4S(22, 22, 2)
	FSUB4S(23, 23, 3)
	VMOV V4.B16, V16.B16 // s = t
	VMOV V5.B16, V17.B16
	VMOV V6.B16, V18.B16
	VMOV V7.B16, V19.B16
	SUBS $16, R1, R1
	BNE ss_loop
ss_done:
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R2)
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R2)
	RET

// SwiGLU and GeGLU: glu64's float64 steps two lanes a register, each
// product rounded before its add (no FMLA), as vec.go's Go (which rounds
// every product explicitly) and vec_amd64.s compute them: the same bits.

// Float64 lanes: FADD, FSUB (Vd = Vn - Vm), FMUL, FDIV (Vd = Vn / Vm), FMAX,
// FMIN Vd.2D, Vn.2D, Vm.2D; FNEG Vd.2D, Vn.2D
#define FADD2D(d, n, m) WORD $(0x4E60D400 | ((m)<<16) | ((n)<<5) | (d))
#define FSUB2D(d, n, m) WORD $(0x4EE0D400 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL2D(d, n, m) WORD $(0x6E60DC00 | ((m)<<16) | ((n)<<5) | (d))
#define FDIV2D(d, n, m) WORD $(0x6E60FC00 | ((m)<<16) | ((n)<<5) | (d))
#define FMAX2D(d, n, m) WORD $(0x4E60F400 | ((m)<<16) | ((n)<<5) | (d))
#define FMIN2D(d, n, m) WORD $(0x4EE0F400 | ((m)<<16) | ((n)<<5) | (d))
#define FNEG2D(d, n) WORD $(0x6EE0F800 | ((n)<<5) | (d))

// FCVTL Vd.2D, Vn.2S and FCVTL2 Vd.2D, Vn.4S (float32 -> float64, exact);
// FCVTN Vd.2S, Vn.2D and FCVTN2 Vd.4S, Vn.2D (float64 -> float32, rounded
// to nearest even; FCVTN2 writes the high half)
#define FCVTL2S(d, n) WORD $(0x0E617800 | ((n)<<5) | (d))
#define FCVTL24S(d, n) WORD $(0x4E617800 | ((n)<<5) | (d))
#define FCVTN2S(d, n) WORD $(0x0E616800 | ((n)<<5) | (d))
#define FCVTN24S(d, n) WORD $(0x4E616800 | ((n)<<5) | (d))

// FCVTZS Vd.2D, Vn.2D (to int64; n is an integer already), ADD Vd.2D (int64),
// SHL Vd.2D, Vn.2D, #52
#define FCVTZS2D(d, n) WORD $(0x4EE1B800 | ((n)<<5) | (d))
#define ADD2D(d, n, m) WORD $(0x4EE08400 | ((m)<<16) | ((n)<<5) | (d))
#define SHL52(d, n) WORD $(0x4F745400 | ((n)<<5) | (d))

// GLUCONST loads glu64's constants: V16 siluLo, V17 siluHi, V18 log2 e,
// V19 the magic 1.5·2^52, V20 ln2 hi, V21 ln2 lo, V22-V29 siluCoef (1/9!
// .. 1/2), V30 1.0, V31 1023 (int64). It uses F0 and R4.
#define GLUCONST \
	FMOVD $(-708.0), F16; VDUP V16.D[0], V16.D2; \
	FMOVD $(708.0), F17; VDUP V17.D[0], V17.D2; \
	FMOVD $(1.4426950408889634), F18; VDUP V18.D[0], V18.D2; \
	FMOVD $(6755399441055744.0), F19; VDUP V19.D[0], V19.D2; \
	FMOVD $(6.93147180369123816490e-01), F20; VDUP V20.D[0], V20.D2; \
	FMOVD $(1.90821492927058770002e-10), F21; VDUP V21.D[0], V21.D2; \
	FMOVD $(2.7557319223985893e-06), F22; VDUP V22.D[0], V22.D2; \
	FMOVD $(2.48015873015873e-05), F23; VDUP V23.D[0], V23.D2; \
	FMOVD $(0.0001984126984126984), F24; VDUP V24.D[0], V24.D2; \
	FMOVD $(0.001388888888888889), F25; VDUP V25.D[0], V25.D2; \
	FMOVD $(0.008333333333333333), F26; VDUP V26.D[0], V26.D2; \
	FMOVD $(0.041666666666666664), F27; VDUP V27.D[0], V27.D2; \
	FMOVD $(0.16666666666666666), F28; VDUP V28.D[0], V28.D2; \
	FMOVD $(0.5), F29; VDUP V29.D[0], V29.D2; \
	FMOVD $(1.0), F30; VDUP V30.D[0], V30.D2; \
	MOVD $1023, R4; VDUP R4, V31.D2

// GLU replaces Vg (float64 g) by g/(1 + e^x), x in Vx (overwritten, then
// r), glu64's steps; Vn and Vp are scratch.
#define GLU(g, x, n, p) \
	FMAX2D(x, x, 16); \
	FMIN2D(x, x, 17); \
	FMUL2D(n, x, 18); \
	FADD2D(n, n, 19); \
	FSUB2D(n, n, 19); \
	FMUL2D(p, n, 20); \
	FSUB2D(x, x, p); \
	FMUL2D(p, n, 21); \
	FSUB2D(x, x, p); \
	FMUL2D(p, 22, x); \
	FADD2D(p, p, 23); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 24); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 25); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 26); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 27); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 28); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, 29); \
	FMUL2D(p, p, x); \
	FMUL2D(p, p, x); \
	FADD2D(p, p, x); \
	FADD2D(p, p, 30); \
	FCVTZS2D(n, n); \
	ADD2D(n, n, 31); \
	SHL52(n, n); \
	FMUL2D(p, p, n); \
	FADD2D(p, p, 30); \
	FDIV2D(g, g, p)

// func swigluSIMD(dst, gate, u *float32, n int)
// dst = float32(siluF64(g))·u, four elements a step (n a multiple of 8).
TEXT ·swigluSIMD(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD u+16(FP), R2
	MOVD n+24(FP), R3
	GLUCONST
	CBZ R3, sw_done
sw_loop:
	VLD1.P 16(R1), [V12.S4]
	FCVTL2S(0, 12)
	FCVTL24S(1, 12)
	FNEG2D(2, 0)        // x = -g
	FNEG2D(3, 1)
	GLU(0, 2, 4, 5)
	GLU(1, 3, 6, 7)
	FCVTN2S(10, 0)
	FCVTN24S(10, 1)
	VLD1.P 16(R2), [V11.S4]
	FMUL4S(10, 10, 11)
	VST1.P [V10.S4], 16(R0)
	SUBS $4, R3, R3
	BNE sw_loop
sw_done:
	RET

// func gegluSIMD(dst, gate, u *float32, n int)
// dst = float32(geluTanhF64(g))·u: swigluSIMD with x = geluNegK·(g +
// geluCubic·((g·g)·g)) in place of -g.
TEXT ·gegluSIMD(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD u+16(FP), R2
	MOVD n+24(FP), R3
	GLUCONST
	FMOVD $(0.044715), F13
	VDUP V13.D[0], V13.D2
	FMOVD $(-1.5957691216057307117597842), F14
	VDUP V14.D[0], V14.D2
	CBZ R3, ge_done
ge_loop:
	VLD1.P 16(R1), [V12.S4]
	FCVTL2S(0, 12)
	FCVTL24S(1, 12)
	FMUL2D(2, 0, 0)     // x = negK·(g + cubic·((g·g)·g))
	FMUL2D(3, 1, 1)
	FMUL2D(2, 2, 0)
	FMUL2D(3, 3, 1)
	FMUL2D(2, 2, 13)
	FMUL2D(3, 3, 13)
	FADD2D(2, 0, 2)
	FADD2D(3, 1, 3)
	FMUL2D(2, 2, 14)
	FMUL2D(3, 3, 14)
	GLU(0, 2, 4, 5)
	GLU(1, 3, 6, 7)
	FCVTN2S(10, 0)
	FCVTN24S(10, 1)
	VLD1.P 16(R2), [V11.S4]
	FMUL4S(10, 10, 11)
	VST1.P [V10.S4], 16(R0)
	SUBS $4, R3, R3
	BNE ge_loop
ge_done:
	RET

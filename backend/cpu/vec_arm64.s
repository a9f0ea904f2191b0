//go:build !purego

#include "textflag.h"

// Elementwise float32 kernels of ops.go for arm64 (NEON, 8 elements a step
// in two 4-lane registers). Each computes exactly what its pure-Go reference
// in vec.go computes, operation for operation (no fused multiply-add), so
// the levels agree bit for bit. n is a multiple of 8 (add, scaleMul, rope)
// or of 16 (sumSquares); the callers do the rest. The vector floating-point
// instructions are WORD encodings (the Go assembler has none for arm64),
// each macro named by its mnemonic, register arguments V-register numbers.

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FSUB Vd.4S, Vn.4S, Vm.4S (Vd = Vn - Vm)
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))

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

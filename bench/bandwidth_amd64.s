//go:build !purego

#include "textflag.h"

// The read probe's loops: 512 bytes per step as eight independent 64-byte
// (AVX-512) or sixteen 32-byte (AVX2) loads XORed into as many
// accumulators, so the loads, not a dependency chain, set the pace. n is
// a count of 8-byte words, a multiple of 64.

// func readAVX512(p *uint64, n int) uint64
TEXT ·readAVX512(SB), NOSPLIT, $0-24
	MOVQ   p+0(FP), SI
	MOVQ   n+8(FP), CX
	SHRQ   $6, CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	TESTQ  CX, CX
	JZ     fold
loop:
	VPXORQ (SI), Z0, Z0
	VPXORQ 64(SI), Z1, Z1
	VPXORQ 128(SI), Z2, Z2
	VPXORQ 192(SI), Z3, Z3
	VPXORQ 256(SI), Z4, Z4
	VPXORQ 320(SI), Z5, Z5
	VPXORQ 384(SI), Z6, Z6
	VPXORQ 448(SI), Z7, Z7
	ADDQ   $512, SI
	DECQ   CX
	JNZ    loop
fold:
	VPXORQ        Z1, Z0, Z0
	VPXORQ        Z3, Z2, Z2
	VPXORQ        Z5, Z4, Z4
	VPXORQ        Z7, Z6, Z6
	VPXORQ        Z2, Z0, Z0
	VPXORQ        Z6, Z4, Z4
	VPXORQ        Z4, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPXOR         Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPXOR         X1, X0, X0
	VPSRLDQ       $8, X0, X1
	VPXOR         X1, X0, X0
	VMOVQ         X0, AX
	MOVQ          AX, ret+16(FP)
	VZEROUPPER
	RET

// func readAVX2(p *uint64, n int) uint64
TEXT ·readAVX2(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	SHRQ  $6, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	TESTQ CX, CX
	JZ    fold
loop:
	VPXOR (SI), Y0, Y0
	VPXOR 32(SI), Y1, Y1
	VPXOR 64(SI), Y2, Y2
	VPXOR 96(SI), Y3, Y3
	VPXOR 128(SI), Y4, Y4
	VPXOR 160(SI), Y5, Y5
	VPXOR 192(SI), Y6, Y6
	VPXOR 224(SI), Y7, Y7
	VPXOR 256(SI), Y0, Y0
	VPXOR 288(SI), Y1, Y1
	VPXOR 320(SI), Y2, Y2
	VPXOR 352(SI), Y3, Y3
	VPXOR 384(SI), Y4, Y4
	VPXOR 416(SI), Y5, Y5
	VPXOR 448(SI), Y6, Y6
	VPXOR 480(SI), Y7, Y7
	ADDQ  $512, SI
	DECQ  CX
	JNZ   loop
fold:
	VPXOR        Y1, Y0, Y0
	VPXOR        Y3, Y2, Y2
	VPXOR        Y5, Y4, Y4
	VPXOR        Y7, Y6, Y6
	VPXOR        Y2, Y0, Y0
	VPXOR        Y6, Y4, Y4
	VPXOR        Y4, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR        X1, X0, X0
	VPSRLDQ      $8, X0, X1
	VPXOR        X1, X0, X0
	VMOVQ        X0, AX
	MOVQ         AX, ret+16(FP)
	VZEROUPPER
	RET

//go:build !purego

#include "textflag.h"

// func rotateAVX512(x *float32, n int, s float32)
// kv.Rotate of n floats (n a power of two, at least 16) with the same
// operations in the same order, so the same bits: the butterflies h = 1, 2,
// 4, 8 inside each vector of 16 (the partner from a lane permute; the low
// lane of a pair takes a+b, the high lane a-b, with a the low element as
// the first operand, as kv's scalar loop computes them), then h = 16, ...,
// n/2 between vectors, then every element times s.
TEXT ·rotateAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	MOVL $0xaaaa, AX
	KMOVW AX, K1
	MOVL $0xcccc, AX
	KMOVW AX, K2
	MOVL $0xf0f0, AX
	KMOVW AX, K3
	MOVL $0xff00, AX
	KMOVW AX, K4
	MOVQ DI, SI
	MOVQ CX, DX
	SHRQ $4, DX

inreg:
	VMOVUPS   (SI), Z0
	// h = 1: lane pairs (2i, 2i+1)
	VPERMILPS $0xb1, Z0, Z1
	VADDPS    Z1, Z0, Z2
	VSUBPS    Z0, Z1, Z3
	VBLENDMPS Z3, Z2, K1, Z0
	// h = 2
	VPERMILPS $0x4e, Z0, Z1
	VADDPS    Z1, Z0, Z2
	VSUBPS    Z0, Z1, Z3
	VBLENDMPS Z3, Z2, K2, Z0
	// h = 4: 128-bit lanes swapped in pairs
	VSHUFF32X4 $0xb1, Z0, Z0, Z1
	VADDPS     Z1, Z0, Z2
	VSUBPS     Z0, Z1, Z3
	VBLENDMPS  Z3, Z2, K3, Z0
	// h = 8: 256-bit halves swapped
	VSHUFF32X4 $0x4e, Z0, Z0, Z1
	VADDPS     Z1, Z0, Z2
	VSUBPS     Z0, Z1, Z3
	VBLENDMPS  Z3, Z2, K4, Z0
	VMOVUPS    Z0, (SI)
	ADDQ       $64, SI
	DECQ       DX
	JNZ        inreg

	MOVQ $16, BX // h
cross:
	CMPQ BX, CX
	JGE  scale
	XORQ R8, R8 // i: start of a run of 2h
outer:
	MOVQ R8, R9 // j
	LEAQ (R8)(BX*1), R10
inner:
	LEAQ    (DI)(R9*4), R11
	VMOVUPS (R11), Z0
	VMOVUPS (R11)(BX*4), Z1
	VADDPS  Z1, Z0, Z2
	VSUBPS  Z1, Z0, Z3
	VMOVUPS Z2, (R11)
	VMOVUPS Z3, (R11)(BX*4)
	ADDQ    $16, R9
	CMPQ    R9, R10
	JLT     inner
	LEAQ    (R8)(BX*2), R8
	CMPQ    R8, CX
	JLT     outer
	SHLQ    $1, BX
	JMP     cross

scale:
	VBROADCASTSS s+16(FP), Z5
	MOVQ         CX, DX
	SHRQ         $4, DX
sloop:
	VMOVUPS (DI), Z0
	VMULPS  Z5, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	DECQ    DX
	JNZ     sloop
	VZEROUPPER
	RET

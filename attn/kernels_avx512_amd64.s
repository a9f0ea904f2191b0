//go:build !purego

#include "textflag.h"
#include "avx512_amd64.h"

// AVX-512 (F, BW, VL, DQ; VNNI for scoresU8) versions of the kernels of
// kernels.go, which documents what each computes; kernels_amd64.go checks
// the lengths and calls these with pointers. 512-bit vectors of 16 floats
// (or 64 bytes). Zen 4 runs each as two 256-bit halves: one zmm FMA or one
// VPDPBUSD per cycle (docs/perf/cpu-attention.md).
//
// The kernels that take pf prefetch the next block's K or V half into L2
// (PREFETCHT1), a share of its lines per tile or pair of tokens: sent to
// L1 (PREFETCHT0) they evicted the block being computed and themselves
// before use (docs/perf/cpu-attention.md v17).

// tileIdx picks the 8 dot products out of the last step of the score
// reduction: lane L of the reduced vector holds token L at float 4L and
// token L+4 at float 4L+1.
DATA tileIdx<>+0(SB)/4, $0
DATA tileIdx<>+4(SB)/4, $4
DATA tileIdx<>+8(SB)/4, $8
DATA tileIdx<>+12(SB)/4, $12
DATA tileIdx<>+16(SB)/4, $1
DATA tileIdx<>+20(SB)/4, $5
DATA tileIdx<>+24(SB)/4, $9
DATA tileIdx<>+28(SB)/4, $13
GLOBL tileIdx<>(SB), RODATA|NOPTR, $32

// func cvtHalfAVX512(dst *float32, src *uint16, n int)
// n a multiple of 16: VCVTPH2PS, 16 values per instruction, two per step
// with one prefetch 1 KB ahead per 64-byte line of source.
TEXT ·cvtHalfAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
	SHRQ $1, CX
	JZ   tail
loop:
	PREFETCHT0 1024(SI)
	VCVTPH2PS  (SI), Z0
	VCVTPH2PS  32(SI), Z1
	VMOVUPS    Z0, (DI)
	VMOVUPS    Z1, 64(DI)
	ADDQ       $64, SI
	ADDQ       $128, DI
	DECQ       CX
	JNZ        loop
tail:
	MOVQ n+16(FP), CX
	TESTQ $16, CX
	JZ    done
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
done:
	VZEROUPPER
	RET

// func cvtBF16AVX512(dst *float32, src *uint16, n int)
// bf16 is the top half of a float32: zero-extend and shift.
TEXT ·cvtBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func unpack4AVX512(dst *uint8, src *byte, n int)
// n source bytes, a multiple of 32. Byte b becomes the word b | b<<4
// masked with 0x0f0f: the low byte holds b&15 (even channel), the high
// byte b>>4 (odd channel), so the codes come out in channel order. 64
// source bytes per step, one prefetch 1 KB ahead.
TEXT ·unpack4AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z7
	SHRQ         $6, CX
	JZ           tail
loop:
	PREFETCHT0 1024(SI)
	VPMOVZXBW  (SI), Z0
	VPMOVZXBW  32(SI), Z2
	VPSLLW     $4, Z0, Z1
	VPSLLW     $4, Z2, Z3
	// Z0 = (Z0 | Z1) & Z7
	VPTERNLOGD $0xa8, Z7, Z1, Z0
	VPTERNLOGD $0xa8, Z7, Z3, Z2
	VMOVDQU64  Z0, (DI)
	VMOVDQU64  Z2, 64(DI)
	ADDQ       $64, SI
	ADDQ       $128, DI
	DECQ       CX
	JNZ        loop
tail:
	MOVQ       n+16(FP), CX
	TESTQ      $32, CX
	JZ         done
	VPMOVZXBW  (SI), Z0
	VPSLLW     $4, Z0, Z1
	VPTERNLOGD $0xa8, Z7, Z1, Z0
	VMOVDQU64  Z0, (DI)
done:
	VZEROUPPER
	RET

// func unpack2AVX512(dst *uint8, src *byte, n int)
// n source bytes, a multiple of 16. Byte b becomes the dword
// b | b<<6 | b<<12 | b<<18 masked with 0x03030303: byte i of the dword
// holds bits 2i..2i+1 of b, channel 4j+i. 16 source bytes per step, a
// prefetch 1 KB ahead every fourth step (one per 64-byte line).
TEXT ·unpack2AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	SHRQ         $4, CX
	JZ           done
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z7
	XORQ         DX, DX
loop:
	TESTQ      $3, DX
	JNZ        noprefetch
	PREFETCHT0 1024(SI)
noprefetch:
	VPMOVZXBD  (SI), Z0
	VPSLLD     $6, Z0, Z1
	VPSLLD     $12, Z0, Z2
	VPSLLD     $18, Z0, Z3
	VPTERNLOGD $0xfe, Z2, Z1, Z0 // Z0 |= Z1 | Z2
	VPTERNLOGD $0xa8, Z7, Z3, Z0 // Z0 = (Z0 | Z3) & Z7
	VMOVDQU64  Z0, (DI)
	ADDQ       $16, SI
	ADDQ       $64, DI
	INCQ       DX
	DECQ       CX
	JNZ        loop
done:
	VZEROUPPER
	RET

// func codesF32AVX512(dst *float32, src *uint8, n int)
TEXT ·codesF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VPMOVZXBD (SI), Z0
	VCVTDQ2PS Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $16, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// REDUCE8 folds the 16 lanes of each of Z0..Z7 (the dot products of 8
// tokens) into Y0 = [sum Z0, ..., sum Z7] in three steps: 256-bit
// halves, 128-bit lanes, then the four floats of a lane; Z8, Z9 and Z12
// (tileIdx) are used. Each step is a shuffle pair and an add (ADD is
// VADDPS or VPADDD).
#define REDUCE8(ADD) \
	VSHUFF64X2 $0x44, Z1, Z0, Z8 \
	VSHUFF64X2 $0xee, Z1, Z0, Z9 \
	ADD        Z9, Z8, Z0        \
	VSHUFF64X2 $0x44, Z3, Z2, Z8 \
	VSHUFF64X2 $0xee, Z3, Z2, Z9 \
	ADD        Z9, Z8, Z2        \
	VSHUFF64X2 $0x44, Z5, Z4, Z8 \
	VSHUFF64X2 $0xee, Z5, Z4, Z9 \
	ADD        Z9, Z8, Z4        \
	VSHUFF64X2 $0x44, Z7, Z6, Z8 \
	VSHUFF64X2 $0xee, Z7, Z6, Z9 \
	ADD        Z9, Z8, Z6        \
	VSHUFF64X2 $0x88, Z2, Z0, Z8 \
	VSHUFF64X2 $0xdd, Z2, Z0, Z9 \
	ADD        Z9, Z8, Z0        \
	VSHUFF64X2 $0x88, Z6, Z4, Z8 \
	VSHUFF64X2 $0xdd, Z6, Z4, Z9 \
	ADD        Z9, Z8, Z4        \
	VSHUFPS    $0x88, Z4, Z0, Z8 \
	VSHUFPS    $0xdd, Z4, Z0, Z9 \
	ADD        Z9, Z8, Z0        \
	VSHUFPS    $0x88, Z0, Z0, Z8 \
	VSHUFPS    $0xdd, Z0, Z0, Z9 \
	ADD        Z9, Z8, Z0        \
	VPERMPS    Z0, Z12, Z0

// func scoresF32AVX512(out, q, k, A, B *float32, n, d int, a, b float32)
// out[t] = a·A[t]·(q·k[t]) + b·B[t] for t < n (a multiple of 8), rows of
// d floats (a multiple of 16). Eight tokens at a time: Z0..Z7 accumulate
// their products with the query chunk in Z8, then REDUCE8.
TEXT ·scoresF32AVX512(SB), NOSPLIT, $0-64
	MOVQ         out+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), DX
	MOVQ         A+24(FP), R11
	MOVQ         B+32(FP), R12
	MOVQ         n+40(FP), CX
	MOVQ         d+48(FP), BX
	VBROADCASTSS a+56(FP), Y10
	VBROADCASTSS b+60(FP), Y11
	VMOVDQU32    tileIdx<>(SB), Y12
	SHLQ         $2, BX          // row stride in bytes
	LEAQ         (BX)(BX*2), R10 // 3 rows
	SHRQ         $3, CX
	JZ           done
tile:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ   DX, R8             // rows 0..3 at R8, rows 4..7 at R9
	LEAQ   (DX)(BX*4), R9
	XORQ   AX, AX             // byte offset in the row
chunk:
	VMOVUPS     (SI)(AX*1), Z8
	VFMADD231PS (R8), Z8, Z0
	VFMADD231PS (R8)(BX*1), Z8, Z1
	VFMADD231PS (R8)(BX*2), Z8, Z2
	VFMADD231PS (R8)(R10*1), Z8, Z3
	VFMADD231PS (R9), Z8, Z4
	VFMADD231PS (R9)(BX*1), Z8, Z5
	VFMADD231PS (R9)(BX*2), Z8, Z6
	VFMADD231PS (R9)(R10*1), Z8, Z7
	ADDQ        $64, R8
	ADDQ        $64, R9
	ADDQ        $64, AX
	CMPQ        AX, BX
	JLT         chunk
	REDUCE8(VADDPS)
	VMULPS      (R11), Y10, Y8 // a·A[t]
	VMULPS      Y8, Y0, Y0
	VMULPS      (R12), Y11, Y9 // b·B[t]
	VADDPS      Y9, Y0, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, DI
	ADDQ        $32, R11
	ADDQ        $32, R12
	LEAQ        (DX)(BX*8), DX
	DECQ        CX
	JNZ         tile
done:
	VZEROUPPER
	RET

// func scoresU8VNNI(out *float32, q *int8, k *uint8, A, B *float32, n, d int, a, b, c float32)
// scoresF32 on byte codes and an int8 query: VPDPBUSD (u8 codes from
// memory into Z9, s8 query chunk in Z8) sums groups of four products into
// the int32 lanes, exactly; d a multiple of 16; a tail of 16 or 48 bytes
// is read with a masked load. With c not 0 (R14 set), c·out[t] is added.
TEXT ·scoresU8VNNI(SB), NOSPLIT, $0-68
	MOVQ         out+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), DX
	MOVQ         A+24(FP), R11
	MOVQ         B+32(FP), R12
	MOVQ         d+48(FP), BX
	VBROADCASTSS a+56(FP), Y10
	VBROADCASTSS b+60(FP), Y11
	VBROADCASTSS c+64(FP), Y13
	MOVL         c+64(FP), R14
	VMOVDQU32    tileIdx<>(SB), Y12
	// K1 covers the last partial 64-byte chunk: (d%64)/4 dword lanes.
	MOVQ         BX, CX
	ANDQ         $63, CX
	SHRQ         $2, CX
	MOVQ         $1, R13
	SHLQ         CX, R13
	DECQ         R13
	KMOVW        R13, K1
	MOVQ         n+40(FP), CX
	MOVQ         BX, R13
	ANDQ         $-64, R13       // bytes in whole chunks
	LEAQ         (BX)(BX*2), R10 // 3 rows
	SHRQ         $3, CX
	JZ           done
tile:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ   DX, R8
	LEAQ   (DX)(BX*4), R9
	XORQ   AX, AX
	CMPQ   AX, R13
	JGE    tail
chunk:
	VMOVDQU8  (SI)(AX*1), Z8
	VMOVDQU8  (R8), Z9
	VPDPBUSD  Z8, Z9, Z0
	VMOVDQU8  (R8)(BX*1), Z9
	VPDPBUSD  Z8, Z9, Z1
	VMOVDQU8  (R8)(BX*2), Z9
	VPDPBUSD  Z8, Z9, Z2
	VMOVDQU8  (R8)(R10*1), Z9
	VPDPBUSD  Z8, Z9, Z3
	VMOVDQU8  (R9), Z9
	VPDPBUSD  Z8, Z9, Z4
	VMOVDQU8  (R9)(BX*1), Z9
	VPDPBUSD  Z8, Z9, Z5
	VMOVDQU8  (R9)(BX*2), Z9
	VPDPBUSD  Z8, Z9, Z6
	VMOVDQU8  (R9)(R10*1), Z9
	VPDPBUSD  Z8, Z9, Z7
	ADDQ      $64, R8
	ADDQ      $64, R9
	ADDQ      $64, AX
	CMPQ      AX, R13
	JLT       chunk
tail:
	CMPQ       AX, BX
	JGE        reduce
	VMOVDQU32.Z (SI)(AX*1), K1, Z8
	VMOVDQU32.Z (R8), K1, Z9
	VPDPBUSD    Z8, Z9, Z0
	VMOVDQU32.Z (R8)(BX*1), K1, Z9
	VPDPBUSD    Z8, Z9, Z1
	VMOVDQU32.Z (R8)(BX*2), K1, Z9
	VPDPBUSD    Z8, Z9, Z2
	VMOVDQU32.Z (R8)(R10*1), K1, Z9
	VPDPBUSD    Z8, Z9, Z3
	VMOVDQU32.Z (R9), K1, Z9
	VPDPBUSD    Z8, Z9, Z4
	VMOVDQU32.Z (R9)(BX*1), K1, Z9
	VPDPBUSD    Z8, Z9, Z5
	VMOVDQU32.Z (R9)(BX*2), K1, Z9
	VPDPBUSD    Z8, Z9, Z6
	VMOVDQU32.Z (R9)(R10*1), K1, Z9
	VPDPBUSD    Z8, Z9, Z7
reduce:
	REDUCE8(VPADDD)
	VCVTDQ2PS Y0, Y0
	VMULPS    (R11), Y10, Y8
	VMULPS    Y8, Y0, Y0
	VMULPS    (R12), Y11, Y9
	VADDPS    Y9, Y0, Y0
	TESTL     R14, R14
	JZ        store
	VMULPS    (DI), Y13, Y8
	VADDPS    Y8, Y0, Y0
store:
	VMOVUPS   Y0, (DI)
	ADDQ      $32, DI
	ADDQ      $32, R11
	ADDQ      $32, R12
	LEAQ      (DX)(BX*8), DX
	DECQ      CX
	JNZ       tile
done:
	VZEROUPPER
	RET

// func pvF32x4AVX512(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, cols int)
// Four rows: acc[r][c] += Σ_t w[r][t]·v[t][c]. Channels in chunks of 64
// (16 accumulators Z0..Z15, the V chunk in Z16..Z19, the four weights
// broadcast into Z20..Z23), then chunks of 16; lengths in floats, cols a
// multiple of 16. Each chunk's sum over the n tokens is formed in
// registers and then added to acc.
TEXT ·pvF32x4AVX512(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	MOVQ ldacc+8(FP), R14
	SHLQ $2, R14
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ ldv+40(FP), R15
	SHLQ $2, R15
	MOVQ cols+56(FP), R13
	SHLQ $2, R13            // bytes per row left
	XORQ BX, BX             // byte offset of the chunk
chunk64:
	LEAQ 256(BX), AX
	CMPQ AX, R13
	JGT  chunk16
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
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	ADDQ   BX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store64
tok64:
	VMOVUPS      (SI), Z16
	VMOVUPS      64(SI), Z17
	VMOVUPS      128(SI), Z18
	VMOVUPS      192(SI), Z19
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VBROADCASTSS (R8)(R9*2), Z22
	VBROADCASTSS (R8)(R10*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok64
store64:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VADDPS  64(AX), Z5, Z5
	VADDPS  128(AX), Z6, Z6
	VADDPS  192(AX), Z7, Z7
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	VMOVUPS Z6, 128(AX)
	VMOVUPS Z7, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z8, Z8
	VADDPS  64(AX), Z9, Z9
	VADDPS  128(AX), Z10, Z10
	VADDPS  192(AX), Z11, Z11
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, 64(AX)
	VMOVUPS Z10, 128(AX)
	VMOVUPS Z11, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z12, Z12
	VADDPS  64(AX), Z13, Z13
	VADDPS  128(AX), Z14, Z14
	VADDPS  192(AX), Z15, Z15
	VMOVUPS Z12, (AX)
	VMOVUPS Z13, 64(AX)
	VMOVUPS Z14, 128(AX)
	VMOVUPS Z15, 192(AX)
	ADDQ    $256, BX
	JMP     chunk64
chunk16:
	CMPQ   BX, R13
	JGE    done
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	ADDQ   BX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store16
tok16:
	VMOVUPS      (SI), Z16
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VBROADCASTSS (R8)(R9*2), Z22
	VBROADCASTSS (R8)(R10*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z16, Z23, Z12
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok16
store16:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VMOVUPS Z4, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z8, Z8
	VMOVUPS Z8, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z12, Z12
	VMOVUPS Z12, (AX)
	ADDQ    $64, BX
	JMP     chunk16
done:
	VZEROUPPER
	RET

// func pvF32x1AVX512(acc *float32, w *float32, v *float32, ldv, n, cols int)
// One row of pvF32x4: chunks of 64 channels (Z0..Z3), then 16.
TEXT ·pvF32x1AVX512(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ ldv+24(FP), R15
	SHLQ $2, R15
	MOVQ cols+40(FP), R13
	SHLQ $2, R13
	XORQ BX, BX
chunk64:
	LEAQ 256(BX), AX
	CMPQ AX, R13
	JGT  chunk16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   w+8(FP), R8
	MOVQ   v+16(FP), SI
	ADDQ   BX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     store64
tok64:
	VBROADCASTSS (R8), Z20
	VFMADD231PS  (SI), Z20, Z0
	VFMADD231PS  64(SI), Z20, Z1
	VFMADD231PS  128(SI), Z20, Z2
	VFMADD231PS  192(SI), Z20, Z3
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok64
store64:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    $256, BX
	JMP     chunk64
chunk16:
	CMPQ   BX, R13
	JGE    done
	VPXORD Z0, Z0, Z0
	MOVQ   w+8(FP), R8
	MOVQ   v+16(FP), SI
	ADDQ   BX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     store16
tok16:
	VBROADCASTSS (R8), Z20
	VFMADD231PS  (SI), Z20, Z0
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok16
store16:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    $64, BX
	JMP     chunk16
done:
	VZEROUPPER
	RET

// func pvCodesx1AVX512(acc *float32, w *float32, codes *uint8, ldc, n, cols int)
// pvF32x1AVX512 on byte codes, converted in registers (VPMOVZXBD from
// memory, VCVTDQ2PS): acc[c] += Σ_t w[t]·float(codes[t·ldc+c]) for c < cols
// (a multiple of 16); chunks of 64 channels (Z0..Z3), then 16. No float32
// copy of the block is written and read back (v67).
TEXT ·pvCodesx1AVX512(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ ldc+24(FP), R15
	MOVQ cols+40(FP), R13
	XORQ BX, BX
cchunk64:
	LEAQ 64(BX), AX
	CMPQ AX, R13
	JGT  cchunk16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   w+8(FP), R8
	MOVQ   codes+16(FP), SI
	ADDQ   BX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     cstore64
ctok64:
	VBROADCASTSS (R8), Z20
	VPMOVZXBD    (SI), Z4
	VPMOVZXBD    16(SI), Z5
	VPMOVZXBD    32(SI), Z6
	VPMOVZXBD    48(SI), Z7
	VCVTDQ2PS    Z4, Z4
	VCVTDQ2PS    Z5, Z5
	VCVTDQ2PS    Z6, Z6
	VCVTDQ2PS    Z7, Z7
	VFMADD231PS  Z4, Z20, Z0
	VFMADD231PS  Z5, Z20, Z1
	VFMADD231PS  Z6, Z20, Z2
	VFMADD231PS  Z7, Z20, Z3
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          ctok64
cstore64:
	LEAQ    (DI)(BX*4), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    $64, BX
	JMP     cchunk64
cchunk16:
	CMPQ   BX, R13
	JGE    cdone
	VPXORD Z0, Z0, Z0
	MOVQ   w+8(FP), R8
	MOVQ   codes+16(FP), SI
	ADDQ   BX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     cstore16
ctok16:
	VBROADCASTSS (R8), Z20
	VPMOVZXBD    (SI), Z4
	VCVTDQ2PS    Z4, Z4
	VFMADD231PS  Z4, Z20, Z0
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          ctok16
cstore16:
	LEAQ    (DI)(BX*4), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    $16, BX
	JMP     cchunk16
cdone:
	VZEROUPPER
	RET

// pvNibIdx<>: VPERMT2PS indexes into [even | odd] (16 channels each, lane
// i: channel 2i of a 32-channel chunk, then 2i+1): vector 0 gives channels
// 0..15 in order, vector 1 channels 16..31.
DATA pvNibIdx<>+0(SB)/8, $0x0000001000000000
DATA pvNibIdx<>+8(SB)/8, $0x0000001100000001
DATA pvNibIdx<>+16(SB)/8, $0x0000001200000002
DATA pvNibIdx<>+24(SB)/8, $0x0000001300000003
DATA pvNibIdx<>+32(SB)/8, $0x0000001400000004
DATA pvNibIdx<>+40(SB)/8, $0x0000001500000005
DATA pvNibIdx<>+48(SB)/8, $0x0000001600000006
DATA pvNibIdx<>+56(SB)/8, $0x0000001700000007
DATA pvNibIdx<>+64(SB)/8, $0x0000001800000008
DATA pvNibIdx<>+72(SB)/8, $0x0000001900000009
DATA pvNibIdx<>+80(SB)/8, $0x0000001a0000000a
DATA pvNibIdx<>+88(SB)/8, $0x0000001b0000000b
DATA pvNibIdx<>+96(SB)/8, $0x0000001c0000000c
DATA pvNibIdx<>+104(SB)/8, $0x0000001d0000000d
DATA pvNibIdx<>+112(SB)/8, $0x0000001e0000000e
DATA pvNibIdx<>+120(SB)/8, $0x0000001f0000000f
GLOBL pvNibIdx<>(SB), RODATA|NOPTR, $128

// NIBOUT adds a 32-channel chunk's even-channel sums E and odd-channel
// sums O, put in channel order (Z22, Z23: pvNibIdx), to the floats at
// OFF(AX). Z8 scratch; E is clobbered.
#define NIBOUT(E, O, OFF) \
	VMOVAPS   E, Z8            \
	VPERMT2PS O, Z22, Z8       \
	VPERMT2PS O, Z23, E        \
	VADDPS    OFF(AX), Z8, Z8  \
	VADDPS    OFF+64(AX), E, E \
	VMOVUPS   Z8, OFF(AX)      \
	VMOVUPS   E, OFF+64(AX)

// func pvNib4x1AVX512(acc *float32, w *float32, packed *byte, ldb, n, cols int)
// pvCodesx1AVX512 on packed int4 rows (ldb bytes apart; channel 2i in the
// low nibble of byte i, 2i+1 in the high one), read as stored: per 32
// channels and token one VPMOVZXBD of 16 bytes, the low nibbles (AND 15)
// summed apart from the high ones (>> 4), put back in channel order once
// at the end of the chunk (NIBOUT). cols a multiple of 32; chunks of 64
// channels (Z0..Z3: even, odd of the first 32, then of the second), then
// 32. The bits of pvCodesx1AVX512 on the unpacked codes (v68).
TEXT ·pvNib4x1AVX512(SB), NOSPLIT, $0-48
	MOVQ         acc+0(FP), DI
	MOVQ         ldb+24(FP), R15
	MOVQ         cols+40(FP), R13
	MOVL         $15, AX
	VPBROADCASTD AX, Z21
	VMOVDQU32    pvNibIdx<>+0(SB), Z22
	VMOVDQU32    pvNibIdx<>+64(SB), Z23
	XORQ         BX, BX
nchunk64:
	LEAQ   64(BX), AX
	CMPQ   AX, R13
	JGT    nchunk32
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   w+8(FP), R8
	MOVQ   BX, SI
	SHRQ   $1, SI
	ADDQ   packed+16(FP), SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     nstore64
ntok64:
	VBROADCASTSS (R8), Z20
	VPMOVZXBD    (SI), Z4
	VPMOVZXBD    16(SI), Z6
	VPSRLD       $4, Z4, Z5
	VPSRLD       $4, Z6, Z7
	VPANDD       Z21, Z4, Z4
	VPANDD       Z21, Z6, Z6
	VCVTDQ2PS    Z4, Z4
	VCVTDQ2PS    Z5, Z5
	VCVTDQ2PS    Z6, Z6
	VCVTDQ2PS    Z7, Z7
	VFMADD231PS  Z4, Z20, Z0
	VFMADD231PS  Z5, Z20, Z1
	VFMADD231PS  Z6, Z20, Z2
	VFMADD231PS  Z7, Z20, Z3
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          ntok64
nstore64:
	LEAQ (DI)(BX*4), AX
	NIBOUT(Z0, Z1, 0)
	NIBOUT(Z2, Z3, 128)
	ADDQ $64, BX
	JMP  nchunk64
nchunk32:
	CMPQ   BX, R13
	JGE    ndone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ   w+8(FP), R8
	MOVQ   BX, SI
	SHRQ   $1, SI
	ADDQ   packed+16(FP), SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     nstore32
ntok32:
	VBROADCASTSS (R8), Z20
	VPMOVZXBD    (SI), Z4
	VPSRLD       $4, Z4, Z5
	VPANDD       Z21, Z4, Z4
	VCVTDQ2PS    Z4, Z4
	VCVTDQ2PS    Z5, Z5
	VFMADD231PS  Z4, Z20, Z0
	VFMADD231PS  Z5, Z20, Z1
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          ntok32
nstore32:
	LEAQ (DI)(BX*4), AX
	NIBOUT(Z0, Z1, 0)
	ADDQ $32, BX
	JMP  nchunk32
ndone:
	VZEROUPPER
	RET

// func pvHalfx4AVX512(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)
// pvF32x4AVX512 on fp16 V rows, converted in registers (VCVTPH2PS from
// memory): no float32 copy of the block is written and read back. ldv in
// fp16 values.
// Two lines of [pf, pf+64·pfLines) are prefetched into L2 (PREFETCHT1:
// a 32 KB half of the next fp16 block sent to L1 evicted this block's
// rows and itself before use; docs/perf/cpu-attention.md v17) per token of the
// 64-channel passes (the next block's values, spread over this block).
TEXT ·pvHalfx4AVX512(SB), NOSPLIT, $0-80
	MOVQ pf+64(FP), R11
	MOVQ pfLines+72(FP), R12
	MOVQ acc+0(FP), DI
	MOVQ ldacc+8(FP), R14
	SHLQ $2, R14
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ ldv+40(FP), R15
	SHLQ $1, R15
	MOVQ cols+56(FP), R13
	SHLQ $2, R13            // bytes per row left
	XORQ BX, BX             // byte offset of the chunk
chunk64:
	LEAQ 256(BX), AX
	CMPQ AX, R13
	JGT  chunk16
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
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store64
tok64:
	TESTQ        R12, R12
	JLE          nopf
	PREFETCHT1   (R11)
	PREFETCHT1   64(R11)
	ADDQ         $128, R11
	SUBQ         $2, R12
nopf:
	VCVTPH2PS    (SI), Z16
	VCVTPH2PS    32(SI), Z17
	VCVTPH2PS    64(SI), Z18
	VCVTPH2PS    96(SI), Z19
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VBROADCASTSS (R8)(R9*2), Z22
	VBROADCASTSS (R8)(R10*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok64
store64:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VADDPS  64(AX), Z5, Z5
	VADDPS  128(AX), Z6, Z6
	VADDPS  192(AX), Z7, Z7
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	VMOVUPS Z6, 128(AX)
	VMOVUPS Z7, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z8, Z8
	VADDPS  64(AX), Z9, Z9
	VADDPS  128(AX), Z10, Z10
	VADDPS  192(AX), Z11, Z11
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, 64(AX)
	VMOVUPS Z10, 128(AX)
	VMOVUPS Z11, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z12, Z12
	VADDPS  64(AX), Z13, Z13
	VADDPS  128(AX), Z14, Z14
	VADDPS  192(AX), Z15, Z15
	VMOVUPS Z12, (AX)
	VMOVUPS Z13, 64(AX)
	VMOVUPS Z14, 128(AX)
	VMOVUPS Z15, 192(AX)
	ADDQ    $256, BX
	JMP     chunk64
chunk16:
	CMPQ   BX, R13
	JGE    done
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store16
tok16:
	VCVTPH2PS    (SI), Z16
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VBROADCASTSS (R8)(R9*2), Z22
	VBROADCASTSS (R8)(R10*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z16, Z23, Z12
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok16
store16:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VMOVUPS Z4, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z8, Z8
	VMOVUPS Z8, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z12, Z12
	VMOVUPS Z12, (AX)
	ADDQ    $64, BX
	JMP     chunk16
done:
	VZEROUPPER
	RET

// func pvHalfx1AVX512(acc *float32, w *float32, v *uint16, ldv, n, cols int)
// One row of pvHalfx4.
TEXT ·pvHalfx1AVX512(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ ldv+24(FP), R15
	SHLQ $1, R15
	MOVQ cols+40(FP), R13
	SHLQ $2, R13
	XORQ BX, BX
chunk64:
	LEAQ 256(BX), AX
	CMPQ AX, R13
	JGT  chunk16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   w+8(FP), R8
	MOVQ   v+16(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     store64
tok64:
	VBROADCASTSS (R8), Z20
	VCVTPH2PS    (SI), Z16
	VCVTPH2PS    32(SI), Z17
	VCVTPH2PS    64(SI), Z18
	VCVTPH2PS    96(SI), Z19
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok64
store64:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    $256, BX
	JMP     chunk64
chunk16:
	CMPQ   BX, R13
	JGE    done
	VPXORD Z0, Z0, Z0
	MOVQ   w+8(FP), R8
	MOVQ   v+16(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     store16
tok16:
	VBROADCASTSS (R8), Z20
	VCVTPH2PS    (SI), Z16
	VFMADD231PS  Z16, Z20, Z0
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok16
store16:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    $64, BX
	JMP     chunk16
done:
	VZEROUPPER
	RET

// Constants of expSubAVX512: expMin, log2 e, Cody-Waite's ln 2 = C1 + C2
// (as exp32), the rounding constant 1.5·2^23, and a degree-5 polynomial
// p(r) = 1 + r·(c1 + r·(c2 + r·(c3 + r·(c4 + r·c5)))), minimax for the
// relative error of e^r on |r| <= ln2/2 (9.2e-8 before rounding; every
// value within expRelErr of e^x, TestExpSubSweep).
DATA expm<>+0(SB)/4, $-87.33654
DATA expm<>+4(SB)/4, $1.44269504088896341
DATA expm<>+8(SB)/4, $0.693359375
DATA expm<>+12(SB)/4, $-2.12194440e-4
DATA expm<>+16(SB)/4, $12582912.0
DATA expm<>+20(SB)/4, $0.008290290146997401
DATA expm<>+24(SB)/4, $0.041898062196643784
DATA expm<>+28(SB)/4, $0.16667637309411668
DATA expm<>+32(SB)/4, $0.499991485559959
DATA expm<>+36(SB)/4, $0.9999997066842039
DATA expm<>+40(SB)/4, $1.0
GLOBL expm<>(SB), RODATA|NOPTR, $44

// func expSubAVX512(x *float32, n int, m float32) float32
// x[i] = exp(x[i] - m), 0 where x[i] - m < expMin (and for -Inf and NaN);
// returns the sum, lanes folded as in sum16. The steps of exp32 with
// fewer multiplier operations (VPDPBUSD's and VFMADD's pipes; VSCALEFPS
// takes two cycles per zmm on Zen 4): n = rint(x·log2 e) by adding
// 1.5·2^23 in the FMA (t's low mantissa bits hold n), r = x - n·C1 - n·C2,
// the degree-5 polynomial above by five FMAs, and 2^n put into the
// exponent by an integer add of n<<23 (VPSLLD of t); x >= expMin keeps
// the result normal (for n = -126, r > 0 and p(r) >= 1). 8 multiplier
// operations per 16 values against 12 (docs/perf/cpu-attention.md v21).
TEXT ·expSubAVX512(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z20
	VBROADCASTSS expm<>+0(SB), Z21  // expMin
	VBROADCASTSS expm<>+4(SB), Z22  // log2 e
	VBROADCASTSS expm<>+8(SB), Z23  // C1
	VBROADCASTSS expm<>+12(SB), Z24 // C2
	VBROADCASTSS expm<>+16(SB), Z25 // 1.5·2^23
	VBROADCASTSS expm<>+20(SB), Z26 // c5
	VBROADCASTSS expm<>+24(SB), Z27
	VBROADCASTSS expm<>+28(SB), Z28
	VBROADCASTSS expm<>+32(SB), Z29
	VBROADCASTSS expm<>+36(SB), Z30 // c1
	VBROADCASTSS expm<>+40(SB), Z31 // 1
	VPXORD       Z0, Z0, Z0         // the lane sums
	SHRQ         $4, CX
	JZ           sum
loop:
	VMOVUPS      (DI), Z1
	VSUBPS       Z20, Z1, Z1        // x - m
	VCMPPS       $0x1d, Z21, Z1, K1 // x >= expMin (GE_OQ: false for NaN)
	VMOVAPS      Z25, Z2
	VFMADD231PS  Z22, Z1, Z2        // t = x·log2 e + 1.5·2^23
	VSUBPS       Z25, Z2, Z3        // n
	VFNMADD231PS Z23, Z3, Z1        // r = x - n·C1
	VFNMADD231PS Z24, Z3, Z1        // r -= n·C2
	VMOVAPS      Z26, Z4
	VFMADD213PS  Z27, Z1, Z4        // p = p·r + c4
	VFMADD213PS  Z28, Z1, Z4
	VFMADD213PS  Z29, Z1, Z4
	VFMADD213PS  Z30, Z1, Z4
	VFMADD213PS  Z31, Z1, Z4        // p·r + 1
	VPSLLD       $23, Z2, Z2        // n<<23
	VPADDD       Z2, Z4, Z4         // p·2^n
	VMOVAPS.Z    Z4, K1, Z4
	VMOVUPS      Z4, (DI)
	VADDPS       Z4, Z0, Z0
	ADDQ         $64, DI
	DECQ         CX
	JNZ          loop
sum:
	HSUM16(VADDPS)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func maxF32AVX512(x *float32, n int) float32
TEXT ·maxF32AVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	MOVL         $0xff800000, AX // -Inf
	VPBROADCASTD AX, Z0
	SHRQ         $4, CX
	JZ           fold
loop:
	VMAXPS (DI), Z0, Z0
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop
fold:
	HSUM16(VMAXPS)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func dotF32AVX512(a, b *float32, n int) float32
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), DI
	MOVQ   b+8(FP), SI
	MOVQ   n+16(FP), CX
	VPXORD Z0, Z0, Z0
	SHRQ   $4, CX
	JZ     fold
loop:
	VMOVUPS     (DI), Z1
	VFMADD231PS (SI), Z1, Z0
	ADDQ        $64, DI
	ADDQ        $64, SI
	DECQ        CX
	JNZ         loop
fold:
	HSUM16(VADDPS)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func foldQueryAVX512(qi *int8, qs, q, s, z *float32, d int) (a, bias float32)
// Pass 1: qs = q·s, bias lanes += q·z, max |qs|; pass 2 (qi not nil):
// qi = rint(qs·127/max) with signed saturation (VPMOVSDB).
TEXT ·foldQueryAVX512(SB), NOSPLIT, $0-56
	MOVQ         qi+0(FP), DI
	MOVQ         qs+8(FP), R8
	MOVQ         q+16(FP), SI
	MOVQ         s+24(FP), R9
	MOVQ         z+32(FP), R10
	MOVQ         d+40(FP), CX
	SHRQ         $4, CX
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z7
	VPXORD       Z0, Z0, Z0 // bias lanes
	VPXORD       Z5, Z5, Z5 // max |qs|
	XORQ         AX, AX
	MOVQ         CX, BX
pass1:
	VMOVUPS     (SI)(AX*1), Z2
	VMULPS      (R9)(AX*1), Z2, Z3
	VMOVUPS     Z3, (R8)(AX*1)
	VFMADD231PS (R10)(AX*1), Z2, Z0
	VANDPS      Z7, Z3, Z4
	VMAXPS      Z4, Z5, Z5
	ADDQ        $64, AX
	DECQ        BX
	JNZ         pass1
	HSUM16(VADDPS)
	VMOVSS      X0, bias+52(FP)
	VMOVAPS     Z5, Z0
	HSUM16(VMAXPS)
	MOVL        $0, a+48(FP)
	TESTQ       DI, DI
	JZ          done
	VXORPS      X1, X1, X1
	VUCOMISS    X1, X0
	JHI         quant
	XORQ        AX, AX
zero:
	VMOVDQU X1, (DI)(AX*1)
	ADDQ    $16, AX
	DECQ    CX
	JNZ     zero
	JMP     done
quant:
	MOVL         $0x42fe0000, AX // 127.0
	VMOVD        AX, X2
	VDIVSS       X2, X0, X3      // a = max/127
	VMOVSS       X3, a+48(FP)
	VDIVSS       X0, X2, X4      // 127/max
	VBROADCASTSS X4, Z6
	XORQ         AX, AX
	XORQ         DX, DX
pass2:
	VMULPS    (R8)(AX*1), Z6, Z2
	VCVTPS2DQ Z2, Z2
	VPMOVSDB  Z2, X3
	VMOVDQU   X3, (DI)(DX*1)
	ADDQ      $64, AX
	ADDQ      $16, DX
	DECQ      CX
	JNZ       pass2
done:
	VZEROUPPER
	RET

DATA pairIdx<>+0(SB)/4, $0
DATA pairIdx<>+4(SB)/4, $2
DATA pairIdx<>+8(SB)/4, $4
DATA pairIdx<>+12(SB)/4, $6
DATA pairIdx<>+16(SB)/4, $8
DATA pairIdx<>+20(SB)/4, $10
DATA pairIdx<>+24(SB)/4, $12
DATA pairIdx<>+28(SB)/4, $14
DATA pairIdx<>+32(SB)/4, $16
DATA pairIdx<>+36(SB)/4, $18
DATA pairIdx<>+40(SB)/4, $20
DATA pairIdx<>+44(SB)/4, $22
DATA pairIdx<>+48(SB)/4, $24
DATA pairIdx<>+52(SB)/4, $26
DATA pairIdx<>+56(SB)/4, $28
DATA pairIdx<>+60(SB)/4, $30
GLOBL pairIdx<>(SB), RODATA|NOPTR, $64

// func deinterleaveAVX512(a, b, src *float32, n int)
// n source floats, a multiple of 32: VPERMT2PS picks the even floats of
// two vectors (index 2i) and the odd ones (2i+1).
TEXT ·deinterleaveAVX512(SB), NOSPLIT, $0-32
	MOVQ         a+0(FP), DI
	MOVQ         b+8(FP), DX
	MOVQ         src+16(FP), SI
	MOVQ         n+24(FP), CX
	SHRQ         $5, CX
	JZ           done
	VMOVDQU32    pairIdx<>(SB), Z8
	MOVL         $1, AX
	VPBROADCASTD AX, Z9
	VPADDD       Z9, Z8, Z9
loop:
	VMOVUPS   (SI), Z0
	VMOVUPS   64(SI), Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z8, Z2
	VPERMT2PS Z1, Z9, Z0
	VMOVUPS   Z2, (DI)
	VMOVUPS   Z0, (DX)
	ADDQ      $128, SI
	ADDQ      $64, DI
	ADDQ      $64, DX
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func cvtPairsAVX512(a, b *float32, src *uint16, n int)
// n fp16 (scale, zero) pairs, a multiple of 16, to float32 a[i] and b[i]:
// cvtHalfAVX512 and deinterleaveAVX512 in one pass (VCVTPH2PS of 8 pairs
// twice, then the even and odd floats by VPERMT2PS).
TEXT ·cvtPairsAVX512(SB), NOSPLIT, $0-32
	MOVQ         a+0(FP), DI
	MOVQ         b+8(FP), DX
	MOVQ         src+16(FP), SI
	MOVQ         n+24(FP), CX
	SHRQ         $4, CX
	JZ           done
	VMOVDQU32    pairIdx<>(SB), Z8
	MOVL         $1, AX
	VPBROADCASTD AX, Z9
	VPADDD       Z9, Z8, Z9
loop:
	VCVTPH2PS (SI), Z0
	VCVTPH2PS 32(SI), Z1
	VMOVAPS   Z0, Z2
	VPERMT2PS Z1, Z8, Z2
	VPERMT2PS Z1, Z9, Z0
	VMOVUPS   Z2, (DI)
	VMOVUPS   Z0, (DX)
	ADDQ      $64, SI
	ADDQ      $64, DI
	ADDQ      $64, DX
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func dequantVAVX512(dst, z *float32, ldz int, codes *uint8, p *float32, n, d, grp int)
// Per token, per group: broadcast the scale, store the zero to z[j][t],
// then 16 codes at a time: VPMOVZXBD, VCVTDQ2PS, VMULPS.
TEXT ·dequantVAVX512(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), R11
	MOVQ ldz+16(FP), R10
	SHLQ $2, R10
	MOVQ codes+24(FP), SI
	MOVQ p+32(FP), R8
	MOVQ n+40(FP), CX
	MOVQ d+48(FP), R13
	SHRQ $4, R13           // 16-channel units per row
	MOVQ grp+56(FP), R14
	SHRQ $4, R14           // units per group
	TESTQ CX, CX
	JZ    done
token:
	MOVQ R11, R12
	MOVQ R13, BX
group:
	VBROADCASTSS (R8), Z1
	MOVL         4(R8), AX
	MOVL         AX, (R12)
	ADDQ         R10, R12
	ADDQ         $8, R8
	MOVQ         R14, DX
unit:
	VPMOVZXBD (SI), Z0
	VCVTDQ2PS Z0, Z0
	VMULPS    Z1, Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $16, SI
	ADDQ      $64, DI
	DECQ      DX
	JNZ       unit
	SUBQ      R14, BX
	JNZ       group
	ADDQ      $4, R11
	DECQ      CX
	JNZ       token
done:
	VZEROUPPER
	RET

// func quantWAVX512(wq *int16, ldq int, p, s *float32, lds, n, groups int) float32
// Pass 1: max of p[t]·s[j·lds+t] over groups j and tokens t (n a multiple
// of 16); pass 2: wq[j·ldq+t] = rint(p·s·32767/max) (VPMOVSDW), or 0 when
// max is not positive. Returns the step max/32767 (0).
TEXT ·quantWAVX512(SB), NOSPLIT, $0-60
	MOVQ   p+16(FP), SI
	MOVQ   s+24(FP), R9
	MOVQ   lds+32(FP), R10
	SHLQ   $2, R10
	MOVQ   groups+48(FP), R12
	VPXORD Z5, Z5, Z5
	MOVQ   R9, R13
	MOVQ   R12, BX
max1:
	XORQ AX, AX
	MOVQ n+40(FP), CX
	SHRQ $4, CX
	JZ   max3
max2:
	VMOVUPS (SI)(AX*1), Z2
	VMULPS  (R13)(AX*1), Z2, Z2
	VMAXPS  Z2, Z5, Z5
	ADDQ    $64, AX
	DECQ    CX
	JNZ     max2
max3:
	ADDQ R10, R13
	DECQ BX
	JNZ  max1
	VMOVAPS  Z5, Z0
	HSUM16(VMAXPS)
	VXORPS   X1, X1, X1
	MOVL     $0, ret+56(FP)
	MOVL     $0x46fffe00, AX // 32767.0
	VMOVD    AX, X2
	VUCOMISS X1, X0
	JHI      scale
	VXORPS   X4, X4, X4     // max <= 0 or NaN: all weights 0
	JMP      quant
scale:
	VDIVSS X2, X0, X3
	VMOVSS X3, ret+56(FP)
	VDIVSS X0, X2, X4
quant:
	VBROADCASTSS X4, Z6
	MOVQ         wq+0(FP), DI
	MOVQ         ldq+8(FP), R11
	SHLQ         $1, R11
	MOVQ         R9, R13
	MOVQ         R12, BX
q1:
	XORQ AX, AX
	XORQ DX, DX
	MOVQ n+40(FP), CX
	SHRQ $4, CX
	JZ   q3
q2:
	VMOVUPS   (SI)(AX*1), Z2
	VMULPS    (R13)(AX*1), Z2, Z2
	VMULPS    Z6, Z2, Z2
	VCVTPS2DQ Z2, Z2
	VPMOVSDW  Z2, Y3
	VMOVDQU   Y3, (DI)(DX*1)
	ADDQ      $64, AX
	ADDQ      $32, DX
	DECQ      CX
	JNZ       q2
q3:
	ADDQ R10, R13
	ADDQ R11, DI
	DECQ BX
	JNZ  q1
	VZEROUPPER
	RET

// pvIdx0 and pvIdx1 put the int32 sums of pvS16 back in channel order:
// of 32 channels, the "lo" vector holds 8L+k and "hi" 8L+4+k (lane L,
// k < 4), so channels 0..15 are lanes lo.0, hi.0, lo.1, hi.1 and 16..31
// lanes lo.2, hi.2, lo.3, hi.3 (VPERMT2D: 16 and up index hi).
DATA pvIdx<>+0(SB)/4, $0
DATA pvIdx<>+4(SB)/4, $1
DATA pvIdx<>+8(SB)/4, $2
DATA pvIdx<>+12(SB)/4, $3
DATA pvIdx<>+16(SB)/4, $16
DATA pvIdx<>+20(SB)/4, $17
DATA pvIdx<>+24(SB)/4, $18
DATA pvIdx<>+28(SB)/4, $19
DATA pvIdx<>+32(SB)/4, $4
DATA pvIdx<>+36(SB)/4, $5
DATA pvIdx<>+40(SB)/4, $6
DATA pvIdx<>+44(SB)/4, $7
DATA pvIdx<>+48(SB)/4, $20
DATA pvIdx<>+52(SB)/4, $21
DATA pvIdx<>+56(SB)/4, $22
DATA pvIdx<>+60(SB)/4, $23
DATA pvIdx<>+64(SB)/4, $8
DATA pvIdx<>+68(SB)/4, $9
DATA pvIdx<>+72(SB)/4, $10
DATA pvIdx<>+76(SB)/4, $11
DATA pvIdx<>+80(SB)/4, $24
DATA pvIdx<>+84(SB)/4, $25
DATA pvIdx<>+88(SB)/4, $26
DATA pvIdx<>+92(SB)/4, $27
DATA pvIdx<>+96(SB)/4, $12
DATA pvIdx<>+100(SB)/4, $13
DATA pvIdx<>+104(SB)/4, $14
DATA pvIdx<>+108(SB)/4, $15
DATA pvIdx<>+112(SB)/4, $28
DATA pvIdx<>+116(SB)/4, $29
DATA pvIdx<>+120(SB)/4, $30
DATA pvIdx<>+124(SB)/4, $31
GLOBL pvIdx<>(SB), RODATA|NOPTR, $128

// PVOUT writes 32 channels of one row: LO, HI (int32 sums in pvS16's
// order) back in channel order, converted, times the row's step Z26,
// added to the floats at OFF(AX). Z20 is scratch; LO is clobbered.
#define PVOUT(LO, HI, OFF) \
	VMOVDQA32   LO, Z20            \
	VPERMT2D    HI, Z24, Z20       \
	VPERMT2D    HI, Z25, LO        \
	VCVTDQ2PS   Z20, Z20           \
	VCVTDQ2PS   LO, LO             \
	VFMADD213PS OFF(AX), Z26, Z20  \
	VFMADD213PS OFF+64(AX), Z26, LO \
	VMOVUPS     Z20, OFF(AX)       \
	VMOVUPS     LO, OFF+64(AX)

// func pvS16VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, codes *uint8, n, d, gshift int, pf *byte, pfLines int)
// Four rows r: acc[r·ldacc+c] += delta[r]·Σ_t wq[r·ldw + (c>>gshift)·ldq + t]·codes[t·d+c]
// over t < n (even) for c < d (a multiple of 64). Per 64 channels and pair
// of tokens: the two rows of 32+32 codes zero-extended to words
// (VPMOVZXBW) and interleaved (VPUNPCKLWD/HWD: dword = the pair's two
// codes of one channel) in Z16..Z19; each row's pair of weights
// broadcast (Z24..Z27 for the first 32 channels' group, Z28..Z31 for the
// second's); VPDPWSSD into Z0..Z15 (row r: Z4r..Z4r+3). Exact in int32
// while n·32767·255 < 2^31 (n <= 256). Two lines of [pf, pf+64·pfLines)
// are prefetched per pair (the next block's values: all 256 of int8's
// 128-token V half but its params; docs/perf/cpu-attention.md v23).
TEXT ·pvS16VNNI(SB), NOSPLIT, $0-96
	MOVQ pf+80(FP), R14
	MOVQ pfLines+88(FP), R15
	MOVQ ldw+32(FP), R10
	SHLQ $1, R10
	LEAQ (R10)(R10*2), R11
	MOVQ d+64(FP), DX
	XORQ BX, BX            // c0
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
	// Weight pointers of the two 32-channel groups of this half.
	MOVQ gshift+72(FP), CX
	MOVQ ldq+40(FP), R12
	SHLQ $1, R12
	MOVQ BX, R8
	SHRQ CX, R8
	IMULQ R12, R8
	ADDQ wq+24(FP), R8
	LEAQ 32(BX), R9
	SHRQ CX, R9
	IMULQ R12, R9
	ADDQ wq+24(FP), R9
	MOVQ codes+48(FP), SI
	ADDQ BX, SI
	MOVQ n+56(FP), CX
	SHRQ $1, CX
	JZ   out
pair:
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
	VPMOVZXBW    (SI), Z20
	VPMOVZXBW    (SI)(DX*1), Z21
	VPUNPCKLWD   Z21, Z20, Z16
	VPUNPCKHWD   Z21, Z20, Z17
	VPMOVZXBW    32(SI), Z22
	VPMOVZXBW    32(SI)(DX*1), Z23
	VPUNPCKLWD   Z23, Z22, Z18
	VPUNPCKHWD   Z23, Z22, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	VPBROADCASTD (R9), Z28
	VPBROADCASTD (R9)(R10*1), Z29
	VPBROADCASTD (R9)(R10*2), Z30
	VPBROADCASTD (R9)(R11*1), Z31
	VPDPWSSD     Z24, Z16, Z0
	VPDPWSSD     Z24, Z17, Z1
	VPDPWSSD     Z28, Z18, Z2
	VPDPWSSD     Z28, Z19, Z3
	VPDPWSSD     Z25, Z16, Z4
	VPDPWSSD     Z25, Z17, Z5
	VPDPWSSD     Z29, Z18, Z6
	VPDPWSSD     Z29, Z19, Z7
	VPDPWSSD     Z26, Z16, Z8
	VPDPWSSD     Z26, Z17, Z9
	VPDPWSSD     Z30, Z18, Z10
	VPDPWSSD     Z30, Z19, Z11
	VPDPWSSD     Z27, Z16, Z12
	VPDPWSSD     Z27, Z17, Z13
	VPDPWSSD     Z31, Z18, Z14
	VPDPWSSD     Z31, Z19, Z15
	ADDQ         $4, R8
	ADDQ         $4, R9
	LEAQ         (SI)(DX*2), SI
	DECQ         CX
	JNZ          pair
out:
	VMOVDQU32    pvIdx<>+0(SB), Z24
	VMOVDQU32    pvIdx<>+64(SB), Z25
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS (R13), Z26
	PVOUT(Z0, Z1, 0)
	PVOUT(Z2, Z3, 128)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	PVOUT(Z4, Z5, 0)
	PVOUT(Z6, Z7, 128)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	PVOUT(Z8, Z9, 0)
	PVOUT(Z10, Z11, 128)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	PVOUT(Z12, Z13, 0)
	PVOUT(Z14, Z15, 128)
	ADDQ         $64, BX
	CMPQ         BX, DX
	JLT          half
	VZEROUPPER
	RET

// func prefetchL2(p *byte, n int)
// PREFETCHT1 every 64-byte line of [p, p+n): the next block's K and V
// stream into L2 while this block is computed (blocks are separate
// allocations, so the hardware's stream prefetcher restarts at each).
TEXT ·prefetchL2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX
loop:
	CMPQ       SI, CX
	JGE        done
	PREFETCHT1 (SI)
	ADDQ       $64, SI
	JMP        loop
done:
	RET

// func splitQueryAVX512(hi, lo *int8, q *float32, d int) float32
// splitQuery (block.go): v = rint(q·wideSteps/max|q|), hi = (v+64)>>7,
// lo = v - hi<<7, both narrowed by VPMOVSDB; returns max|q|/wideSteps.
TEXT ·splitQueryAVX512(SB), NOSPLIT, $0-36
	MOVQ         hi+0(FP), DI
	MOVQ         lo+8(FP), DX
	MOVQ         q+16(FP), SI
	MOVQ         d+24(FP), CX
	SHRQ         $4, CX
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z7
	VPXORD       Z5, Z5, Z5
	XORQ         AX, AX
	MOVQ         CX, BX
amax:
	VANDPS (SI)(AX*1), Z7, Z4
	VMAXPS Z4, Z5, Z5
	ADDQ   $64, AX
	DECQ   BX
	JNZ    amax
	VMOVAPS  Z5, Z0
	HSUM16(VMAXPS)
	MOVL     $0, ret+32(FP)
	VXORPS   X1, X1, X1
	VUCOMISS X1, X0
	JHI      quant
	XORQ     AX, AX
zero:
	VMOVDQU X1, (DI)(AX*1)
	VMOVDQU X1, (DX)(AX*1)
	ADDQ    $16, AX
	DECQ    CX
	JNZ     zero
	JMP     done
quant:
	MOVL         $0x467e0000, AX // 16256.0 = wideSteps
	VMOVD        AX, X2
	VDIVSS       X2, X0, X3
	VMOVSS       X3, ret+32(FP)
	VDIVSS       X0, X2, X4
	VBROADCASTSS X4, Z6
	MOVL         $64, AX
	VPBROADCASTD AX, Z8
	XORQ         AX, AX
	XORQ         BX, BX
split:
	VMULPS    (SI)(AX*1), Z6, Z2
	VCVTPS2DQ Z2, Z2          // v
	VPADDD    Z8, Z2, Z3
	VPSRAD    $7, Z3, Z3      // hi = (v+64)>>7
	VPSLLD    $7, Z3, Z4
	VPSUBD    Z4, Z2, Z2      // lo = v - hi<<7
	VPMOVSDB  Z3, X3
	VPMOVSDB  Z2, X2
	VMOVDQU   X3, (DI)(BX*1)
	VMOVDQU   X2, (DX)(BX*1)
	ADDQ      $64, AX
	ADDQ      $16, BX
	DECQ      CX
	JNZ       split
done:
	VZEROUPPER
	RET

// REDUCE8R is REDUCE8 on any eight accumulators A0..A7 (result in A0's
// low 256 bits), with scratch T1, T2 and the tileIdx vector in IDX.
#define REDUCE8R(A0, A1, A2, A3, A4, A5, A6, A7, T1, T2, IDX) \
	VSHUFF64X2 $0x44, A1, A0, T1 \
	VSHUFF64X2 $0xee, A1, A0, T2 \
	VADDPS     T2, T1, A0        \
	VSHUFF64X2 $0x44, A3, A2, T1 \
	VSHUFF64X2 $0xee, A3, A2, T2 \
	VADDPS     T2, T1, A2        \
	VSHUFF64X2 $0x44, A5, A4, T1 \
	VSHUFF64X2 $0xee, A5, A4, T2 \
	VADDPS     T2, T1, A4        \
	VSHUFF64X2 $0x44, A7, A6, T1 \
	VSHUFF64X2 $0xee, A7, A6, T2 \
	VADDPS     T2, T1, A6        \
	VSHUFF64X2 $0x88, A2, A0, T1 \
	VSHUFF64X2 $0xdd, A2, A0, T2 \
	VADDPS     T2, T1, A0        \
	VSHUFF64X2 $0x88, A6, A4, T1 \
	VSHUFF64X2 $0xdd, A6, A4, T2 \
	VADDPS     T2, T1, A4        \
	VSHUFPS    $0x88, A4, A0, T1 \
	VSHUFPS    $0xdd, A4, A0, T2 \
	VADDPS     T2, T1, A0        \
	VSHUFPS    $0x88, A0, A0, T1 \
	VSHUFPS    $0xdd, A0, A0, T2 \
	VADDPS     T2, T1, A0        \
	VPERMPS    A0, IDX, A0

// CVT2(ADDR, T, ACC0, ACC1) converts 16 fp16 values at ADDR into T and
// adds their products with the two query chunks (Z16, Z17).
#define CVT2(ADDR, T, ACC0, ACC1) \
	VCVTPH2PS   ADDR, T      \
	VFMADD231PS T, Z16, ACC0 \
	VFMADD231PS T, Z17, ACC1

// func scoresHalf2AVX512(out0, out1, q0, q1 *float32, k *uint16, n, d int, pf *byte, pfTile int)
// out0[t] = q0·k[t] and out1[t] = q1·k[t] for t < n (a multiple of 8), k
// rows of d fp16 values (d a multiple of 16): each chunk of a token is
// converted once for both rows. Accumulators Z0..Z7 (row 0) and Z8..Z15
// (row 1), the query chunks in Z16, Z17, conversions in Z18..Z25.
// Each 8-token tile prefetches pfTile lines from pf on into L2 (as
// pvHalfx4).
TEXT ·scoresHalf2AVX512(SB), NOSPLIT, $0-72
	MOVQ      out0+0(FP), DI
	MOVQ      out1+8(FP), R11
	MOVQ      q0+16(FP), SI
	MOVQ      q1+24(FP), R12
	MOVQ      k+32(FP), DX
	MOVQ      n+40(FP), CX
	MOVQ      d+48(FP), BX
	VMOVDQU32 tileIdx<>(SB), Y26
	SHLQ      $1, BX            // row stride in bytes
	LEAQ      (BX)(BX*2), R10
	SHRQ      $3, CX
	JZ        done
tile:
	MOVQ  pfTile+64(FP), R14
	TESTQ R14, R14
	JZ    pfdone
	MOVQ  pf+56(FP), R15
pfloop:
	PREFETCHT1 (R15)
	ADDQ  $64, R15
	DECQ  R14
	JNZ   pfloop
	MOVQ  R15, pf+56(FP)
pfdone:
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
	MOVQ   DX, R8
	LEAQ   (DX)(BX*4), R9
	XORQ   AX, AX             // byte offset in the fp16 row
	XORQ   R13, R13           // byte offset in the query rows
chunk:
	VMOVUPS (SI)(R13*1), Z16
	VMOVUPS (R12)(R13*1), Z17
	CVT2((R8), Z18, Z0, Z8)
	CVT2((R8)(BX*1), Z19, Z1, Z9)
	CVT2((R8)(BX*2), Z20, Z2, Z10)
	CVT2((R8)(R10*1), Z21, Z3, Z11)
	CVT2((R9), Z22, Z4, Z12)
	CVT2((R9)(BX*1), Z23, Z5, Z13)
	CVT2((R9)(BX*2), Z24, Z6, Z14)
	CVT2((R9)(R10*1), Z25, Z7, Z15)
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $64, R13
	ADDQ    $32, AX
	CMPQ    AX, BX
	JLT     chunk
	REDUCE8R(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z16, Z17, Z26)
	REDUCE8R(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z26)
	VMOVUPS Y0, (DI)
	VMOVUPS Y8, (R11)
	ADDQ    $32, DI
	ADDQ    $32, R11
	LEAQ    (DX)(BX*8), DX
	DECQ    CX
	JNZ     tile
done:
	VZEROUPPER
	RET

// func bcastQ16(dst *int8, q *int8, d int)
// dst holds, for each 16-byte chunk k of q (d a multiple of 16), the chunk
// repeated in the four 128-bit lanes of 64 bytes: the query operand of
// scoresU8x4VNNI.
TEXT ·bcastQ16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ d+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VBROADCASTI32X4 (SI), Z0
	VMOVDQU64       Z0, (DI)
	ADDQ            $16, SI
	ADDQ            $64, DI
	DECQ            CX
	JNZ             loop
done:
	VZEROUPPER
	RET

// lanePerm puts the 16 sums of scoresU8x4VNNI in token order: after the
// reduction, lane j holds tokens j, 4+j, 8+j, 12+j, so token t is element
// 4·(t%4) + t/4.
DATA lanePerm<>+0(SB)/4, $0
DATA lanePerm<>+4(SB)/4, $4
DATA lanePerm<>+8(SB)/4, $8
DATA lanePerm<>+12(SB)/4, $12
DATA lanePerm<>+16(SB)/4, $1
DATA lanePerm<>+20(SB)/4, $5
DATA lanePerm<>+24(SB)/4, $9
DATA lanePerm<>+28(SB)/4, $13
DATA lanePerm<>+32(SB)/4, $2
DATA lanePerm<>+36(SB)/4, $6
DATA lanePerm<>+40(SB)/4, $10
DATA lanePerm<>+44(SB)/4, $14
DATA lanePerm<>+48(SB)/4, $3
DATA lanePerm<>+52(SB)/4, $7
DATA lanePerm<>+56(SB)/4, $11
DATA lanePerm<>+60(SB)/4, $15
GLOBL lanePerm<>(SB), RODATA|NOPTR, $64

// SUBTILE(S0, S1, S2, S3) loads a 64-byte chunk of four token rows
// starting at R8 (row stride BX, 3 rows R10), transposes
// them by 128-bit lanes (Z20..Z23: chunk j of the four tokens) and adds
// their products with the broadcast query chunks at R9 (row stride R11,
// chunk j at 64·j) into the accumulators S0 of row 0 ... (one per row,
// passed as the four registers S0..S3 of this sub-tile).
#define SUBTILE(S0, S1, S2, S3) \
	VMOVDQU64  (R8), Z16                 \
	VMOVDQU64  (R8)(BX*1), Z17           \
	VMOVDQU64  (R8)(BX*2), Z18           \
	VMOVDQU64  (R8)(R10*1), Z19          \
	VSHUFI32X4 $0x44, Z17, Z16, Z24      \
	VSHUFI32X4 $0xee, Z17, Z16, Z25      \
	VSHUFI32X4 $0x44, Z19, Z18, Z26      \
	VSHUFI32X4 $0xee, Z19, Z18, Z27      \
	VSHUFI32X4 $0x88, Z26, Z24, Z20      \
	VSHUFI32X4 $0xdd, Z26, Z24, Z21      \
	VSHUFI32X4 $0x88, Z27, Z25, Z22      \
	VSHUFI32X4 $0xdd, Z27, Z25, Z23      \
	VPDPBUSD   (R9), Z20, S0             \
	VPDPBUSD   64(R9), Z21, S0           \
	VPDPBUSD   128(R9), Z22, S0          \
	VPDPBUSD   192(R9), Z23, S0          \
	VPDPBUSD   (R9)(R11*1), Z20, S1      \
	VPDPBUSD   64(R9)(R11*1), Z21, S1    \
	VPDPBUSD   128(R9)(R11*1), Z22, S1   \
	VPDPBUSD   192(R9)(R11*1), Z23, S1   \
	VPDPBUSD   (R9)(R11*2), Z20, S2      \
	VPDPBUSD   64(R9)(R11*2), Z21, S2    \
	VPDPBUSD   128(R9)(R11*2), Z22, S2   \
	VPDPBUSD   192(R9)(R11*2), Z23, S2   \
	VPDPBUSD   (R9)(R12*1), Z20, S3      \
	VPDPBUSD   64(R9)(R12*1), Z21, S3    \
	VPDPBUSD   128(R9)(R12*1), Z22, S3   \
	VPDPBUSD   192(R9)(R12*1), Z23, S3

// ROWSTORE writes a row's 16 scores in Z17 to its outputs at AX (adding
// c·out[t], Z29 c, where R13, the c flag, is set) and moves AX to the next
// row (R14 ldo in bytes); Z26 scratch. The tail of ROWOUT, ROWOUT2 and
// ROWOUT2U.
#define ROWSTORE \
	TESTL        R13, R13              \
	JZ           3(PC)                 \
	VMULPS       (AX), Z29, Z26        \
	VADDPS       Z26, Z17, Z17         \
	VMOVUPS      Z17, (AX)             \
	ADDQ         R14, AX

// ROWFLOAT(AOFF, BOFF) converts a row's integer sums in Z17 and makes them
// a·A[t]·x + b·B[t] (a, b at AOFF and BOFF in ab at DX; A at SI, B at R15),
// then ROWSTORE; Z24, Z25 scratch. ROWOUT's and ROWOUT2's float operations.
#define ROWFLOAT(AOFF, BOFF) \
	VCVTDQ2PS    Z17, Z17              \
	VBROADCASTSS AOFF(DX), Z24         \
	VBROADCASTSS BOFF(DX), Z25         \
	VMULPS       (SI), Z24, Z24        \
	VMULPS       Z24, Z17, Z17         \
	VMULPS       (R15), Z25, Z25       \
	VADDPS       Z25, Z17, Z17         \
	ROWSTORE

// ROWOUT(A, B, C, D, ROW) sums the four sub-tile accumulators of one row
// (A: tokens 0-3, one per lane, ... D: tokens 12-15), puts the 16 sums in
// token order, converts them and writes a·A[t]·x + b·B[t] (+ c·out[t])
// to the row's outputs at AX, then moves AX to the next row; AOFF and
// BOFF are the byte offsets of the row's a and b in ab. Z16..Z19, Z24..Z27 scratch; Z28
// lanePerm, Z29 c, R13 the c flag, R14 ldo in bytes, SI A, R15 B, DX ab.
#define ROWOUT(A, B, C, D, AOFF, BOFF) \
	VPUNPCKLDQ   B, A, Z16             \
	VPUNPCKHDQ   B, A, Z17             \
	VPADDD       Z17, Z16, Z16         \
	VPUNPCKLDQ   D, C, Z18             \
	VPUNPCKHDQ   D, C, Z19             \
	VPADDD       Z19, Z18, Z18         \
	VPUNPCKLQDQ  Z18, Z16, Z17         \
	VPUNPCKHQDQ  Z18, Z16, Z19         \
	VPADDD       Z19, Z17, Z17         \
	VPERMD       Z17, Z28, Z17         \
	ROWFLOAT(AOFF, BOFF)

// func scoresU8x4VNNI(out *float32, ldo int, q *int8, k *uint8, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// Four query rows r: out[r·ldo+t] = ab[r]·A[t]·(q_r·k[t]) + ab[4+r]·B[t]
// (+ c·out[r·ldo+t] when c is not 0), for t < n (a multiple of 16), rows
// of d byte codes (a multiple of 64), q the four rows' broadcast chunks
// (bcastQ16: d·4 bytes per row). Accumulators: Z0..Z15, row r sub-tile s
// (tokens 4s..4s+3) in Z(4s+r). Each tile prefetches pfTile lines from pf
// on (the next block's keys).
TEXT ·scoresU8x4VNNI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), BX         // token row stride in bytes
	LEAQ         (BX)(BX*2), R10
	MOVQ         BX, R11
	SHLQ         $2, R11              // query row stride: d·4 bytes
	LEAQ         (R11)(R11*2), R12
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	MOVL         c+72(FP), R13
	VBROADCASTSS c+72(FP), Z29
	VMOVDQU32    lanePerm<>(SB), Z28
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         ab+48(FP), DX
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ pfTile+88(FP), R8
	TESTQ R8, R8
	JZ   pfdone
	MOVQ pf+80(FP), R9
pfloop:
	PREFETCHT1 (R9)
	ADDQ $64, R9
	DECQ R8
	JNZ  pfloop
	MOVQ R9, pf+80(FP)
pfdone:
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
	MOVQ   q+16(FP), R9
	XORQ   AX, AX               // byte offset in the token rows
chunk:
	LEAQ (CX)(AX*1), R8
	SUBTILE(Z0, Z1, Z2, Z3)
	LEAQ (R8)(BX*4), R8
	SUBTILE(Z4, Z5, Z6, Z7)
	LEAQ (R8)(BX*4), R8
	SUBTILE(Z8, Z9, Z10, Z11)
	LEAQ (R8)(BX*4), R8
	SUBTILE(Z12, Z13, Z14, Z15)
	ADDQ $256, R9
	ADDQ $64, AX
	CMPQ AX, BX
	JLT  chunk
	MOVQ out+0(FP), AX
	ROWOUT(Z0, Z4, Z8, Z12, 0, 16)
	ROWOUT(Z1, Z5, Z9, Z13, 4, 20)
	ROWOUT(Z2, Z6, Z10, Z14, 8, 24)
	ROWOUT(Z3, Z7, Z11, Z15, 12, 28)
	ADDQ $64, out+0(FP)
	ADDQ $64, SI
	ADDQ $64, R15
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
done:
	VZEROUPPER
	RET

// func quantWRowsAVX512(wq *int16, ldw, ldq int, p *float32, ldp int, s, z *float32, lds, n, groups, rows int, delta, zsum *float32)
// quantWAVX512 for rows r < rows (p and wq rows at strides ldp floats and
// ldw int16s; delta[r] the row's step), and in the same first pass the
// zeros' sums zsum[r·groups+j] = Σ_t p[t]·z[j·lds+t], lanes folded as in
// sum16: one call per run instead of a quantW and a dotF32 per row.
TEXT ·quantWRowsAVX512(SB), NOSPLIT, $0-104
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
	ADDQ   zsum+96(FP), R15     // zsum row
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
	MOVQ     delta+88(FP), DX
	MOVL     $0, (DX)(R14*4)
	VXORPS   X1, X1, X1
	MOVL     $0x46fffe00, AX // 32767.0
	VMOVD    AX, X2
	VUCOMISS X1, X0
	JHI      scale
	VXORPS   X4, X4, X4
	JMP      quant
scale:
	VDIVSS X2, X0, X3
	VMOVSS X3, (DX)(R14*4)
	VDIVSS X0, X2, X4
quant:
	VBROADCASTSS X4, Z6
	MOVQ         ldw+8(FP), DI
	IMULQ        R14, DI
	SHLQ         $1, DI
	ADDQ         wq+0(FP), DI
	MOVQ         ldq+16(FP), R11
	SHLQ         $1, R11
	MOVQ         s+40(FP), R13
	MOVQ         R12, BX
q1:
	XORQ AX, AX
	XORQ DX, DX
	MOVQ n+64(FP), CX
	SHRQ $4, CX
	JZ   q3
q2:
	VMOVUPS   (SI)(AX*1), Z2
	VMULPS    (R13)(AX*1), Z2, Z2
	VMULPS    Z6, Z2, Z2
	VCVTPS2DQ Z2, Z2
	VPMOVSDW  Z2, Y3
	VMOVDQU   Y3, (DI)(DX*1)
	ADDQ      $64, AX
	ADDQ      $32, DX
	DECQ      CX
	JNZ       q2
q3:
	ADDQ R10, R13
	ADDQ R11, DI
	DECQ BX
	JNZ  q1
	INCQ R14
	JMP  row
done:
	VZEROUPPER
	RET

// func bcastQ4(dst *int8, q *int8, d int)
// The query operand of scoresI4x4VNNI: for each 32 channels of q (d a
// multiple of 32), the 16 even channels (the low nibbles of 16 packed int4
// bytes) repeated in four lanes, then the 16 odd ones (the high nibbles).
// VPMOVWB keeps the low byte of each word: the even channels; after a
// shift by 8, the odd ones.
TEXT ·bcastQ4(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ d+16(FP), CX
	SHRQ $5, CX
	JZ   done
loop:
	VMOVDQU         (SI), Y0
	VPMOVWB         Y0, X1
	VPSRLW          $8, Y0, Y0
	VPMOVWB         Y0, X2
	VSHUFI32X4      $0, Z1, Z1, Z1 // lane 0 to all four
	VSHUFI32X4      $0, Z2, Z2, Z2
	VMOVDQU64       Z1, (DI)
	VMOVDQU64       Z2, 64(DI)
	ADDQ            $32, SI
	ADDQ            $128, DI
	DECQ            CX
	JNZ             loop
done:
	VZEROUPPER
	RET

// SUBT4(V0, V1, V2, V3) loads the 64-byte chunks at DX of tokens 0, 4,
// 8, 12 (stride R10 = 4 rows, R13 = 12 rows) and transposes them by
// 128-bit lanes: Vj holds the j-th 16 packed bytes (32 channels) of token
// 4i in lane i; then it moves DX to the next token. Z24..Z28, Z31 scratch.
#define SUBT4(V0, V1, V2, V3) \
	VMOVDQU64  (DX), Z24                 \
	VMOVDQU64  (DX)(R10*1), Z25          \
	VMOVDQU64  (DX)(R10*2), Z26          \
	VMOVDQU64  (DX)(R13*1), Z27          \
	VSHUFI32X4 $0x44, Z25, Z24, Z28      \
	VSHUFI32X4 $0xee, Z25, Z24, Z31      \
	VSHUFI32X4 $0x44, Z27, Z26, Z24      \
	VSHUFI32X4 $0xee, Z27, Z26, Z25      \
	VSHUFI32X4 $0x88, Z24, Z28, V0       \
	VSHUFI32X4 $0xdd, Z24, Z28, V1       \
	VSHUFI32X4 $0x88, Z25, Z31, V2       \
	VSHUFI32X4 $0xdd, Z25, Z31, V3       \
	ADDQ       BX, DX

// TR4(A, B, C, D) transposes the dwords within each 128-bit lane of four
// vectors (SUBT4's of tokens 4i, 4i+1, 4i+2, 4i+3 for one j): A..D then
// hold the lanes' dwords 0..3 of every token, token t in dword t. Z24..Z27
// scratch.
#define TR4(A, B, C, D) \
	VPUNPCKLDQ  B, A, Z24    \
	VPUNPCKHDQ  B, A, Z25    \
	VPUNPCKLDQ  D, C, Z26    \
	VPUNPCKHDQ  D, C, Z27    \
	VPUNPCKLQDQ Z26, Z24, A  \
	VPUNPCKHQDQ Z26, Z24, B  \
	VPUNPCKLQDQ Z27, Z25, C  \
	VPUNPCKHQDQ Z27, Z25, D

// LANET4(V0, V1, V2, V3) is SUBT4's transpose by 128-bit lanes of Z24..Z27
// (loaded from tokens 0, 4, 8, 12 of a sub-tile): Vj holds lane j of each
// in lane i. Z24..Z28, Z31 scratch.
#define LANET4(V0, V1, V2, V3) \
	VSHUFI32X4 $0x44, Z25, Z24, Z28      \
	VSHUFI32X4 $0xee, Z25, Z24, Z31      \
	VSHUFI32X4 $0x44, Z27, Z26, Z24      \
	VSHUFI32X4 $0xee, Z27, Z26, Z25      \
	VSHUFI32X4 $0x88, Z24, Z28, V0       \
	VSHUFI32X4 $0xdd, Z24, Z28, V1       \
	VSHUFI32X4 $0x88, Z25, Z31, V2       \
	VSHUFI32X4 $0xdd, Z25, Z31, V3

// SUBT4W(V0, V1, V2, V3) is SUBT4 for rows of 32 packed bytes (d 64): each
// 64-byte load at DX (stride R10 = 4 rows, R13 = 12) holds tokens 4i and
// 4i+1, so V0 and V1 get the first and second 16 bytes of token 4i in lane
// i, V2 and V3 those of token 4i+1; then DX moves two tokens on.
#define SUBT4W(V0, V1, V2, V3) \
	VMOVDQU64 (DX), Z24          \
	VMOVDQU64 (DX)(R10*1), Z25   \
	VMOVDQU64 (DX)(R10*2), Z26   \
	VMOVDQU64 (DX)(R13*1), Z27   \
	LANET4(V0, V1, V2, V3)       \
	LEAQ      (DX)(BX*2), DX

// SUBT4H is SUBT4W for the last 32 packed bytes of longer rows (d % 128 ==
// 64, d > 64): token 4i's 32 bytes at DX in lanes 0 and 1, token 4i+1's in
// lanes 2 and 3 (a 32-byte load and an insert each). R8 scratch.
#define SUBT4H(V0, V1, V2, V3) \
	LEAQ         (DX)(BX*1), R8             \
	VMOVDQU64      (DX), Y24                  \
	VINSERTI64X4 $1, (R8), Z24, Z24         \
	VMOVDQU64      (DX)(R10*1), Y25           \
	VINSERTI64X4 $1, (R8)(R10*1), Z25, Z25  \
	VMOVDQU64      (DX)(R10*2), Y26           \
	VINSERTI64X4 $1, (R8)(R10*2), Z26, Z26  \
	VMOVDQU64      (DX)(R13*1), Y27           \
	VINSERTI64X4 $1, (R8)(R13*1), Z27, Z27  \
	LANET4(V0, V1, V2, V3)                  \
	LEAQ         (DX)(BX*2), DX

// STEP4(W, QOFF) multiplies the vector W, whose dword t holds token t's
// packed channels c..c+7, with the four rows' query: W & 0x0f (the even
// channels) into Z0..Z3 and W & 0xf0 (16 times the odd ones) into Z4..Z7,
// each with the row's broadcast query dword of those channels (bcastQ4's
// layout: even channels at QOFF, odd ones at QOFF+64). Z28, Z31 scratch;
// Z30 the mask 0x0f.
#define STEP4(W, QOFF) \
	VPANDD        Z30, W, Z28                 \
	VPANDND       W, Z30, Z31                 \
	VPDPBUSD.BCST QOFF(R9), Z28, Z0           \
	VPDPBUSD.BCST QOFF(R9)(R11*1), Z28, Z1    \
	VPDPBUSD.BCST QOFF(R9)(R11*2), Z28, Z2    \
	VPDPBUSD.BCST QOFF(R9)(R12*1), Z28, Z3    \
	VPDPBUSD.BCST QOFF+64(R9), Z31, Z4        \
	VPDPBUSD.BCST QOFF+64(R9)(R11*1), Z31, Z5 \
	VPDPBUSD.BCST QOFF+64(R9)(R11*2), Z31, Z6 \
	VPDPBUSD.BCST QOFF+64(R9)(R12*1), Z31, Z7

// CHUNK4(A, B, C, D, QOFF) is one 16-byte column of a 16-token tile: the
// SUBT4 vectors of tokens 4i..4i+3 transposed (TR4) and each multiplied
// (STEP4) with the query dwords 0..3 of the column's 32 channels.
#define CHUNK4(A, B, C, D, QOFF) \
	TR4(A, B, C, D)     \
	STEP4(A, QOFF)      \
	STEP4(B, QOFF+4)    \
	STEP4(C, QOFF+8)    \
	STEP4(D, QOFF+12)

// ROWOUT4(LO, HI, AOFF, BOFF) is ROWOUT for scoresI4x4VNNI: the row's
// sums are LO + HI/16 (HI holds sixteen times its channels' products: the
// shift is exact), one token per dword in token order; then the same
// float operations as ROWOUT.
#define ROWOUT4(LO, HI, AOFF, BOFF) \
	VPSRAD       $4, HI, HI            \
	VPADDD       HI, LO, Z17           \
	ROWFLOAT(AOFF, BOFF)

// ROWOUT4U is ROWOUT4 where every A[t] and B[t] is 1 (KC keys: A nil):
// x·a + b, the bits of x·(a·1) + b·1 (as ROWOUT2U).
#define ROWOUT4U(LO, HI, AOFF, BOFF) \
	VPSRAD       $4, HI, HI            \
	VPADDD       HI, LO, Z17           \
	VCVTDQ2PS    Z17, Z17              \
	VMULPS.BCST  AOFF(DX), Z17, Z17    \
	VADDPS.BCST  BOFF(DX), Z17, Z17    \
	ROWSTORE

// func scoresI4x4VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// scoresU8x4VNNI on packed int4 rows (d/2 bytes, a multiple of 64): no
// unpacking pass; q is bcastQ4's layout (d·4 bytes per row; only the
// first lane's dwords are read). Per 16-token tile and 64 packed bytes the
// tokens' rows go, four tokens a vector, through a transpose by lanes
// (SUBT4) and one of the dwords within the lanes (TR4) into sixteen
// vectors whose dword t holds token t's packed channels c..c+7, so each
// accumulator dword is one token's sum in token order (as scoresI2x4VBMI,
// v49): row r in Z(r) (even channels) and Z(4+r) (odd, times 16). A nil
// (and B): every A[t] and B[t] is 1 (ROWOUT4U). Each tile prefetches
// pfTile lines from pf on (the next block's keys, spread over this
// block's work); pf's region must hold them all.
TEXT ·scoresI4x4VNNI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), R11
	MOVQ         R11, BX
	SHRQ         $1, BX               // packed row stride: d/2 bytes
	LEAQ         (BX*4), R10          // four rows
	SHLQ         $2, R11              // query row stride: d·4 bytes
	LEAQ         (R11)(R11*2), R12
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	VBROADCASTSS c+72(FP), Z29
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ  pf+80(FP), R9
	MOVQ  pfTile+88(FP), R8
	TESTQ R8, R8
	JZ    pfdone
pfloop:
	PREFETCHT1 (R9)
	ADDQ       $64, R9
	DECQ       R8
	JNZ        pfloop
	MOVQ       R9, pf+80(FP)
pfdone:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	LEAQ   (R10)(R10*2), R13          // twelve rows
	MOVQ   q+16(FP), R9
	XORQ   AX, AX                     // byte offset in the packed rows
	CMPQ   BX, $64
	JLT    half                       // d 64: one half chunk
chunk:
	LEAQ  (CX)(AX*1), DX
	SUBT4(Z8, Z9, Z10, Z11)           // tokens 4i
	SUBT4(Z12, Z13, Z14, Z15)         // 4i+1
	SUBT4(Z16, Z17, Z18, Z19)         // 4i+2
	SUBT4(Z20, Z21, Z22, Z23)         // 4i+3
	CHUNK4(Z8, Z12, Z16, Z20, 0)      // packed bytes 0..15: channels 0..31
	CHUNK4(Z9, Z13, Z17, Z21, 128)    // 32..63
	CHUNK4(Z10, Z14, Z18, Z22, 256)   // 64..95
	CHUNK4(Z11, Z15, Z19, Z23, 384)   // 96..127
	ADDQ  $512, R9
	ADDQ  $64, AX
	LEAQ  64(AX), DX
	CMPQ  DX, BX
	JLE   chunk                       // another whole 64 bytes
	CMPQ  AX, BX
	JEQ   sums
half:                                     // the rows' last 32 bytes (d % 128 == 64)
	LEAQ  (CX)(AX*1), DX
	CMPQ  BX, $32
	JNE   halfins
	SUBT4W(Z8, Z9, Z12, Z13)          // tokens 4i, 4i+1
	SUBT4W(Z16, Z17, Z20, Z21)        // 4i+2, 4i+3
	JMP   halfmul
halfins:
	SUBT4H(Z8, Z9, Z12, Z13)
	SUBT4H(Z16, Z17, Z20, Z21)
halfmul:
	CHUNK4(Z8, Z12, Z16, Z20, 0)      // packed bytes 0..15 of the 32
	CHUNK4(Z9, Z13, Z17, Z21, 128)    // 16..31
sums:
	MOVQ  out+0(FP), AX
	MOVQ  ab+48(FP), DX
	MOVL  c+72(FP), R13
	TESTQ SI, SI
	JZ    unit
	ROWOUT4(Z0, Z4, 0, 16)
	ROWOUT4(Z1, Z5, 4, 20)
	ROWOUT4(Z2, Z6, 8, 24)
	ROWOUT4(Z3, Z7, 12, 28)
	ADDQ  $64, SI
	ADDQ  $64, R15
	JMP   next
unit:
	ROWOUT4U(Z0, Z4, 0, 16)
	ROWOUT4U(Z1, Z5, 4, 20)
	ROWOUT4U(Z2, Z6, 8, 24)
	ROWOUT4U(Z3, Z7, 12, 28)
next:
	ADDQ $64, out+0(FP)
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
done:
	VZEROUPPER
	RET

// STEP3(W, QOFF) is STEP4 for rows 0..2 only (scoresI4x3VNNI).
#define STEP3(W, QOFF) \
	VPANDD        Z30, W, Z28                 \
	VPANDND       W, Z30, Z31                 \
	VPDPBUSD.BCST QOFF(R9), Z28, Z0           \
	VPDPBUSD.BCST QOFF(R9)(R11*1), Z28, Z1    \
	VPDPBUSD.BCST QOFF(R9)(R11*2), Z28, Z2    \
	VPDPBUSD.BCST QOFF+64(R9), Z31, Z4        \
	VPDPBUSD.BCST QOFF+64(R9)(R11*1), Z31, Z5 \
	VPDPBUSD.BCST QOFF+64(R9)(R11*2), Z31, Z6

// CHUNK3(A, B, C, D, QOFF) is CHUNK4 with STEP3 (three rows).
#define CHUNK3(A, B, C, D, QOFF) \
	TR4(A, B, C, D)     \
	STEP3(A, QOFF)      \
	STEP3(B, QOFF+4)    \
	STEP3(C, QOFF+8)    \
	STEP3(D, QOFF+12)

// func scoresI4x3VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// scoresI4x4VNNI for three rows (rows 0..2 of out, q and ab; out's row 3
// not written): a group of three query rows (R % 4 == 3: GQA groups 3 and
// 7) without a zero fourth row's multiplies (STEP3: 6 of STEP4's 8
// VPDPBUSD; the loads and transposes shared, v87). Row r in Z(r) and
// Z(4+r); Z3 and Z7 unused.
TEXT ·scoresI4x3VNNI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), R11
	MOVQ         R11, BX
	SHRQ         $1, BX               // packed row stride: d/2 bytes
	LEAQ         (BX*4), R10          // four rows
	SHLQ         $2, R11              // query row stride: d·4 bytes
	LEAQ         (R11)(R11*2), R12
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	VBROADCASTSS c+72(FP), Z29
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ  pf+80(FP), R9
	MOVQ  pfTile+88(FP), R8
	TESTQ R8, R8
	JZ    pfdone
pfloop:
	PREFETCHT1 (R9)
	ADDQ       $64, R9
	DECQ       R8
	JNZ        pfloop
	MOVQ       R9, pf+80(FP)
pfdone:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	LEAQ   (R10)(R10*2), R13          // twelve rows
	MOVQ   q+16(FP), R9
	XORQ   AX, AX                     // byte offset in the packed rows
	CMPQ   BX, $64
	JLT    half                       // d 64: one half chunk
chunk:
	LEAQ  (CX)(AX*1), DX
	SUBT4(Z8, Z9, Z10, Z11)           // tokens 4i
	SUBT4(Z12, Z13, Z14, Z15)         // 4i+1
	SUBT4(Z16, Z17, Z18, Z19)         // 4i+2
	SUBT4(Z20, Z21, Z22, Z23)         // 4i+3
	CHUNK3(Z8, Z12, Z16, Z20, 0)      // packed bytes 0..15: channels 0..31
	CHUNK3(Z9, Z13, Z17, Z21, 128)    // 32..63
	CHUNK3(Z10, Z14, Z18, Z22, 256)   // 64..95
	CHUNK3(Z11, Z15, Z19, Z23, 384)   // 96..127
	ADDQ  $512, R9
	ADDQ  $64, AX
	LEAQ  64(AX), DX
	CMPQ  DX, BX
	JLE   chunk                       // another whole 64 bytes
	CMPQ  AX, BX
	JEQ   sums
half:                                     // the rows' last 32 bytes (d % 128 == 64)
	LEAQ  (CX)(AX*1), DX
	CMPQ  BX, $32
	JNE   halfins
	SUBT4W(Z8, Z9, Z12, Z13)          // tokens 4i, 4i+1
	SUBT4W(Z16, Z17, Z20, Z21)        // 4i+2, 4i+3
	JMP   halfmul
halfins:
	SUBT4H(Z8, Z9, Z12, Z13)
	SUBT4H(Z16, Z17, Z20, Z21)
halfmul:
	CHUNK3(Z8, Z12, Z16, Z20, 0)      // packed bytes 0..15 of the 32
	CHUNK3(Z9, Z13, Z17, Z21, 128)    // 16..31
sums:
	MOVQ  out+0(FP), AX
	MOVQ  ab+48(FP), DX
	MOVL  c+72(FP), R13
	TESTQ SI, SI
	JZ    unit
	ROWOUT4(Z0, Z4, 0, 16)
	ROWOUT4(Z1, Z5, 4, 20)
	ROWOUT4(Z2, Z6, 8, 24)
	ADDQ  $64, SI
	ADDQ  $64, R15
	JMP   next
unit:
	ROWOUT4U(Z0, Z4, 0, 16)
	ROWOUT4U(Z1, Z5, 4, 20)
	ROWOUT4U(Z2, Z6, 8, 24)
next:
	ADDQ $64, out+0(FP)
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
done:
	VZEROUPPER
	RET

// PVOUT4(A0, A1, A2, A3) writes 64 channels of one row of pvI4: the sums
// of the even channels (A0: words 8L..8L+3 of each lane L, A1: 8L+4..)
// and odd ones (A2, A3) interleaved by dwords (VPUNPCKL/HDQ: channels
// 16L+0..3, +4..7, +8..11, +12..15 of lane L), transposed by lanes into
// channel order, converted, times the step Z26, added to the floats at AX.
// Z16..Z23 scratch.
#define PVOUT4(A0, A1, A2, A3) \
	VPUNPCKLDQ  A2, A0, Z16          \
	VPUNPCKHDQ  A2, A0, Z17          \
	VPUNPCKLDQ  A3, A1, Z18          \
	VPUNPCKHDQ  A3, A1, Z19          \
	VSHUFI32X4  $0x44, Z17, Z16, Z20 \
	VSHUFI32X4  $0xee, Z17, Z16, Z21 \
	VSHUFI32X4  $0x44, Z19, Z18, Z22 \
	VSHUFI32X4  $0xee, Z19, Z18, Z23 \
	VSHUFI32X4  $0x88, Z22, Z20, Z16 \
	VSHUFI32X4  $0xdd, Z22, Z20, Z17 \
	VSHUFI32X4  $0x88, Z23, Z21, Z18 \
	VSHUFI32X4  $0xdd, Z23, Z21, Z19 \
	VCVTDQ2PS   Z16, Z16             \
	VCVTDQ2PS   Z17, Z17             \
	VCVTDQ2PS   Z18, Z18             \
	VCVTDQ2PS   Z19, Z19             \
	VFMADD213PS (AX), Z26, Z16       \
	VFMADD213PS 64(AX), Z26, Z17     \
	VFMADD213PS 128(AX), Z26, Z18    \
	VFMADD213PS 192(AX), Z26, Z19    \
	VMOVUPS     Z16, (AX)            \
	VMOVUPS     Z17, 64(AX)          \
	VMOVUPS     Z18, 128(AX)         \
	VMOVUPS     Z19, 192(AX)

// func pvI4VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvS16VNNI on packed int4 rows (d/2 bytes) read as stored, groups of at
// least 64 channels: per 64 channels and pair of tokens, the 32 packed
// bytes of each token zero-extended to words (VPMOVZXBW), the low nibbles
// (even channels) masked and the high ones (odd) shifted out, the two
// tokens interleaved by words (VPUNPCKL/HWD) into Z16..Z19; one weight
// pair per row (Z24..Z27), VPDPWSSD into Z0..Z15 (row r: Z4r..Z4r+3).
// One line of [pf, pf+64·pfLines) is prefetched per pair: the next
// block's values, spread over this block's work rather than one burst.
TEXT ·pvI4VNNI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	SHLQ         $1, R10
	LEAQ         (R10)(R10*2), R11
	MOVQ         d+64(FP), DX
	SHRQ         $1, DX              // packed row stride
	MOVL         $0x000f000f, AX
	VPBROADCASTD AX, Z30
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
	MOVQ  ldq+40(FP), R12
	SHLQ  $1, R12
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ R12, R8
	ADDQ  wq+24(FP), R8
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $1, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $1, CX
	JZ    out
pair:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	VPMOVZXBW    (SI), Z20
	VPMOVZXBW    (SI)(DX*1), Z21
	VPANDD       Z30, Z20, Z22
	VPANDD       Z30, Z21, Z23
	VPSRLW       $4, Z20, Z20
	VPSRLW       $4, Z21, Z21
	VPUNPCKLWD   Z23, Z22, Z16
	VPUNPCKHWD   Z23, Z22, Z17
	VPUNPCKLWD   Z21, Z20, Z18
	VPUNPCKHWD   Z21, Z20, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPBROADCASTD (R8)(R10*2), Z26
	VPBROADCASTD (R8)(R11*1), Z27
	VPDPWSSD     Z24, Z16, Z0
	VPDPWSSD     Z24, Z17, Z1
	VPDPWSSD     Z24, Z18, Z2
	VPDPWSSD     Z24, Z19, Z3
	VPDPWSSD     Z25, Z16, Z4
	VPDPWSSD     Z25, Z17, Z5
	VPDPWSSD     Z25, Z18, Z6
	VPDPWSSD     Z25, Z19, Z7
	VPDPWSSD     Z26, Z16, Z8
	VPDPWSSD     Z26, Z17, Z9
	VPDPWSSD     Z26, Z18, Z10
	VPDPWSSD     Z26, Z19, Z11
	VPDPWSSD     Z27, Z16, Z12
	VPDPWSSD     Z27, Z17, Z13
	VPDPWSSD     Z27, Z18, Z14
	VPDPWSSD     Z27, Z19, Z15
	ADDQ         $4, R8
	LEAQ         (SI)(DX*2), SI
	DECQ         CX
	JNZ          pair
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS (R13), Z26
	PVOUT4(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	PVOUT4(Z4, Z5, Z6, Z7)
	ADDQ         R12, AX
	VBROADCASTSS 8(R13), Z26
	PVOUT4(Z8, Z9, Z10, Z11)
	ADDQ         R12, AX
	VBROADCASTSS 12(R13), Z26
	PVOUT4(Z12, Z13, Z14, Z15)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// func cvtFP8AVX512(dst *float32, src *byte, n int, e4m3 bool)
// fp8 to float32 through fp16, exactly, 16 values per step (n a multiple
// of 16): e5m2 is the top byte of an fp16 (b<<8, infinities and NaNs
// included); e4m3's magnitude shifted into an fp16 ((b&0x7f)<<7, sign to
// bit 15) is the value times 2^-8 (exponent bias 15 against 7, subnormals
// included), so VCVTPH2PS and a multiply by 256; its NaN patterns (S.1111.111)
// become NaN by a mask.
TEXT ·cvtFP8AVX512(SB), NOSPLIT, $0-25
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVBLZX      e4m3+24(FP), DX
	SHRQ         $4, CX
	JZ           done
	MOVL         $0x007f007f, AX
	VPBROADCASTD AX, Y7              // magnitude mask, per word
	MOVL         $0x00800080, AX
	VPBROADCASTD AX, Y6              // sign bit, per word
	MOVL         $0x43800000, AX     // 256.0
	VPBROADCASTD AX, Z5
	MOVL         $0x7fc00000, AX     // NaN
	VPBROADCASTD AX, Z4
	TESTQ        DX, DX
	JNZ          e4
e5:
	VPMOVZXBW (SI), Y0
	VPSLLW    $8, Y0, Y0
	VCVTPH2PS Y0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $16, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       e5
	JMP       done
e4:
	VPMOVZXBW (SI), Y0
	VPAND     Y7, Y0, Y1         // magnitude
	VPCMPEQW  Y7, Y1, K1         // 0x7f: NaN
	VPAND     Y6, Y0, Y2
	VPSLLW    $8, Y2, Y2         // sign to bit 15
	VPSLLW    $7, Y1, Y1
	VPOR      Y2, Y1, Y1
	VCVTPH2PS Y1, Z0
	VMULPS    Z5, Z0, Z0
	VMOVAPS   Z4, K1, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $16, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       e4
done:
	VZEROUPPER
	RET

// func pvHalfx2AVX512(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)
// Two rows of pvHalfx4 (the GQA group of 2, gocoder-23m's): each fp16
// chunk is converted once for both rows, and the next block's values are
// prefetched as pvHalfx4 does. The bits of pvHalfx1 on each row: every
// accumulator adds the same products in the same order.
TEXT ·pvHalfx2AVX512(SB), NOSPLIT, $0-80
	MOVQ pf+64(FP), R11
	MOVQ pfLines+72(FP), R12
	MOVQ acc+0(FP), DI
	MOVQ ldacc+8(FP), R14
	SHLQ $2, R14
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	MOVQ ldv+40(FP), R15
	SHLQ $1, R15
	MOVQ cols+56(FP), R13
	SHLQ $2, R13            // bytes per row left
	XORQ BX, BX             // byte offset of the chunk
chunk64:
	LEAQ 256(BX), AX
	CMPQ AX, R13
	JGT  chunk16
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store64
tok64:
	TESTQ        R12, R12
	JLE          nopf
	PREFETCHT1   (R11)
	PREFETCHT1   64(R11)
	ADDQ         $128, R11
	SUBQ         $2, R12
nopf:
	VCVTPH2PS    (SI), Z16
	VCVTPH2PS    32(SI), Z17
	VCVTPH2PS    64(SI), Z18
	VCVTPH2PS    96(SI), Z19
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok64
store64:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VADDPS  64(AX), Z5, Z5
	VADDPS  128(AX), Z6, Z6
	VADDPS  192(AX), Z7, Z7
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	VMOVUPS Z6, 128(AX)
	VMOVUPS Z7, 192(AX)
	ADDQ    $256, BX
	JMP     chunk64
chunk16:
	CMPQ   BX, R13
	JGE    done
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	MOVQ   BX, AX
	SHRQ   $1, AX
	ADDQ   AX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store16
tok16:
	VCVTPH2PS    (SI), Z16
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R8)(R9*1), Z21
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z4
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok16
store16:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    R14, AX
	VADDPS  (AX), Z4, Z4
	VMOVUPS Z4, (AX)
	ADDQ    $64, BX
	JMP     chunk16
done:
	VZEROUPPER
	RET

// The AVX-512 VBMI kernels (cpufeat.VBMI): unpack2 by VPMULTISHIFTQB, int2
// keys scored from the packed rows (VPERMB for the query's order). msCtl<>
// is unpack2's control: byte i of a qword takes bits 2i.. of the qword
// (i < 8), the 2-bit codes of its two low bytes, each in the low bits of
// its byte (the high bits are the next codes, masked off with 3).
DATA msCtl<>+0(SB)/8, $0x0e0c0a0806040200
GLOBL msCtl<>(SB), RODATA|NOPTR, $8

// bq2Perm<> are bcastQ2's VPERMB indexes (four copies of one vector, the
// first used; foldQuery4's table has four):
// byte 16g+4m+b holds channel 16g+4b+m of 64, so the dword 4g+m holds
// the four channels that bytes of a packed dword (channels 16g..16g+15)
// give shifted right by 2m: scoresI2x4VBMI's broadcast query operand.
DATA bq2Perm<>+0(SB)/8, $0x0d0905010c080400
DATA bq2Perm<>+8(SB)/8, $0x0f0b07030e0a0602
DATA bq2Perm<>+16(SB)/8, $0x1d1915111c181410
DATA bq2Perm<>+24(SB)/8, $0x1f1b17131e1a1612
DATA bq2Perm<>+32(SB)/8, $0x2d2925212c282420
DATA bq2Perm<>+40(SB)/8, $0x2f2b27232e2a2622
DATA bq2Perm<>+48(SB)/8, $0x3d3935313c383430
DATA bq2Perm<>+56(SB)/8, $0x3f3b37333e3a3632
DATA bq2Perm<>+64(SB)/8, $0x0d0905010c080400
DATA bq2Perm<>+72(SB)/8, $0x0f0b07030e0a0602
DATA bq2Perm<>+80(SB)/8, $0x1d1915111c181410
DATA bq2Perm<>+88(SB)/8, $0x1f1b17131e1a1612
DATA bq2Perm<>+96(SB)/8, $0x2d2925212c282420
DATA bq2Perm<>+104(SB)/8, $0x2f2b27232e2a2622
DATA bq2Perm<>+112(SB)/8, $0x3d3935313c383430
DATA bq2Perm<>+120(SB)/8, $0x3f3b37333e3a3632
DATA bq2Perm<>+128(SB)/8, $0x0d0905010c080400
DATA bq2Perm<>+136(SB)/8, $0x0f0b07030e0a0602
DATA bq2Perm<>+144(SB)/8, $0x1d1915111c181410
DATA bq2Perm<>+152(SB)/8, $0x1f1b17131e1a1612
DATA bq2Perm<>+160(SB)/8, $0x2d2925212c282420
DATA bq2Perm<>+168(SB)/8, $0x2f2b27232e2a2622
DATA bq2Perm<>+176(SB)/8, $0x3d3935313c383430
DATA bq2Perm<>+184(SB)/8, $0x3f3b37333e3a3632
DATA bq2Perm<>+192(SB)/8, $0x0d0905010c080400
DATA bq2Perm<>+200(SB)/8, $0x0f0b07030e0a0602
DATA bq2Perm<>+208(SB)/8, $0x1d1915111c181410
DATA bq2Perm<>+216(SB)/8, $0x1f1b17131e1a1612
DATA bq2Perm<>+224(SB)/8, $0x2d2925212c282420
DATA bq2Perm<>+232(SB)/8, $0x2f2b27232e2a2622
DATA bq2Perm<>+240(SB)/8, $0x3d3935313c383430
DATA bq2Perm<>+248(SB)/8, $0x3f3b37333e3a3632
GLOBL bq2Perm<>(SB), RODATA|NOPTR, $256

// func unpack2VBMI(dst *uint8, src *byte, n int)
// unpack2 by VPMULTISHIFTQB: 16 source bytes zero-extended by words to
// qwords (8 codes each), byte i of a qword takes bits 2i.., masked with
// 3. n a multiple of 16; a prefetch 1 KB ahead per 64-byte line.
TEXT ·unpack2VBMI(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	SHRQ         $4, CX
	JZ           done
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z7
	VPBROADCASTQ msCtl<>+0(SB), Z6
	XORQ         DX, DX
loop:
	TESTQ          $3, DX
	JNZ            noprefetch
	PREFETCHT0     1024(SI)
noprefetch:
	VPMOVZXWQ      (SI), Z0
	VPMULTISHIFTQB Z0, Z6, Z0
	VPANDD         Z7, Z0, Z0
	VMOVDQU64      Z0, (DI)
	ADDQ           $16, SI
	ADDQ           $64, DI
	INCQ           DX
	DECQ           CX
	JNZ            loop
done:
	VZEROUPPER
	RET

// func bcastQ2(dst *int8, q *int8, d int)
// scoresI2x4VBMI's query operand: per 64 channels c0, 64 bytes (at a
// stride of 256; the other 192 are not written) whose dword 4g+m holds
// channels c0+16g+4b+m, b < 4 (VPERMB). d a multiple of 64.
TEXT ·bcastQ2(SB), NOSPLIT, $0-24
	MOVQ      dst+0(FP), DI
	MOVQ      q+8(FP), SI
	MOVQ      d+16(FP), CX
	SHRQ      $6, CX
	JZ        done
	VMOVDQU64 bq2Perm<>+0(SB), Z4
loop:
	VMOVDQU64 (SI), Z0
	VPERMB    Z0, Z4, Z1
	VMOVDQU64 Z1, (DI)
	ADDQ      $64, SI
	ADDQ      $256, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// GATHER2(V, SREG) loads the 16-byte chunks at DX of tokens 0, 4, 8, 12
// (stride R10 = 4 rows) into the four 128-bit lanes of V (SREG its X
// name), then moves DX to the next token.
#define GATHER2(V, SREG) \
	VMOVDQU64    (DX), SREG              \
	VINSERTI32X4 $1, (DX)(R10*1), V, V   \
	VINSERTI32X4 $2, (DX)(R10*2), V, V   \
	VINSERTI32X4 $3, (DX)(R13*1), V, V   \
	ADDQ         BX, DX

// TOKENS2 gathers a tile's 16 tokens' 16 bytes of packed int2 codes at DX
// (GATHER2) and transposes them: dword t of Z20, Z21, Z22, Z23 holds token
// t's channels 0..15, 16..31, 32..47, 48..63 of the chunk. Z16..Z19,
// Z24..Z27 scratch (scoresI2x4VBMI, scoresI2x3VBMI).
#define TOKENS2 \
	GATHER2(Z16, X16) \
	GATHER2(Z17, X17) \
	GATHER2(Z18, X18) \
	GATHER2(Z19, X19) \
	VPUNPCKLDQ  Z17, Z16, Z24 \
	VPUNPCKHDQ  Z17, Z16, Z25 \
	VPUNPCKLDQ  Z19, Z18, Z26 \
	VPUNPCKHDQ  Z19, Z18, Z27 \
	VPUNPCKLQDQ Z26, Z24, Z20 \
	VPUNPCKHQDQ Z26, Z24, Z21 \
	VPUNPCKLQDQ Z27, Z25, Z22 \
	VPUNPCKHQDQ Z27, Z25, Z23

// STEP2(W, QOFF) multiplies the vector W, whose dword t holds token t's
// packed channels 16g..16g+15 (QOFF = 16g), with the four rows' query:
// W & 3 (channels 16g+4b) and (W >> 4) & 3 (16g+4b+2) into Z0..Z3, W & 12
// and (W >> 4) & 12 (four times 16g+4b+1 and 16g+4b+3) into Z4..Z7, each
// with the row's broadcast query dword of those channels (bcastQ2: the
// dword 4g+m of the chunk). VPSRLW moves each word's high bits into its
// low byte's bits 4..7, which the masks (Z30: 3, Z31: 12) drop.
#define STEP2(W, QOFF) \
	VPSRLW        $4, W, Z8                   \
	VPANDD        Z30, W, Z9                  \
	VPANDD        Z31, W, Z10                 \
	VPANDD        Z30, Z8, Z11                \
	VPANDD        Z31, Z8, Z12                \
	VPDPBUSD.BCST QOFF(R9), Z9, Z0            \
	VPDPBUSD.BCST QOFF(R9)(R11*1), Z9, Z1     \
	VPDPBUSD.BCST QOFF(R9)(R11*2), Z9, Z2     \
	VPDPBUSD.BCST QOFF(R9)(R12*1), Z9, Z3     \
	VPDPBUSD.BCST QOFF+4(R9), Z10, Z4         \
	VPDPBUSD.BCST QOFF+4(R9)(R11*1), Z10, Z5  \
	VPDPBUSD.BCST QOFF+4(R9)(R11*2), Z10, Z6  \
	VPDPBUSD.BCST QOFF+4(R9)(R12*1), Z10, Z7  \
	VPDPBUSD.BCST QOFF+8(R9), Z11, Z0         \
	VPDPBUSD.BCST QOFF+8(R9)(R11*1), Z11, Z1  \
	VPDPBUSD.BCST QOFF+8(R9)(R11*2), Z11, Z2  \
	VPDPBUSD.BCST QOFF+8(R9)(R12*1), Z11, Z3  \
	VPDPBUSD.BCST QOFF+12(R9), Z12, Z4        \
	VPDPBUSD.BCST QOFF+12(R9)(R11*1), Z12, Z5 \
	VPDPBUSD.BCST QOFF+12(R9)(R11*2), Z12, Z6 \
	VPDPBUSD.BCST QOFF+12(R9)(R12*1), Z12, Z7

// ROWOUT2(A, B, AOFF, BOFF) is ROWOUT for scoresI2x4VBMI: the row's sums
// are A + B/4 (B holds four times its channels' products: the shift is
// exact), one token per dword in token order; then the same float
// operations as ROWOUT. Z17, Z24..Z26 scratch.
#define ROWOUT2(A, B, AOFF, BOFF) \
	VPSRAD       $2, B, B              \
	VPADDD       B, A, Z17             \
	ROWFLOAT(AOFF, BOFF)

// ROWOUT2U is ROWOUT2 where every A[t] and B[t] is 1 (KC keys: A nil):
// x·a + b, the bits of x·(a·1) + b·1 (v50).
#define ROWOUT2U(A, B, AOFF, BOFF) \
	VPSRAD       $2, B, B              \
	VPADDD       B, A, Z17             \
	VCVTDQ2PS    Z17, Z17              \
	VMULPS.BCST  AOFF(DX), Z17, Z17    \
	VADDPS.BCST  BOFF(DX), Z17, Z17    \
	ROWSTORE

// ROWSUM2(A, B) stores ROWOUT2's integer sums A + B/4 (one token per
// dword) as int32 at AX and moves AX to the next row (R14 ldo in bytes):
// the unit path without c, whose float operations run after the tiles.
#define ROWSUM2(A, B) \
	VPSRAD    $2, B, B   \
	VPADDD    B, A, Z17  \
	VMOVDQU32 Z17, (AX)  \
	ADDQ      R14, AX

// func scoresI2x4VBMI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// scoresU8x4VNNI on packed int2 rows (d/4 bytes, d a multiple of 64): no
// unpacking pass; q is bcastQ2's layout (d·4 bytes per row). Per 16-token
// tile and 64 channels the tokens' 16-byte chunks go, four tokens a
// vector (token 4j+s in lane j of vector s: GATHER2), through a 4x4 dword
// transpose within the lanes into four vectors whose dword t holds token
// t's channels 16g..16g+15 (g the vector), so each accumulator dword is
// one token's sum in token order (v49): row r in Z(r) and Z(4+r) (STEP2).
// A nil (and B): every A[t] and B[t] is 1 (ROWOUT2U; with c 0 the sums are
// stored as int32 and made floats after the tiles, v72). Each tile
// prefetches pfTile lines from pf on (the next block's keys).
TEXT ·scoresI2x4VBMI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), R11
	MOVQ         R11, BX
	SHRQ         $2, BX               // packed row stride: d/4 bytes
	LEAQ         (BX*4), R10          // four rows
	SHLQ         $2, R11              // query row stride: d·4 bytes
	LEAQ         (R11)(R11*2), R12
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	VBROADCASTSS c+72(FP), Z29
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x0c0c0c0c, AX
	VPBROADCASTD AX, Z31
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ  pf+80(FP), R9
	MOVQ  pfTile+88(FP), R8
	TESTQ R8, R8
	JZ    pfdone
pfloop:
	PREFETCHT1 (R9)
	ADDQ       $64, R9
	DECQ       R8
	JNZ        pfloop
	MOVQ       R9, pf+80(FP)
pfdone:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	LEAQ   (R10)(R10*2), R13          // twelve rows
	MOVQ   q+16(FP), R9
	XORQ   AX, AX                     // byte offset in the packed rows
chunk:
	LEAQ        (CX)(AX*1), DX
	TOKENS2
	STEP2(Z20, 0)
	STEP2(Z21, 16)
	STEP2(Z22, 32)
	STEP2(Z23, 48)
	ADDQ $256, R9
	ADDQ $16, AX
	CMPQ AX, BX
	JLT  chunk
	MOVQ out+0(FP), AX
	MOVQ ab+48(FP), DX
	MOVL c+72(FP), R13
	TESTQ SI, SI
	JZ    unit
	ROWOUT2(Z0, Z4, 0, 16)
	ROWOUT2(Z1, Z5, 4, 20)
	ROWOUT2(Z2, Z6, 8, 24)
	ROWOUT2(Z3, Z7, 12, 28)
	ADDQ $64, SI
	ADDQ $64, R15
	JMP  next
unit:
	TESTL R13, R13
	JZ    sums
	ROWOUT2U(Z0, Z4, 0, 16)
	ROWOUT2U(Z1, Z5, 4, 20)
	ROWOUT2U(Z2, Z6, 8, 24)
	ROWOUT2U(Z3, Z7, 12, 28)
	JMP   next
sums:
	ROWSUM2(Z0, Z4)
	ROWSUM2(Z1, Z5)
	ROWSUM2(Z2, Z6)
	ROWSUM2(Z3, Z7)
next:
	ADDQ $64, out+0(FP)
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
	TESTQ SI, SI
	JNZ   done
	TESTL R13, R13
	JNZ   done
	// The unit factors without c (v72): each row's sums, stored as int32
	// by ROWSUM2, made x·a + b in place (ROWOUT2U's operations on the same
	// values, so the same bits), after the tiles' multiplies instead of
	// between them.
	MOVQ         n+56(FP), CX
	SHLQ         $2, CX
	MOVQ         out+0(FP), AX
	SUBQ         CX, AX              // the rows' first scores (out moved 4n)
	MOVQ         ab+48(FP), DX
	XORQ         BX, BX              // row
frow:
	VBROADCASTSS (DX)(BX*4), Z24     // a
	VBROADCASTSS 16(DX)(BX*4), Z25   // b
	MOVQ         AX, R9
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
fvec:
	VCVTDQ2PS    (R9), Z17
	VMULPS       Z24, Z17, Z17
	VADDPS       Z25, Z17, Z17
	VMOVUPS      Z17, (R9)
	ADDQ         $64, R9
	DECQ         DI
	JNZ          fvec
	ADDQ         R14, AX
	INCQ         BX
	CMPQ         BX, $4
	JLT          frow
done:
	VZEROUPPER
	RET

// STEP23(W, QOFF) is STEP2 for rows 0..2 only (scoresI2x3VBMI).
#define STEP23(W, QOFF) \
	VPSRLW        $4, W, Z8                   \
	VPANDD        Z30, W, Z9                  \
	VPANDD        Z31, W, Z10                 \
	VPANDD        Z30, Z8, Z11                \
	VPANDD        Z31, Z8, Z12                \
	VPDPBUSD.BCST QOFF(R9), Z9, Z0            \
	VPDPBUSD.BCST QOFF(R9)(R11*1), Z9, Z1     \
	VPDPBUSD.BCST QOFF(R9)(R11*2), Z9, Z2     \
	VPDPBUSD.BCST QOFF+4(R9), Z10, Z4         \
	VPDPBUSD.BCST QOFF+4(R9)(R11*1), Z10, Z5  \
	VPDPBUSD.BCST QOFF+4(R9)(R11*2), Z10, Z6  \
	VPDPBUSD.BCST QOFF+8(R9), Z11, Z0         \
	VPDPBUSD.BCST QOFF+8(R9)(R11*1), Z11, Z1  \
	VPDPBUSD.BCST QOFF+8(R9)(R11*2), Z11, Z2  \
	VPDPBUSD.BCST QOFF+12(R9), Z12, Z4        \
	VPDPBUSD.BCST QOFF+12(R9)(R11*1), Z12, Z5 \
	VPDPBUSD.BCST QOFF+12(R9)(R11*2), Z12, Z6

// func scoresI2x3VBMI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// scoresI2x4VBMI for three rows (rows 0..2 of out, q and ab; out's row 3
// not written): a group of three query rows (R % 4 == 3: GQA groups 3 and
// 7) without a zero fourth row's multiplies (STEP23: 12 of STEP2's 16
// VPDPBUSD; the gathers and transposes shared, v87). Row r in Z(r) and
// Z(4+r); Z3 and Z7 unused.
TEXT ·scoresI2x3VBMI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), R11
	MOVQ         R11, BX
	SHRQ         $2, BX               // packed row stride: d/4 bytes
	LEAQ         (BX*4), R10          // four rows
	SHLQ         $2, R11              // query row stride: d·4 bytes
	LEAQ         (R11)(R11*2), R12
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	VBROADCASTSS c+72(FP), Z29
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x0c0c0c0c, AX
	VPBROADCASTD AX, Z31
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ  pf+80(FP), R9
	MOVQ  pfTile+88(FP), R8
	TESTQ R8, R8
	JZ    pfdone
pfloop:
	PREFETCHT1 (R9)
	ADDQ       $64, R9
	DECQ       R8
	JNZ        pfloop
	MOVQ       R9, pf+80(FP)
pfdone:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	LEAQ   (R10)(R10*2), R13          // twelve rows
	MOVQ   q+16(FP), R9
	XORQ   AX, AX                     // byte offset in the packed rows
chunk:
	LEAQ        (CX)(AX*1), DX
	TOKENS2
	STEP23(Z20, 0)
	STEP23(Z21, 16)
	STEP23(Z22, 32)
	STEP23(Z23, 48)
	ADDQ $256, R9
	ADDQ $16, AX
	CMPQ AX, BX
	JLT  chunk
	MOVQ out+0(FP), AX
	MOVQ ab+48(FP), DX
	MOVL c+72(FP), R13
	TESTQ SI, SI
	JZ    unit
	ROWOUT2(Z0, Z4, 0, 16)
	ROWOUT2(Z1, Z5, 4, 20)
	ROWOUT2(Z2, Z6, 8, 24)
	ADDQ $64, SI
	ADDQ $64, R15
	JMP  next
unit:
	TESTL R13, R13
	JZ    sums
	ROWOUT2U(Z0, Z4, 0, 16)
	ROWOUT2U(Z1, Z5, 4, 20)
	ROWOUT2U(Z2, Z6, 8, 24)
	JMP   next
sums:
	ROWSUM2(Z0, Z4)
	ROWSUM2(Z1, Z5)
	ROWSUM2(Z2, Z6)
next:
	ADDQ $64, out+0(FP)
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
	TESTQ SI, SI
	JNZ   done
	TESTL R13, R13
	JNZ   done
	// The unit factors without c (v72): each row's sums, stored as int32
	// by ROWSUM2, made x·a + b in place (ROWOUT2U's operations on the same
	// values, so the same bits), after the tiles' multiplies instead of
	// between them.
	MOVQ         n+56(FP), CX
	SHLQ         $2, CX
	MOVQ         out+0(FP), AX
	SUBQ         CX, AX              // the rows' first scores (out moved 4n)
	MOVQ         ab+48(FP), DX
	XORQ         BX, BX              // row
frow:
	VBROADCASTSS (DX)(BX*4), Z24     // a
	VBROADCASTSS 16(DX)(BX*4), Z25   // b
	MOVQ         AX, R9
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
fvec:
	VCVTDQ2PS    (R9), Z17
	VMULPS       Z24, Z17, Z17
	VADDPS       Z25, Z17, Z17
	VMOVUPS      Z17, (R9)
	ADDQ         $64, R9
	DECQ         DI
	JNZ          fvec
	ADDQ         R14, AX
	INCQ         BX
	CMPQ         BX, $3
	JLT          frow
done:
	VZEROUPPER
	RET

// FOLD1 is foldQueryAVX512's pass-1 step for one row: the query chunk at
// QM times the scales (Z8) to SM, its products with the zeros (Z9) into
// BACC, max |qs| into MACC (mask Z7).
#define FOLD1(QM, SM, BACC, MACC) \
	VMOVUPS     QM, Z2           \
	VMULPS      Z8, Z2, Z3       \
	VMOVUPS     Z3, SM           \
	VFMADD231PS Z9, Z2, BACC     \
	VANDPS      Z7, Z3, Z4       \
	VMAXPS      Z4, MACC, MACC

// HSUMR is HSUM16 on any register (Z, Y, X its names) with scratch TY/TX.
#define HSUMR(OP, Z, Y, X, TY, TX) \
	VEXTRACTF64X4 $1, Z, TY \
	OP            TY, Y, Y  \
	VEXTRACTF32X4 $1, Y, TX \
	OP            TX, X, X  \
	VPERMILPS     $0x0e, X, TX \
	OP            TX, X, X  \
	VPERMILPS     $0x01, X, TX \
	OP            TX, X, X

// RED4(OP, A, B, C, D) folds the 16 lanes of each of A..D (four rows)
// with OP in HSUMR's pairs and operand order: the rows' halves, quarters,
// then lanes within each 128-bit quarter, two rows' vectors per operation
// for the first step and four for the rest. Row r's result ends in lane
// 4r of A (foldIdx gathers them); B..D, Z29..Z31 scratch.
#define RED4(OP, A, B, C, D) \
	VSHUFF32X4 $0x44, B, A, Z29 \
	VSHUFF32X4 $0xee, B, A, Z30 \
	OP         Z30, Z29, A      \
	VSHUFF32X4 $0x44, D, C, Z29 \
	VSHUFF32X4 $0xee, D, C, Z30 \
	OP         Z30, Z29, C      \
	VSHUFF32X4 $0x88, C, A, Z29 \
	VSHUFF32X4 $0xdd, C, A, Z30 \
	OP         Z30, Z29, A      \
	VPERMILPS  $0x0e, A, Z31    \
	OP         Z31, A, A        \
	VPERMILPS  $0x01, A, Z31    \
	OP         Z31, A, A

// foldIdx gathers RED4's four results (lanes 0, 4, 8, 12) into lanes 0..3.
DATA foldIdx<>+0(SB)/4, $0
DATA foldIdx<>+4(SB)/4, $4
DATA foldIdx<>+8(SB)/4, $8
DATA foldIdx<>+12(SB)/4, $12
DATA foldIdx<>+16(SB)/8, $0
DATA foldIdx<>+24(SB)/8, $0
DATA foldIdx<>+32(SB)/8, $0
DATA foldIdx<>+40(SB)/8, $0
DATA foldIdx<>+48(SB)/8, $0
DATA foldIdx<>+56(SB)/8, $0
GLOBL foldIdx<>(SB), RODATA|NOPTR, $64

// func foldQuery4AVX512(qi *int8, qs, q, s, z *float32, d int, a, bias *float32, dst *int8, perm *byte, nperm int)
// foldQueryAVX512 for four rows at stride d (q, qs, qi) sharing s and z:
// the same steps per row (so the same bits), the rows' dependency chains
// (the bias FMAs, the max, the lane folds, the divisions) interleaved.
// a[r], bias[r] are row r's step and bias; qi is not nil. With perm not
// nil (d a multiple of 64) the codes are made 64 a step by packs (v57)
// and perm holds 5 x 64 VPERMB indices (qPermPk): the first put the
// packs' bytes in channel order (qi), the other four also write each 64
// codes of row r to dst at 4·d·r + 4·c (a score kernel's query layout:
// bcastQ2, bcastQ4 or bcastQ16 of the bytes 0..63, composed with the
// packs' order); nperm 1 writes only the first of the four (bcastQ2's
// layout, v51); nperm 2 writes 16 bytes at each 64 from the lanes of the
// first index vector's result (the bytes of bcastQ4's layout that
// scoresI4x4VNNI reads, v64). With pairs not 0, s points to d fp16 (scale,
// zero) pairs as a block stores them (z unused): pass 1 converts each 16
// channels' pairs itself (cvtPairs' operations, in registers: the same
// floats, so the same bits) instead of loading cvtPairs' two float arrays
// (round 20).
TEXT ·foldQuery4AVX512(SB), NOSPLIT, $0-96
	MOVQ         qi+0(FP), DI
	MOVQ         qs+8(FP), R8
	MOVQ         q+16(FP), SI
	MOVQ         s+24(FP), R9
	MOVQ         z+32(FP), R10
	MOVQ         d+40(FP), CX
	MOVQ         CX, R11
	SHLQ         $2, R11               // row stride in bytes
	LEAQ         (R11)(R11*2), R12
	SHRQ         $4, CX
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z7
	VPXORD       Z16, Z16, Z16         // bias lanes, rows 0..3: Z16..Z19
	VPXORD       Z17, Z17, Z17
	VPXORD       Z18, Z18, Z18
	VPXORD       Z19, Z19, Z19
	VPXORD       Z20, Z20, Z20         // max |qs|, rows 0..3: Z20..Z23
	VPXORD       Z21, Z21, Z21
	VPXORD       Z22, Z22, Z22
	VPXORD       Z23, Z23, Z23
	XORQ         AX, AX
	MOVQ         CX, BX
	CMPQ         pairs+88(FP), $0
	JNE          pass1h
pass1:
	VMOVUPS (R9)(AX*1), Z8
	VMOVUPS (R10)(AX*1), Z9
	LEAQ    (SI)(AX*1), DX
	LEAQ    (R8)(AX*1), R13
	FOLD1((DX), (R13), Z16, Z20)
	FOLD1((DX)(R11*1), (R13)(R11*1), Z17, Z21)
	FOLD1((DX)(R11*2), (R13)(R11*2), Z18, Z22)
	FOLD1((DX)(R12*1), (R13)(R12*1), Z19, Z23)
	ADDQ    $64, AX
	DECQ    BX
	JNZ     pass1
	JMP     folded
pass1h: // 16 channels' pairs are 64 bytes, as 16 floats are: the same AX
	VMOVDQU32    pairIdx<>(SB), Z10    // the scales' positions (even floats)
	MOVL         $1, DX
	VPBROADCASTD DX, Z11
	VPADDD       Z11, Z10, Z11         // the zeros' (odd floats)
pass1hl:
	VCVTPH2PS (R9)(AX*1), Z9           // pairs 0..7 of the 16
	VCVTPH2PS 32(R9)(AX*1), Z12        // pairs 8..15
	VMOVAPS   Z9, Z8
	VPERMT2PS Z12, Z10, Z8             // s
	VPERMT2PS Z12, Z11, Z9             // z
	LEAQ      (SI)(AX*1), DX
	LEAQ      (R8)(AX*1), R13
	FOLD1((DX), (R13), Z16, Z20)
	FOLD1((DX)(R11*1), (R13)(R11*1), Z17, Z21)
	FOLD1((DX)(R11*2), (R13)(R11*2), Z18, Z22)
	FOLD1((DX)(R12*1), (R13)(R12*1), Z19, Z23)
	ADDQ      $64, AX
	DECQ      BX
	JNZ       pass1hl
folded:
	// The eight lane folds four rows at a time (v57): HSUMR's pairs and
	// operand order (the low half first), the four rows' vectors
	// shuffled side by side: 13 operations per four rows instead of 32;
	// the steps' two divisions once for the four rows.
	RED4(VADDPS, Z16, Z17, Z18, Z19)
	RED4(VMAXPS, Z20, Z21, Z22, Z23)
	VMOVDQU32    foldIdx<>+0(SB), Z8
	VPERMPS      Z16, Z8, Z16          // lanes 0..3: the rows' biases
	VPERMPS      Z20, Z8, Z8           // the rows' maxima
	MOVQ         bias+56(FP), DX
	VMOVUPS      X16, (DX)
	MOVL         $0x42fe0000, AX // 127.0
	VPBROADCASTD AX, X2
	VDIVPS       X2, X8, X3      // a = max/127 (the zero rows' replaced below)
	VDIVPS       X8, X2, X9      // 127/max
	MOVQ         a+48(FP), DX
	VMOVUPS      X3, (DX)
	MOVQ    d+40(FP), R12              // qi row stride
	MOVQ    $4, R10                    // rows left
	MOVQ    dst+64(FP), R15
	MOVQ    perm+72(FP), R14
	TESTQ   R14, R14
	JZ      row
	VMOVDQU64 (R14), Z28               // the packs' order to the channels' (qi)
	VMOVDQU64 64(R14), Z24             // the layout's four index vectors, composed with it
	VMOVDQU64 128(R14), Z25
	VMOVDQU64 192(R14), Z26
	VMOVDQU64 256(R14), Z27
row:
	VXORPS   X1, X1, X1
	VUCOMISS X1, X8
	JHI      quant
	MOVL     $0, (DX)
	XORQ     AX, AX
	MOVQ     CX, BX
zero:
	VMOVDQU X1, (DI)(AX*1)
	ADDQ    $16, AX
	DECQ    BX
	JNZ     zero
	TESTQ   R14, R14
	JZ      next
	VPXORD  Z1, Z1, Z1
	XORQ    AX, AX
	MOVQ    CX, BX                     // d/16 x 64 bytes = 4·d
	CMPQ    nperm+80(FP), $2
	JEQ     zerob2
	CMPQ    nperm+80(FP), $1
	JNE     zerob
	SHRQ    $2, BX                     // the first 64 bytes of each 256
zerob1:
	VMOVDQU64 Z1, (R15)(AX*1)
	ADDQ      $256, AX
	DECQ      BX
	JNZ       zerob1
	JMP       next
zerob:
	VMOVDQU64 Z1, (R15)(AX*1)
	ADDQ      $64, AX
	DECQ      BX
	JNZ       zerob
	JMP       next
zerob2:
	VMOVDQU X1, (R15)(AX*1)            // the first 16 bytes of each 64
	ADDQ    $64, AX
	DECQ    BX
	JNZ     zerob2
	JMP     next
quant:
	VBROADCASTSS X9, Z6          // 127/max
	XORQ         AX, AX
	XORQ         R9, R9
	MOVQ         CX, BX
	TESTQ        R14, R14
	JNZ          quantb
pass2:
	VMULPS    (R8)(AX*1), Z6, Z2
	VCVTPS2DQ Z2, Z2
	VPMOVSDB  Z2, X3
	VMOVDQU   X3, (DI)(R9*1)
	ADDQ      $64, AX
	ADDQ      $16, R9
	DECQ      BX
	JNZ       pass2
	JMP       next
quantb:
	// 64 channels a step: two VPACKSSDW and a VPACKSSWB (the saturation
	// of VPMOVSDB: int32 to int16 to int8) put channel 16k+4l+i at byte
	// 16l+4k+i; qi's VPERMB (Z28) and the layout's (composed) undo it (v57).
	SHRQ      $2, BX
	XORQ      R13, R13
pass2b:
	VMULPS       (R8)(AX*1), Z6, Z2
	VMULPS       64(R8)(AX*1), Z6, Z3
	VMULPS       128(R8)(AX*1), Z6, Z4
	VMULPS       192(R8)(AX*1), Z6, Z5
	VCVTPS2DQ    Z2, Z2
	VCVTPS2DQ    Z3, Z3
	VCVTPS2DQ    Z4, Z4
	VCVTPS2DQ    Z5, Z5
	VPACKSSDW    Z3, Z2, Z2
	VPACKSSDW    Z5, Z4, Z4
	VPACKSSWB    Z4, Z2, Z10
	VPERMB       Z10, Z28, Z1
	VMOVDQU64    Z1, (DI)(R9*1)
	VPERMB       Z10, Z24, Z1
	CMPQ         nperm+80(FP), $2
	JEQ          lanes
	VMOVDQU64    Z1, (R15)(R13*1)
	CMPQ         nperm+80(FP), $1
	JEQ          perm1
	VPERMB       Z10, Z25, Z1
	VMOVDQU64    Z1, 64(R15)(R13*1)
	VPERMB       Z10, Z26, Z1
	VMOVDQU64    Z1, 128(R15)(R13*1)
	VPERMB       Z10, Z27, Z1
	VMOVDQU64    Z1, 192(R15)(R13*1)
	JMP          perm1
lanes:
	VMOVDQU       X1, (R15)(R13*1)
	VEXTRACTI32X4 $1, Z1, 64(R15)(R13*1)
	VEXTRACTI32X4 $2, Z1, 128(R15)(R13*1)
	VEXTRACTI32X4 $3, Z1, 192(R15)(R13*1)
perm1:
	ADDQ         $256, AX
	ADDQ         $64, R9
	ADDQ         $256, R13
	DECQ         BX
	JNZ          pass2b
next:
	VPERMILPS $0x39, X8, X8      // the next row's max and 127/max in lane 0
	VPERMILPS $0x39, X9, X9
	ADDQ R11, R8
	ADDQ R12, DI
	LEAQ (R15)(R11*1), R15       // dst row stride 4·d bytes
	ADDQ $4, DX
	DECQ R10
	JNZ  row
	VZEROUPPER
	RET

// func pvI4x2VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)
// pvI4VNNI for two rows (a GQA group of 2): the same unpacking per pair of
// tokens and 64 channels, VPDPWSSD into Z0..Z7 (row r: Z4r..Z4r+3), the
// same sums per row; half the multiplies of four rows.
TEXT ·pvI4x2VNNI(SB), NOSPLIT, $0-96
	MOVQ         pf+80(FP), R14
	MOVQ         pfLines+88(FP), R15
	MOVQ         ldw+32(FP), R10
	SHLQ         $1, R10
	MOVQ         d+64(FP), DX
	SHRQ         $1, DX              // packed row stride
	MOVL         $0x000f000f, AX
	VPBROADCASTD AX, Z30
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
	MOVQ  ldq+40(FP), R12
	SHLQ  $1, R12
	MOVQ  BX, R8
	SHRQ  CX, R8
	IMULQ R12, R8
	ADDQ  wq+24(FP), R8
	MOVQ  packed+48(FP), SI
	MOVQ  BX, AX
	SHRQ  $1, AX
	ADDQ  AX, SI
	MOVQ  n+56(FP), CX
	SHRQ  $1, CX
	JZ    out
pair:
	TESTQ        R15, R15
	JZ           nopf
	PREFETCHT1   (R14)
	ADDQ         $64, R14
	DECQ         R15
nopf:
	VPMOVZXBW    (SI), Z20
	VPMOVZXBW    (SI)(DX*1), Z21
	VPANDD       Z30, Z20, Z22
	VPANDD       Z30, Z21, Z23
	VPSRLW       $4, Z20, Z20
	VPSRLW       $4, Z21, Z21
	VPUNPCKLWD   Z23, Z22, Z16
	VPUNPCKHWD   Z23, Z22, Z17
	VPUNPCKLWD   Z21, Z20, Z18
	VPUNPCKHWD   Z21, Z20, Z19
	VPBROADCASTD (R8), Z24
	VPBROADCASTD (R8)(R10*1), Z25
	VPDPWSSD     Z24, Z16, Z0
	VPDPWSSD     Z24, Z17, Z1
	VPDPWSSD     Z24, Z18, Z2
	VPDPWSSD     Z24, Z19, Z3
	VPDPWSSD     Z25, Z16, Z4
	VPDPWSSD     Z25, Z17, Z5
	VPDPWSSD     Z25, Z18, Z6
	VPDPWSSD     Z25, Z19, Z7
	ADDQ         $4, R8
	LEAQ         (SI)(DX*2), SI
	DECQ         CX
	JNZ          pair
out:
	MOVQ         delta+16(FP), R13
	MOVQ         ldacc+8(FP), R12
	SHLQ         $2, R12
	MOVQ         acc+0(FP), AX
	LEAQ         (AX)(BX*4), AX
	VBROADCASTSS (R13), Z26
	PVOUT4(Z0, Z1, Z2, Z3)
	ADDQ         R12, AX
	VBROADCASTSS 4(R13), Z26
	PVOUT4(Z4, Z5, Z6, Z7)
	ADDQ         $64, BX
	CMPQ         BX, d+64(FP)
	JLT          half
	VZEROUPPER
	RET

// SPLIT4X2(X, S0, S1, QOFF) splits the packed int4 lanes of X into low
// (Z24) and high (Z25) nibbles (mask Z30) and adds their products with the
// two rows' query vectors at QOFF and QOFF+64 (bcastQ4 order).
#define SPLIT4X2(X, S0, S1, QOFF) \
	VPANDD     Z30, X, Z24                 \
	VPSRLW     $4, X, Z25                  \
	VPANDD     Z30, Z25, Z25               \
	VPDPBUSD   QOFF(R9), Z24, S0           \
	VPDPBUSD   QOFF+64(R9), Z25, S0        \
	VPDPBUSD   QOFF(R9)(R11*1), Z24, S1    \
	VPDPBUSD   QOFF+64(R9)(R11*1), Z25, S1

// SUBTILE4X2(S0, S1) loads a 64-byte chunk of four packed int4 token rows
// at R8 (row stride BX, 3 rows R10), transposes them by 128-bit lanes
// (Z20+j: the j-th 16 packed bytes, 32 channels, of the four tokens) and
// adds their nibbles' products with two rows' query into S0 and S1.
#define SUBTILE4X2(S0, S1) \
	VMOVDQU64  (R8), Z16                 \
	VMOVDQU64  (R8)(BX*1), Z17           \
	VMOVDQU64  (R8)(BX*2), Z18           \
	VMOVDQU64  (R8)(R10*1), Z19          \
	VSHUFI32X4 $0x44, Z17, Z16, Z24      \
	VSHUFI32X4 $0xee, Z17, Z16, Z25      \
	VSHUFI32X4 $0x44, Z19, Z18, Z26      \
	VSHUFI32X4 $0xee, Z19, Z18, Z27      \
	VSHUFI32X4 $0x88, Z26, Z24, Z20      \
	VSHUFI32X4 $0xdd, Z26, Z24, Z21      \
	VSHUFI32X4 $0x88, Z27, Z25, Z22      \
	VSHUFI32X4 $0xdd, Z27, Z25, Z23      \
	SPLIT4X2(Z20, S0, S1, 0)             \
	SPLIT4X2(Z21, S0, S1, 128)           \
	SPLIT4X2(Z22, S0, S1, 256)           \
	SPLIT4X2(Z23, S0, S1, 384)

// HALF4X2(S0, S1) adds the products of the rows' last 32 packed bytes
// (d % 128 == 64) of four tokens with two rows' query into S0 and S1, as
// SUBTILE4X2 does for 64: Z16 holds tokens 0 and 1 (lanes 0, 1 and 2, 3),
// Z17 tokens 2 and 3 (loaded by HALFW or HALFH), gathered by lanes into Z20
// (each token's first 16 bytes, token i in lane i) and Z21 (the next 16).
#define HALF4X2(S0, S1) \
	VSHUFI32X4 $0x88, Z17, Z16, Z20 \
	VSHUFI32X4 $0xdd, Z17, Z16, Z21 \
	SPLIT4X2(Z20, S0, S1, 0)        \
	SPLIT4X2(Z21, S0, S1, 128)

// HALFW(S0, S1) is HALF4X2 for rows of 32 bytes (d 64): one 64-byte load
// holds two tokens.
#define HALFW(S0, S1) \
	VMOVDQU64 (R8), Z16        \
	VMOVDQU64 (R8)(BX*2), Z17  \
	HALF4X2(S0, S1)

// HALFH(S0, S1) is HALF4X2 for longer rows: a 32-byte load and an insert a
// token.
#define HALFH(S0, S1) \
	VMOVDQU64      (R8), Y16                 \
	VINSERTI64X4 $1, (R8)(BX*1), Z16, Z16  \
	VMOVDQU64      (R8)(BX*2), Y17           \
	VINSERTI64X4 $1, (R8)(R10*1), Z17, Z17 \
	HALF4X2(S0, S1)

// func scoresI4x2VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)
// scoresI4x4VNNI for two rows (a GQA group of 2): rows 0 and 1 of out,
// q and ab (a in ab[0:2], b in ab[4:6]), the same sums per row.
TEXT ·scoresI4x2VNNI(SB), NOSPLIT, $0-96
	MOVQ         d+64(FP), BX
	SHRQ         $1, BX               // packed row stride in bytes
	LEAQ         (BX)(BX*2), R10
	MOVQ         d+64(FP), R11
	SHLQ         $2, R11              // query row stride: d·4 bytes
	MOVQ         ldo+8(FP), R14
	SHLQ         $2, R14
	MOVL         c+72(FP), R13
	VBROADCASTSS c+72(FP), Z29
	VMOVDQU32    lanePerm<>(SB), Z28
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVQ         A+32(FP), SI
	MOVQ         B+40(FP), R15
	MOVQ         ab+48(FP), DX
	MOVQ         k+24(FP), CX
	MOVQ         n+56(FP), DI
	SHRQ         $4, DI
	JZ           done
tile:
	MOVQ  pfTile+88(FP), R8
	TESTQ R8, R8
	JZ    pfdone
	MOVQ  pf+80(FP), R9
pfloop:
	PREFETCHT1 (R9)
	ADDQ       $64, R9
	DECQ       R8
	JNZ        pfloop
	MOVQ       R9, pf+80(FP)
pfdone:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	MOVQ   q+16(FP), R9
	XORQ   AX, AX
	CMPQ   BX, $64
	JLT    half                // d 64: one half chunk
chunk:
	LEAQ (CX)(AX*1), R8
	SUBTILE4X2(Z0, Z1)
	LEAQ (R8)(BX*4), R8
	SUBTILE4X2(Z4, Z5)
	LEAQ (R8)(BX*4), R8
	SUBTILE4X2(Z8, Z9)
	LEAQ (R8)(BX*4), R8
	SUBTILE4X2(Z12, Z13)
	ADDQ $512, R9
	ADDQ $64, AX
	LEAQ 64(AX), R8
	CMPQ R8, BX
	JLE  chunk                 // another whole 64 bytes
	CMPQ AX, BX
	JEQ  sums
half:                              // the rows' last 32 bytes (d % 128 == 64)
	LEAQ (CX)(AX*1), R8
	CMPQ BX, $32
	JNE  halfins
	HALFW(Z0, Z1)
	LEAQ (R8)(BX*4), R8
	HALFW(Z4, Z5)
	LEAQ (R8)(BX*4), R8
	HALFW(Z8, Z9)
	LEAQ (R8)(BX*4), R8
	HALFW(Z12, Z13)
	JMP  sums
halfins:
	HALFH(Z0, Z1)
	LEAQ (R8)(BX*4), R8
	HALFH(Z4, Z5)
	LEAQ (R8)(BX*4), R8
	HALFH(Z8, Z9)
	LEAQ (R8)(BX*4), R8
	HALFH(Z12, Z13)
sums:
	MOVQ out+0(FP), AX
	ROWOUT(Z0, Z4, Z8, Z12, 0, 16)
	ROWOUT(Z1, Z5, Z9, Z13, 4, 20)
	ADDQ $64, out+0(FP)
	ADDQ $64, SI
	ADDQ $64, R15
	LEAQ (CX)(BX*8), CX
	LEAQ (CX)(BX*8), CX
	DECQ DI
	JNZ  tile
done:
	VZEROUPPER
	RET

// func scaleF32AVX512(x *float32, n int, a float32)
// x[i] *= a for i < n (n >= 16): whole vectors, then the last n%16 values
// under a mask.
TEXT ·scaleF32AVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS a+16(FP), Z1
	MOVQ         CX, DX
	ANDQ         $15, DX
	SHRQ         $4, CX
loop:
	VMULPS       (DI), Z1, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $64, DI
	DECQ         CX
	JNZ          loop
	TESTQ        DX, DX
	JZ           done
	MOVQ         DX, CX
	MOVL         $1, AX
	SHLL         CX, AX
	DECL         AX                 // the tail's mask
	KMOVW        AX, K1
	VMOVUPS.Z    (DI), K1, Z0
	VMULPS       Z0, Z1, Z0
	VMOVUPS      Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func max4AVX512(out *float32, x *float32, ld, n int)
// maxF32AVX512 of four rows at stride ld (n a multiple of 16) in one call,
// the rows' chains side by side: the same lane order per row, so the same
// bits as four maxF32AVX512 calls.
TEXT ·max4AVX512(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         ld+16(FP), R11
	MOVQ         n+24(FP), CX
	SHLQ         $2, R11
	LEAQ         (R11)(R11*2), R12
	MOVL         $0xff800000, AX // -Inf
	VPBROADCASTD AX, Z0
	VMOVAPS      Z0, Z1
	VMOVAPS      Z0, Z2
	VMOVAPS      Z0, Z3
	SHRQ         $4, CX
	JZ           fold
loop:
	VMAXPS (SI), Z0, Z0
	VMAXPS (SI)(R11*1), Z1, Z1
	VMAXPS (SI)(R11*2), Z2, Z2
	VMAXPS (SI)(R12*1), Z3, Z3
	ADDQ   $64, SI
	DECQ   CX
	JNZ    loop
fold:
	HSUMR(VMAXPS, Z0, Y0, X0, Y4, X4)
	HSUMR(VMAXPS, Z1, Y1, X1, Y5, X5)
	HSUMR(VMAXPS, Z2, Y2, X2, Y6, X6)
	HSUMR(VMAXPS, Z3, Y3, X3, Y7, X7)
	VMOVSS X0, (DX)
	VMOVSS X1, 4(DX)
	VMOVSS X2, 8(DX)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// Constants of softcapAVX512 beyond expm<>: tanh32's series coefficients
// (c11 first), the switch tanhSeriesMax, −2, and the sign and magnitude
// masks.
DATA tanhc<>+0(SB)/4, $-0.008863235529902197 // -1382/155925
DATA tanhc<>+4(SB)/4, $0.021869488536155203  // 62/2835
DATA tanhc<>+8(SB)/4, $-0.05396825396825397  // -17/315
DATA tanhc<>+12(SB)/4, $0.13333333333333333  // 2/15
DATA tanhc<>+16(SB)/4, $-0.3333333333333333  // -1/3
DATA tanhc<>+20(SB)/4, $0.25
DATA tanhc<>+24(SB)/4, $-2.0
DATA tanhc<>+28(SB)/4, $0x80000000
DATA tanhc<>+32(SB)/4, $0x7fffffff
GLOBL tanhc<>(SB), RODATA|NOPTR, $36

// func softcapAVX512(x *float32, n int, c, inv float32)
// x[i] = c·tanh(x[i]·inv), n a multiple of 16: tanh32 on 16 lanes, both
// of its ranges computed and each lane's picked by |x·inv| < 0.25 (the
// series, by FMAs), else (1 − e)/(1 + e) with e = e^(−2|x·inv|) by
// expSubAVX512's steps (0 below expMin), the sign put back; NaN passes
// through. The FMAs round the series' steps once where tanh32 rounds
// twice: within tanhRelErr all the same (TestSoftcapKernels).
TEXT ·softcapAVX512(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS c+16(FP), Z10
	VBROADCASTSS inv+20(FP), Z11
	VBROADCASTSS expm<>+0(SB), Z21  // expMin
	VBROADCASTSS expm<>+4(SB), Z22  // log2 e
	VBROADCASTSS expm<>+8(SB), Z23  // C1
	VBROADCASTSS expm<>+12(SB), Z24 // C2
	VBROADCASTSS expm<>+16(SB), Z25 // 1.5·2^23
	VBROADCASTSS expm<>+20(SB), Z26 // c5
	VBROADCASTSS expm<>+24(SB), Z27
	VBROADCASTSS expm<>+28(SB), Z28
	VBROADCASTSS expm<>+32(SB), Z29
	VBROADCASTSS expm<>+36(SB), Z30 // c1
	VBROADCASTSS expm<>+40(SB), Z31 // 1
	VBROADCASTSS tanhc<>+0(SB), Z12 // c11
	VBROADCASTSS tanhc<>+4(SB), Z13 // c9
	VBROADCASTSS tanhc<>+8(SB), Z14 // c7
	VBROADCASTSS tanhc<>+12(SB), Z15 // c5
	VBROADCASTSS tanhc<>+16(SB), Z16 // c3
	VBROADCASTSS tanhc<>+20(SB), Z17 // tanhSeriesMax
	VBROADCASTSS tanhc<>+24(SB), Z18 // -2
	VBROADCASTSS tanhc<>+28(SB), Z19 // sign mask
	VBROADCASTSS tanhc<>+32(SB), Z20 // magnitude mask
	SHRQ         $4, CX
	JZ           done
loop:
	VMOVUPS      (DI), Z1
	VMULPS       Z11, Z1, Z1        // x = s·inv
	VANDPS       Z20, Z1, Z5        // |x|
	VCMPPS       $0x11, Z17, Z5, K2 // |x| < tanhSeriesMax (LT_OQ)
	VCMPPS       $0x03, Z1, Z1, K3  // x is NaN (UNORD_Q)
	// The series: x + x·(p·z), p = c3 + z·(c5 + z·(c7 + z·(c9 + z·c11))).
	VMULPS       Z1, Z1, Z6         // z = x²
	VMOVAPS      Z12, Z7
	VFMADD213PS  Z13, Z6, Z7        // p = p·z + c9
	VFMADD213PS  Z14, Z6, Z7
	VFMADD213PS  Z15, Z6, Z7
	VFMADD213PS  Z16, Z6, Z7        // p·z + c3
	VMULPS       Z6, Z7, Z7         // p·z
	VFMADD213PS  Z1, Z1, Z7         // x·(p·z) + x
	// e = exp(u), u = −2|x|, as expSubAVX512.
	VMULPS       Z18, Z5, Z8        // u
	VCMPPS       $0x1d, Z21, Z8, K1 // u >= expMin
	VMOVAPS      Z25, Z2
	VFMADD231PS  Z22, Z8, Z2        // t = u·log2 e + 1.5·2^23
	VSUBPS       Z25, Z2, Z3        // n
	VFNMADD231PS Z23, Z3, Z8        // r = u - n·C1
	VFNMADD231PS Z24, Z3, Z8        // r -= n·C2
	VMOVAPS      Z26, Z4
	VFMADD213PS  Z27, Z8, Z4
	VFMADD213PS  Z28, Z8, Z4
	VFMADD213PS  Z29, Z8, Z4
	VFMADD213PS  Z30, Z8, Z4
	VFMADD213PS  Z31, Z8, Z4        // p·r + 1
	VPSLLD       $23, Z2, Z2
	VPADDD       Z2, Z4, Z4         // e
	VMOVAPS.Z    Z4, K1, Z4
	VSUBPS       Z4, Z31, Z9        // 1 - e
	VADDPS       Z4, Z31, Z4        // 1 + e
	VDIVPS       Z4, Z9, Z9         // tanh|x|
	VANDPS       Z19, Z1, Z6        // x's sign
	VORPS        Z6, Z9, Z9
	VMOVAPS      Z7, K2, Z9         // the series below the switch
	VMOVAPS      Z1, K3, Z9         // NaN
	VMULPS       Z10, Z9, Z9        // c·tanh
	VMOVUPS      Z9, (DI)
	ADDQ         $64, DI
	DECQ         CX
	JNZ          loop
done:
	VZEROUPPER
	RET

//go:build !purego

#include "textflag.h"

// AVX2 + FMA + F16C versions of the kernels of kernels.go, which documents
// what each computes; kernels_amd64.go checks the lengths. 256-bit vectors
// of 8 floats, 16 registers. No int8 dot products at this level: integer
// keys use the float32 path (codes converted, scores by FMA).

// The exp's constants (kernels.go), each repeated over a vector: expMin at 0, log2e at 32, c1 at 64, c2 at 96, p0 at 128, p1 at 160, p2 at 192, p3 at 224, p4 at 256, p5 at 288, one at 320.
DATA exp8<>+0(SB)/4, $-87.33654
DATA exp8<>+4(SB)/4, $-87.33654
DATA exp8<>+8(SB)/4, $-87.33654
DATA exp8<>+12(SB)/4, $-87.33654
DATA exp8<>+16(SB)/4, $-87.33654
DATA exp8<>+20(SB)/4, $-87.33654
DATA exp8<>+24(SB)/4, $-87.33654
DATA exp8<>+28(SB)/4, $-87.33654
DATA exp8<>+32(SB)/4, $1.44269504088896341
DATA exp8<>+36(SB)/4, $1.44269504088896341
DATA exp8<>+40(SB)/4, $1.44269504088896341
DATA exp8<>+44(SB)/4, $1.44269504088896341
DATA exp8<>+48(SB)/4, $1.44269504088896341
DATA exp8<>+52(SB)/4, $1.44269504088896341
DATA exp8<>+56(SB)/4, $1.44269504088896341
DATA exp8<>+60(SB)/4, $1.44269504088896341
DATA exp8<>+64(SB)/4, $0.693359375
DATA exp8<>+68(SB)/4, $0.693359375
DATA exp8<>+72(SB)/4, $0.693359375
DATA exp8<>+76(SB)/4, $0.693359375
DATA exp8<>+80(SB)/4, $0.693359375
DATA exp8<>+84(SB)/4, $0.693359375
DATA exp8<>+88(SB)/4, $0.693359375
DATA exp8<>+92(SB)/4, $0.693359375
DATA exp8<>+96(SB)/4, $-2.12194440e-4
DATA exp8<>+100(SB)/4, $-2.12194440e-4
DATA exp8<>+104(SB)/4, $-2.12194440e-4
DATA exp8<>+108(SB)/4, $-2.12194440e-4
DATA exp8<>+112(SB)/4, $-2.12194440e-4
DATA exp8<>+116(SB)/4, $-2.12194440e-4
DATA exp8<>+120(SB)/4, $-2.12194440e-4
DATA exp8<>+124(SB)/4, $-2.12194440e-4
DATA exp8<>+128(SB)/4, $1.9875691500e-4
DATA exp8<>+132(SB)/4, $1.9875691500e-4
DATA exp8<>+136(SB)/4, $1.9875691500e-4
DATA exp8<>+140(SB)/4, $1.9875691500e-4
DATA exp8<>+144(SB)/4, $1.9875691500e-4
DATA exp8<>+148(SB)/4, $1.9875691500e-4
DATA exp8<>+152(SB)/4, $1.9875691500e-4
DATA exp8<>+156(SB)/4, $1.9875691500e-4
DATA exp8<>+160(SB)/4, $1.3981999507e-3
DATA exp8<>+164(SB)/4, $1.3981999507e-3
DATA exp8<>+168(SB)/4, $1.3981999507e-3
DATA exp8<>+172(SB)/4, $1.3981999507e-3
DATA exp8<>+176(SB)/4, $1.3981999507e-3
DATA exp8<>+180(SB)/4, $1.3981999507e-3
DATA exp8<>+184(SB)/4, $1.3981999507e-3
DATA exp8<>+188(SB)/4, $1.3981999507e-3
DATA exp8<>+192(SB)/4, $8.3334519073e-3
DATA exp8<>+196(SB)/4, $8.3334519073e-3
DATA exp8<>+200(SB)/4, $8.3334519073e-3
DATA exp8<>+204(SB)/4, $8.3334519073e-3
DATA exp8<>+208(SB)/4, $8.3334519073e-3
DATA exp8<>+212(SB)/4, $8.3334519073e-3
DATA exp8<>+216(SB)/4, $8.3334519073e-3
DATA exp8<>+220(SB)/4, $8.3334519073e-3
DATA exp8<>+224(SB)/4, $4.1665795894e-2
DATA exp8<>+228(SB)/4, $4.1665795894e-2
DATA exp8<>+232(SB)/4, $4.1665795894e-2
DATA exp8<>+236(SB)/4, $4.1665795894e-2
DATA exp8<>+240(SB)/4, $4.1665795894e-2
DATA exp8<>+244(SB)/4, $4.1665795894e-2
DATA exp8<>+248(SB)/4, $4.1665795894e-2
DATA exp8<>+252(SB)/4, $4.1665795894e-2
DATA exp8<>+256(SB)/4, $1.6666665459e-1
DATA exp8<>+260(SB)/4, $1.6666665459e-1
DATA exp8<>+264(SB)/4, $1.6666665459e-1
DATA exp8<>+268(SB)/4, $1.6666665459e-1
DATA exp8<>+272(SB)/4, $1.6666665459e-1
DATA exp8<>+276(SB)/4, $1.6666665459e-1
DATA exp8<>+280(SB)/4, $1.6666665459e-1
DATA exp8<>+284(SB)/4, $1.6666665459e-1
DATA exp8<>+288(SB)/4, $5.0000001201e-1
DATA exp8<>+292(SB)/4, $5.0000001201e-1
DATA exp8<>+296(SB)/4, $5.0000001201e-1
DATA exp8<>+300(SB)/4, $5.0000001201e-1
DATA exp8<>+304(SB)/4, $5.0000001201e-1
DATA exp8<>+308(SB)/4, $5.0000001201e-1
DATA exp8<>+312(SB)/4, $5.0000001201e-1
DATA exp8<>+316(SB)/4, $5.0000001201e-1
DATA exp8<>+320(SB)/4, $1.0
DATA exp8<>+324(SB)/4, $1.0
DATA exp8<>+328(SB)/4, $1.0
DATA exp8<>+332(SB)/4, $1.0
DATA exp8<>+336(SB)/4, $1.0
DATA exp8<>+340(SB)/4, $1.0
DATA exp8<>+344(SB)/4, $1.0
DATA exp8<>+348(SB)/4, $1.0
GLOBL exp8<>(SB), RODATA|NOPTR, $352

// func cvtHalfAVX2(dst *float32, src *uint16, n int)
TEXT ·cvtHalfAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func toHalfF16C(dst *uint16, src *float32, n int)
// float32 to fp16 by F16C's VCVTPS2PH, rounding to nearest even (imm 0):
// half.FromFloat32's bits for every input, NaN included (quiet bit set,
// the payload's top 9 bits kept). n a multiple of 16. Used at the AVX2 and
// AVX-512 levels (F16C comes with both).
TEXT ·toHalfF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func cvtBF16AVX2(dst *float32, src *uint16, n int)
TEXT ·cvtBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
loop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func unpack4AVX2(dst *uint8, src *byte, n int)
// As unpack4AVX512: word b | b<<4 masked with 0x0f0f, 16 bytes at a time.
TEXT ·unpack4AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	SHRQ         $4, CX
	JZ           done
	MOVL         $0x0f0f0f0f, AX
	MOVQ         AX, X7
	VPBROADCASTD X7, Y7
loop:
	VPMOVZXBW (SI), Y0
	VPSLLW    $4, Y0, Y1
	VPOR      Y1, Y0, Y0
	VPAND     Y7, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func unpack2AVX2(dst *uint8, src *byte, n int)
// As unpack2AVX512, 8 bytes at a time.
TEXT ·unpack2AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	SHRQ         $3, CX
	JZ           done
	MOVL         $0x03030303, AX
	MOVQ         AX, X7
	VPBROADCASTD X7, Y7
loop:
	VPMOVZXBD (SI), Y0
	VPSLLD    $6, Y0, Y1
	VPSLLD    $12, Y0, Y2
	VPSLLD    $18, Y0, Y3
	VPOR      Y1, Y0, Y0
	VPOR      Y3, Y2, Y2
	VPOR      Y2, Y0, Y0
	VPAND     Y7, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func codesF32AVX2(dst *float32, src *uint8, n int)
TEXT ·codesF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VPMOVZXBD (SI), Y0
	VCVTDQ2PS Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func scoresF32AVX2(out, q, k, A, B *float32, n, d int, a, b float32)
// Eight tokens at a time (Y0..Y7), the query chunk of 8 in Y8; the sums
// by three rounds of VHADDPS and one of 128-bit halves.
TEXT ·scoresF32AVX2(SB), NOSPLIT, $0-64
	MOVQ         out+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), DX
	MOVQ         A+24(FP), R11
	MOVQ         B+32(FP), R12
	MOVQ         n+40(FP), CX
	MOVQ         d+48(FP), BX
	VBROADCASTSS a+56(FP), Y10
	VBROADCASTSS b+60(FP), Y11
	SHLQ         $2, BX
	LEAQ         (BX)(BX*2), R10
	SHRQ         $3, CX
	JZ           done
tile:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   DX, R8
	LEAQ   (DX)(BX*4), R9
	XORQ   AX, AX
chunk:
	VMOVUPS     (SI)(AX*1), Y8
	VFMADD231PS (R8), Y8, Y0
	VFMADD231PS (R8)(BX*1), Y8, Y1
	VFMADD231PS (R8)(BX*2), Y8, Y2
	VFMADD231PS (R8)(R10*1), Y8, Y3
	VFMADD231PS (R9), Y8, Y4
	VFMADD231PS (R9)(BX*1), Y8, Y5
	VFMADD231PS (R9)(BX*2), Y8, Y6
	VFMADD231PS (R9)(R10*1), Y8, Y7
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, AX
	CMPQ        AX, BX
	JLT         chunk
	VHADDPS    Y1, Y0, Y0
	VHADDPS    Y3, Y2, Y2
	VHADDPS    Y2, Y0, Y0
	VHADDPS    Y5, Y4, Y4
	VHADDPS    Y7, Y6, Y6
	VHADDPS    Y6, Y4, Y4
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x31, Y4, Y0, Y9
	VADDPS     Y9, Y8, Y0
	VMULPS     (R11), Y10, Y8
	VMULPS     Y8, Y0, Y0
	VMULPS     (R12), Y11, Y9
	VADDPS     Y9, Y0, Y0
	VMOVUPS    Y0, (DI)
	ADDQ       $32, DI
	ADDQ       $32, R11
	ADDQ       $32, R12
	LEAQ       (DX)(BX*8), DX
	DECQ       CX
	JNZ        tile
done:
	VZEROUPPER
	RET

// func pvF32x4AVX2(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, cols int)
// Four rows, channels in chunks of 16: accumulators Y0..Y7, the V chunk
// in Y8, Y9, the weights in Y10..Y13.
TEXT ·pvF32x4AVX2(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	MOVQ ldacc+8(FP), R14
	SHLQ $2, R14
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ ldv+40(FP), R15
	SHLQ $2, R15
	MOVQ cols+56(FP), R13
	SHLQ $2, R13
	XORQ BX, BX
chunk:
	CMPQ   BX, R13
	JGE    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   w+16(FP), R8
	MOVQ   v+32(FP), SI
	ADDQ   BX, SI
	MOVQ   n+48(FP), CX
	TESTQ  CX, CX
	JZ     store
tok:
	VMOVUPS      (SI), Y8
	VMOVUPS      32(SI), Y9
	VBROADCASTSS (R8), Y10
	VBROADCASTSS (R8)(R9*1), Y11
	VBROADCASTSS (R8)(R9*2), Y12
	VBROADCASTSS (R8)(R10*1), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok
store:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Y0, Y0
	VADDPS  32(AX), Y1, Y1
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Y2, Y2
	VADDPS  32(AX), Y3, Y3
	VMOVUPS Y2, (AX)
	VMOVUPS Y3, 32(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Y4, Y4
	VADDPS  32(AX), Y5, Y5
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	ADDQ    R14, AX
	VADDPS  (AX), Y6, Y6
	VADDPS  32(AX), Y7, Y7
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	ADDQ    $64, BX
	JMP     chunk
done:
	VZEROUPPER
	RET

// func pvF32x1AVX2(acc *float32, w *float32, v *float32, ldv, n, cols int)
// One row, channels in chunks of 16 (Y0, Y1).
TEXT ·pvF32x1AVX2(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ ldv+24(FP), R15
	SHLQ $2, R15
	MOVQ cols+40(FP), R13
	SHLQ $2, R13
	XORQ BX, BX
chunk:
	CMPQ   BX, R13
	JGE    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   w+8(FP), R8
	MOVQ   v+16(FP), SI
	ADDQ   BX, SI
	MOVQ   n+32(FP), CX
	TESTQ  CX, CX
	JZ     store
tok:
	VBROADCASTSS (R8), Y10
	VFMADD231PS  (SI), Y10, Y0
	VFMADD231PS  32(SI), Y10, Y1
	ADDQ         $4, R8
	ADDQ         R15, SI
	DECQ         CX
	JNZ          tok
store:
	LEAQ    (DI)(BX*1), AX
	VADDPS  (AX), Y0, Y0
	VADDPS  32(AX), Y1, Y1
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ    $64, BX
	JMP     chunk
done:
	VZEROUPPER
	RET

// FOLD16 folds the 16 lane values of Y0 (lanes 0..7) and Y1 (8..15) into
// X0's first float in the order of sum16. OP is VADDPS or VMAXPS.
#define FOLD16(OP) \
	OP           Y1, Y0, Y0    \
	VEXTRACTF128 $1, Y0, X1    \
	OP           X1, X0, X0    \
	VPERMILPS    $0x0e, X0, X1 \
	OP           X1, X0, X0    \
	VPERMILPS    $0x01, X0, X1 \
	OP           X1, X0, X0

// EXP8 computes exp(Y2) into Y2 as exp32 does (Y3..Y6 scratch; Y14
// expMin, Y15 log2 e): 0 where Y2 < expMin; 2^n built in the exponent bits.
#define EXP8 \
	VCMPPS       $0x1d, Y14, Y2, Y6      \
	VMULPS       Y15, Y2, Y3             \
	VROUNDPS     $0, Y3, Y3              \
	VFNMADD231PS exp8<>+64(SB), Y3, Y2   \
	VFNMADD231PS exp8<>+96(SB), Y3, Y2   \
	VMOVUPS      exp8<>+128(SB), Y4      \
	VFMADD213PS  exp8<>+160(SB), Y2, Y4  \
	VFMADD213PS  exp8<>+192(SB), Y2, Y4  \
	VFMADD213PS  exp8<>+224(SB), Y2, Y4  \
	VFMADD213PS  exp8<>+256(SB), Y2, Y4  \
	VFMADD213PS  exp8<>+288(SB), Y2, Y4  \
	VMULPS       Y2, Y2, Y5              \
	VFMADD213PS  Y2, Y5, Y4              \
	VADDPS       exp8<>+320(SB), Y4, Y4  \
	VCVTPS2DQ    Y3, Y3                  \
	VPADDD       Y13, Y3, Y3             \
	VPSLLD       $23, Y3, Y3             \
	VMULPS       Y3, Y4, Y2              \
	VANDPS       Y6, Y2, Y2

// func expSubAVX2(x *float32, n int, m float32) float32
// Sixteen values per step so that the lane sums (Y0: i%16 < 8, Y1: the
// rest) are those of sum16.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y12
	VMOVUPS      exp8<>+0(SB), Y14
	VMOVUPS      exp8<>+32(SB), Y15
	MOVL         $127, AX
	MOVQ         AX, X13
	VPBROADCASTD X13, Y13
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	SHRQ         $4, CX
	JZ           sum
loop:
	VMOVUPS (DI), Y2
	VSUBPS  Y12, Y2, Y2
	EXP8
	VMOVUPS Y2, (DI)
	VADDPS  Y2, Y0, Y0
	VMOVUPS 32(DI), Y2
	VSUBPS  Y12, Y2, Y2
	EXP8
	VMOVUPS Y2, 32(DI)
	VADDPS  Y2, Y1, Y1
	ADDQ    $64, DI
	DECQ    CX
	JNZ     loop
sum:
	FOLD16(VADDPS)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func maxF32AVX2(x *float32, n int) float32
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	MOVL         $0xff800000, AX
	MOVQ         AX, X0
	VPBROADCASTD X0, Y0
	VMOVAPS      Y0, Y1
	SHRQ         $4, CX
	JZ           fold
loop:
	VMAXPS (DI), Y0, Y0
	VMAXPS 32(DI), Y1, Y1
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop
fold:
	FOLD16(VMAXPS)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), DI
	MOVQ   b+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SHRQ   $4, CX
	JZ     fold
loop:
	VMOVUPS     (DI), Y2
	VMOVUPS     32(DI), Y3
	VFMADD231PS (SI), Y2, Y0
	VFMADD231PS 32(SI), Y3, Y1
	ADDQ        $64, DI
	ADDQ        $64, SI
	DECQ        CX
	JNZ         loop
fold:
	FOLD16(VADDPS)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dequantVAVX2(dst, z *float32, ldz int, codes *uint8, p *float32, n, d, grp int)
// As dequantVAVX512, 8 codes at a time.
TEXT ·dequantVAVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), R11
	MOVQ ldz+16(FP), R10
	SHLQ $2, R10
	MOVQ codes+24(FP), SI
	MOVQ p+32(FP), R8
	MOVQ n+40(FP), CX
	MOVQ d+48(FP), R13
	SHRQ $3, R13
	MOVQ grp+56(FP), R14
	SHRQ $3, R14
	TESTQ CX, CX
	JZ    done
token:
	MOVQ R11, R12
	MOVQ R13, BX
group:
	VBROADCASTSS (R8), Y1
	MOVL         4(R8), AX
	MOVL         AX, (R12)
	ADDQ         R10, R12
	ADDQ         $8, R8
	MOVQ         R14, DX
unit:
	VPMOVZXBD (SI), Y0
	VCVTDQ2PS Y0, Y0
	VMULPS    Y1, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
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

// func cvtFP8AVX2(dst *float32, src *byte, n int, e4m3 bool)
// As cvtFP8AVX512, 8 values per step; the NaN mask widened from words to
// dwords (VPMOVSXWD) for VBLENDVPS.
TEXT ·cvtFP8AVX2(SB), NOSPLIT, $0-25
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVBLZX      e4m3+24(FP), DX
	SHRQ         $3, CX
	JZ           done
	MOVL         $0x007f007f, AX
	MOVQ         AX, X7
	VPBROADCASTD X7, X7
	MOVL         $0x00800080, AX
	MOVQ         AX, X6
	VPBROADCASTD X6, X6
	MOVL         $0x43800000, AX
	MOVQ         AX, X5
	VPBROADCASTD X5, Y5
	MOVL         $0x7fc00000, AX
	MOVQ         AX, X4
	VPBROADCASTD X4, Y4
	TESTQ        DX, DX
	JNZ          e4
e5:
	VPMOVZXBW (SI), X0
	VPSLLW    $8, X0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       e5
	JMP       done
e4:
	VPMOVZXBW (SI), X0
	VPAND     X7, X0, X1
	VPCMPEQW  X7, X1, X3
	VPMOVSXWD X3, Y3
	VPAND     X6, X0, X2
	VPSLLW    $8, X2, X2
	VPSLLW    $7, X1, X1
	VPOR      X2, X1, X1
	VCVTPH2PS X1, Y0
	VMULPS    Y5, Y0, Y0
	VBLENDVPS Y3, Y4, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $8, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       e4
done:
	VZEROUPPER
	RET

// softcapAVX2's constants, each repeated over a vector (the memory
// operands of its FMAs): tanh32's series coefficients (c11 first), the
// switch tanhSeriesMax, the sign mask, then softcapAVX512's exp (expm<>
// in kernels_avx512_amd64.s: expMin, log2 e, C1, C2 and the minimax
// polynomial's c5 to c1). Offsets: c11 at 0, c9 at 32, c7 at 64, c5 at 96, c3 at 128, smax at 160, sign at 192, emin at 224, log2e at 256, C1 at 288, C2 at 320, e5 at 352, e4 at 384, e3 at 416, e2 at 448, e1 at 480.
DATA tanh8<>+0(SB)/4, $-0.008863235529902197
DATA tanh8<>+4(SB)/4, $-0.008863235529902197
DATA tanh8<>+8(SB)/4, $-0.008863235529902197
DATA tanh8<>+12(SB)/4, $-0.008863235529902197
DATA tanh8<>+16(SB)/4, $-0.008863235529902197
DATA tanh8<>+20(SB)/4, $-0.008863235529902197
DATA tanh8<>+24(SB)/4, $-0.008863235529902197
DATA tanh8<>+28(SB)/4, $-0.008863235529902197
DATA tanh8<>+32(SB)/4, $0.021869488536155203
DATA tanh8<>+36(SB)/4, $0.021869488536155203
DATA tanh8<>+40(SB)/4, $0.021869488536155203
DATA tanh8<>+44(SB)/4, $0.021869488536155203
DATA tanh8<>+48(SB)/4, $0.021869488536155203
DATA tanh8<>+52(SB)/4, $0.021869488536155203
DATA tanh8<>+56(SB)/4, $0.021869488536155203
DATA tanh8<>+60(SB)/4, $0.021869488536155203
DATA tanh8<>+64(SB)/4, $-0.05396825396825397
DATA tanh8<>+68(SB)/4, $-0.05396825396825397
DATA tanh8<>+72(SB)/4, $-0.05396825396825397
DATA tanh8<>+76(SB)/4, $-0.05396825396825397
DATA tanh8<>+80(SB)/4, $-0.05396825396825397
DATA tanh8<>+84(SB)/4, $-0.05396825396825397
DATA tanh8<>+88(SB)/4, $-0.05396825396825397
DATA tanh8<>+92(SB)/4, $-0.05396825396825397
DATA tanh8<>+96(SB)/4, $0.13333333333333333
DATA tanh8<>+100(SB)/4, $0.13333333333333333
DATA tanh8<>+104(SB)/4, $0.13333333333333333
DATA tanh8<>+108(SB)/4, $0.13333333333333333
DATA tanh8<>+112(SB)/4, $0.13333333333333333
DATA tanh8<>+116(SB)/4, $0.13333333333333333
DATA tanh8<>+120(SB)/4, $0.13333333333333333
DATA tanh8<>+124(SB)/4, $0.13333333333333333
DATA tanh8<>+128(SB)/4, $-0.3333333333333333
DATA tanh8<>+132(SB)/4, $-0.3333333333333333
DATA tanh8<>+136(SB)/4, $-0.3333333333333333
DATA tanh8<>+140(SB)/4, $-0.3333333333333333
DATA tanh8<>+144(SB)/4, $-0.3333333333333333
DATA tanh8<>+148(SB)/4, $-0.3333333333333333
DATA tanh8<>+152(SB)/4, $-0.3333333333333333
DATA tanh8<>+156(SB)/4, $-0.3333333333333333
DATA tanh8<>+160(SB)/4, $0.25
DATA tanh8<>+164(SB)/4, $0.25
DATA tanh8<>+168(SB)/4, $0.25
DATA tanh8<>+172(SB)/4, $0.25
DATA tanh8<>+176(SB)/4, $0.25
DATA tanh8<>+180(SB)/4, $0.25
DATA tanh8<>+184(SB)/4, $0.25
DATA tanh8<>+188(SB)/4, $0.25
DATA tanh8<>+192(SB)/4, $0x80000000
DATA tanh8<>+196(SB)/4, $0x80000000
DATA tanh8<>+200(SB)/4, $0x80000000
DATA tanh8<>+204(SB)/4, $0x80000000
DATA tanh8<>+208(SB)/4, $0x80000000
DATA tanh8<>+212(SB)/4, $0x80000000
DATA tanh8<>+216(SB)/4, $0x80000000
DATA tanh8<>+220(SB)/4, $0x80000000
DATA tanh8<>+224(SB)/4, $-87.33654
DATA tanh8<>+228(SB)/4, $-87.33654
DATA tanh8<>+232(SB)/4, $-87.33654
DATA tanh8<>+236(SB)/4, $-87.33654
DATA tanh8<>+240(SB)/4, $-87.33654
DATA tanh8<>+244(SB)/4, $-87.33654
DATA tanh8<>+248(SB)/4, $-87.33654
DATA tanh8<>+252(SB)/4, $-87.33654
DATA tanh8<>+256(SB)/4, $1.44269504088896341
DATA tanh8<>+260(SB)/4, $1.44269504088896341
DATA tanh8<>+264(SB)/4, $1.44269504088896341
DATA tanh8<>+268(SB)/4, $1.44269504088896341
DATA tanh8<>+272(SB)/4, $1.44269504088896341
DATA tanh8<>+276(SB)/4, $1.44269504088896341
DATA tanh8<>+280(SB)/4, $1.44269504088896341
DATA tanh8<>+284(SB)/4, $1.44269504088896341
DATA tanh8<>+288(SB)/4, $0.693359375
DATA tanh8<>+292(SB)/4, $0.693359375
DATA tanh8<>+296(SB)/4, $0.693359375
DATA tanh8<>+300(SB)/4, $0.693359375
DATA tanh8<>+304(SB)/4, $0.693359375
DATA tanh8<>+308(SB)/4, $0.693359375
DATA tanh8<>+312(SB)/4, $0.693359375
DATA tanh8<>+316(SB)/4, $0.693359375
DATA tanh8<>+320(SB)/4, $-2.12194440e-4
DATA tanh8<>+324(SB)/4, $-2.12194440e-4
DATA tanh8<>+328(SB)/4, $-2.12194440e-4
DATA tanh8<>+332(SB)/4, $-2.12194440e-4
DATA tanh8<>+336(SB)/4, $-2.12194440e-4
DATA tanh8<>+340(SB)/4, $-2.12194440e-4
DATA tanh8<>+344(SB)/4, $-2.12194440e-4
DATA tanh8<>+348(SB)/4, $-2.12194440e-4
DATA tanh8<>+352(SB)/4, $0.008290290146997401
DATA tanh8<>+356(SB)/4, $0.008290290146997401
DATA tanh8<>+360(SB)/4, $0.008290290146997401
DATA tanh8<>+364(SB)/4, $0.008290290146997401
DATA tanh8<>+368(SB)/4, $0.008290290146997401
DATA tanh8<>+372(SB)/4, $0.008290290146997401
DATA tanh8<>+376(SB)/4, $0.008290290146997401
DATA tanh8<>+380(SB)/4, $0.008290290146997401
DATA tanh8<>+384(SB)/4, $0.041898062196643784
DATA tanh8<>+388(SB)/4, $0.041898062196643784
DATA tanh8<>+392(SB)/4, $0.041898062196643784
DATA tanh8<>+396(SB)/4, $0.041898062196643784
DATA tanh8<>+400(SB)/4, $0.041898062196643784
DATA tanh8<>+404(SB)/4, $0.041898062196643784
DATA tanh8<>+408(SB)/4, $0.041898062196643784
DATA tanh8<>+412(SB)/4, $0.041898062196643784
DATA tanh8<>+416(SB)/4, $0.16667637309411668
DATA tanh8<>+420(SB)/4, $0.16667637309411668
DATA tanh8<>+424(SB)/4, $0.16667637309411668
DATA tanh8<>+428(SB)/4, $0.16667637309411668
DATA tanh8<>+432(SB)/4, $0.16667637309411668
DATA tanh8<>+436(SB)/4, $0.16667637309411668
DATA tanh8<>+440(SB)/4, $0.16667637309411668
DATA tanh8<>+444(SB)/4, $0.16667637309411668
DATA tanh8<>+448(SB)/4, $0.499991485559959
DATA tanh8<>+452(SB)/4, $0.499991485559959
DATA tanh8<>+456(SB)/4, $0.499991485559959
DATA tanh8<>+460(SB)/4, $0.499991485559959
DATA tanh8<>+464(SB)/4, $0.499991485559959
DATA tanh8<>+468(SB)/4, $0.499991485559959
DATA tanh8<>+472(SB)/4, $0.499991485559959
DATA tanh8<>+476(SB)/4, $0.499991485559959
DATA tanh8<>+480(SB)/4, $0.9999997066842039
DATA tanh8<>+484(SB)/4, $0.9999997066842039
DATA tanh8<>+488(SB)/4, $0.9999997066842039
DATA tanh8<>+492(SB)/4, $0.9999997066842039
DATA tanh8<>+496(SB)/4, $0.9999997066842039
DATA tanh8<>+500(SB)/4, $0.9999997066842039
DATA tanh8<>+504(SB)/4, $0.9999997066842039
DATA tanh8<>+508(SB)/4, $0.9999997066842039
GLOBL tanh8<>(SB), RODATA|NOPTR, $512

// func softcapAVX2(x *float32, n int, c, inv float32)
// softcapAVX512 on 8 lanes, n a multiple of 8: the same operations in the
// same order on the same constants, so the same bits (TestSoftcapKernels),
// but for the picks: no mask registers, so the series is blended in
// (VBLENDVPS) where |x·inv| is below tanhSeriesMax or unordered (NGE_UQ),
// which carries a NaN through the series (a NaN too: softcapAVX512 passes
// x·inv itself), and e is zeroed below expMin by an AND with the compare.
// 14 of the 16 registers; the constants used once a step are memory
// operands of tanh8<>.
TEXT ·softcapAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS c+16(FP), Y15
	VBROADCASTSS inv+20(FP), Y14
	MOVL         $0x4b400000, AX // 1.5·2^23
	MOVQ         AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x3f800000, AX // 1
	MOVQ         AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x7fffffff, AX // magnitude mask
	MOVQ         AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0xc0000000, AX // -2
	MOVQ         AX, X10
	VPBROADCASTD X10, Y10
	SHRQ         $3, CX
	JZ           done
loop:
	VMOVUPS      (DI), Y1
	VMULPS       Y14, Y1, Y1                 // x = s·inv
	VANDPS       Y11, Y1, Y5                 // |x|
	VCMPPS       $0x19, tanh8<>+160(SB), Y5, Y0 // |x| < tanhSeriesMax or NaN (NGE_UQ)
	// The series: x + x·(p·z), p = c3 + z·(c5 + z·(c7 + z·(c9 + z·c11))).
	VMULPS       Y1, Y1, Y6                  // z = x²
	VMOVUPS      tanh8<>+0(SB), Y7
	VFMADD213PS  tanh8<>+32(SB), Y6, Y7  // p = p·z + c9
	VFMADD213PS  tanh8<>+64(SB), Y6, Y7
	VFMADD213PS  tanh8<>+96(SB), Y6, Y7
	VFMADD213PS  tanh8<>+128(SB), Y6, Y7 // p·z + c3
	VMULPS       Y6, Y7, Y7                  // p·z
	VFMADD213PS  Y1, Y1, Y7                  // x·(p·z) + x
	// e = exp(u), u = −2|x|, as expSubAVX512.
	VMULPS       Y10, Y5, Y8                 // u
	VCMPPS       $0x1d, tanh8<>+224(SB), Y8, Y9 // u >= expMin (GE_OQ)
	VMOVAPS      Y13, Y2
	VFMADD231PS  tanh8<>+256(SB), Y8, Y2 // t = u·log2 e + 1.5·2^23
	VSUBPS       Y13, Y2, Y3                 // n
	VFNMADD231PS tanh8<>+288(SB), Y3, Y8 // r = u - n·C1
	VFNMADD231PS tanh8<>+320(SB), Y3, Y8 // r -= n·C2
	VMOVUPS      tanh8<>+352(SB), Y4
	VFMADD213PS  tanh8<>+384(SB), Y8, Y4
	VFMADD213PS  tanh8<>+416(SB), Y8, Y4
	VFMADD213PS  tanh8<>+448(SB), Y8, Y4
	VFMADD213PS  tanh8<>+480(SB), Y8, Y4
	VFMADD213PS  Y12, Y8, Y4                 // p·r + 1
	VPSLLD       $23, Y2, Y2
	VPADDD       Y2, Y4, Y4                  // e
	VANDPS       Y9, Y4, Y4                  // 0 below expMin
	VSUBPS       Y4, Y12, Y9                 // 1 - e
	VADDPS       Y4, Y12, Y4                 // 1 + e
	VDIVPS       Y4, Y9, Y9                  // tanh|x|
	VANDPS       tanh8<>+192(SB), Y1, Y6 // x's sign
	VORPS        Y6, Y9, Y9
	VBLENDVPS    Y0, Y7, Y9, Y9              // the series below the switch (and NaN)
	VMULPS       Y15, Y9, Y9                 // c·tanh
	VMOVUPS      Y9, (DI)
	ADDQ         $32, DI
	DECQ         CX
	JNZ          loop
done:
	VZEROUPPER
	RET

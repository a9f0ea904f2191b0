//go:build !purego

#include "textflag.h"

// func padRowsAVX512(dst, src *byte, n, srcRow, dstRow int)
// Copies n rows of srcRow bytes (src, srcRow apart) to rows of dstRow
// bytes (dst, dstRow apart; srcRow <= dstRow), each followed by zeros up
// to dstRow: per 64 bytes of a destination row one masked load (the bytes
// past the source row read as zeros, never touched) and one masked store.
// Rows of at most 64 bytes (the packed int4 and int2 rows of v82) keep
// their two masks in K1 and K2 for the whole loop, rows of 65 to 128 (int8)
// their three in K1, K2 and K3; longer rows work out each chunk's.
TEXT ·padRowsAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ srcRow+24(FP), R8
	MOVQ dstRow+32(FP), R9
	TESTQ CX, CX
	JLE  done
	MOVQ $-1, R13
	MOVQ $64, R12
	CMPQ R9, $64
	JGT  two

	// One chunk a row: the masks once.
	BZHIQ R8, R13, R10
	KMOVQ R10, K1
	BZHIQ R9, R13, R11
	KMOVQ R11, K2
short:
	VMOVDQU8.Z (SI), K1, Z0
	VMOVDQU8   Z0, K2, (DI)
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  short
	JMP  done

two:
	// Two chunks a row (int8 rows of 80 to 112 bytes padded to 128): the
	// first chunk's load mask, the second's load and store masks, once.
	CMPQ R9, $128
	JGT  wide
	MOVQ R8, BX
	CMPQ BX, R12
	CMOVQGT R12, BX
	BZHIQ BX, R13, R10
	KMOVQ R10, K1
	MOVQ R8, BX
	SUBQ R12, BX
	CMPQ BX, $0
	JGE  two1
	XORQ BX, BX
two1:
	BZHIQ BX, R13, R10
	KMOVQ R10, K3
	MOVQ R9, BX
	SUBQ R12, BX
	BZHIQ BX, R13, R11
	KMOVQ R11, K2
tworow:
	VMOVDQU8.Z (SI), K1, Z0
	VMOVDQU8.Z 64(SI), K3, Z1
	VMOVDQU64  Z0, (DI)
	VMOVDQU8   Z1, K2, 64(DI)
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  tworow
	JMP  done

wide:
	XORQ AX, AX // the chunk's offset in the row
chunk:
	// load mask: max(0, min(64, srcRow-off)) bytes
	MOVQ   R8, BX
	SUBQ   AX, BX
	CMPQ   BX, $0
	JGE    pos
	XORQ   BX, BX
pos:
	CMPQ   BX, R12
	CMOVQGT R12, BX
	BZHIQ  BX, R13, R10
	KMOVQ  R10, K1
	// store mask: min(64, dstRow-off) bytes
	MOVQ   R9, BX
	SUBQ   AX, BX
	CMPQ   BX, R12
	CMOVQGT R12, BX
	BZHIQ  BX, R13, R11
	KMOVQ  R11, K2
	VMOVDQU8.Z (SI)(AX*1), K1, Z0
	VMOVDQU8   Z0, K2, (DI)(AX*1)
	ADDQ   $64, AX
	CMPQ   AX, R9
	JLT    chunk
	ADDQ   R8, SI
	ADDQ   R9, DI
	DECQ   CX
	JNZ    wide

done:
	VZEROUPPER
	RET

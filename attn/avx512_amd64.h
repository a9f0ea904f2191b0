// Macros the AVX-512 kernel files share (kernels_avx512_amd64.s,
// pvu8_avx512_amd64.s).

// HSUM16 folds the 16 lanes of Z0 into X0's first float in the order of
// sum16 (kernels.go): halves 8, 4, 2, 1. OP is VADDPS or VMAXPS.
#define HSUM16(OP) \
	VEXTRACTF64X4 $1, Z0, Y1 \
	OP            Y1, Y0, Y0 \
	VEXTRACTF128  $1, Y0, X1 \
	OP            X1, X0, X0 \
	VPERMILPS     $0x0e, X0, X1 \
	OP            X1, X0, X0 \
	VPERMILPS     $0x01, X0, X1 \
	OP            X1, X0, X0

// NEON instructions the Go assembler has no mnemonic for on arm64, shared by
// this package's arm64 kernels (dot_arm64.s, vec_arm64.s, qint4_arm64.s):
// WORD encodings behind macros named by their mnemonics, register arguments
// V-register numbers. Each file defines the others it alone uses.

// FADD, FSUB, FMUL Vd.4S, Vn.4S, Vm.4S (FSUB: Vd = Vn - Vm)
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))

// FADDP Sd, Vn.2S (Sd = Vn.S[0] + Vn.S[1])
#define FADDPS(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// EXT Vd.16B, Vn.16B, Vm.16B, #8 (Vd = Vn's high 8 bytes, then Vm's low 8)
#define EXT8(d, n, m) WORD $(0x6E004000 | ((m)<<16) | ((n)<<5) | (d))

// SCVTF Vd.4S, Vn.4S (int32 -> float32, exact for |q| < 2^24)
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))

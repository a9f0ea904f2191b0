// header.go: the CUDA header every kernel program of this package is
// compiled with (bitdecode.cuh), and the one constructor of those programs.

package kernels

import (
	_ "embed"
	"fmt"
	"io"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed bitdecode.cuh
var headerSource string

// headerName is the name the .cu files #include.
const headerName = "bitdecode.cuh"

// gridDependent names the programs whose every kernel waits for the kernel
// ahead of it on the stream (bitdecode.cuh's gridDependencyWait, in every
// thread, before any global memory access that kernel could conflict
// with): program makes them cuda.Program.GridDependent, so cuda.Ctx.Launch
// starts their kernels as programmatic dependents. The other programs'
// kernels (DEC, gemvq.cu's v2, the bit-plane kernels, decode v1) launch as
// before.
// The append and pack (kvcache.cu, pack.cu) and the tensor-core decode
// kernels joined in session 17 (docs/perf/decode-attention.md); a decode
// plan turns its program's off where DecodeTuning.PDL says (sessionOptions).
// TestGridDependentKernelsWait checks every __global__ function of these
// sources.
var gridDependent = map[string]bool{"ops.cu": true, "gemv.cu": true, "gemvq3.cu": true, "gemvq4.cu": true, "linear.cu": true, "skinny.cu": true,
	"kvcache.cu": true, "pack.cu": true, "decode_mma.cu": true, "decode_wgmma.cu": true, "gemvq6dec.cu": true}

// pdlEarlyDefine is the NVRTC option of DecodeTuning.PDL = PDLWait: the
// decode kernels wait for the kernel ahead before any load
// (bitdecode.cuh's BD_PDL_EARLY).
const pdlEarlyDefine = "-DBD_PDL_EARLY=0"

// mergeFenceSCDefine is the NVRTC option of DecodeTuning.MergeFenceSC: the
// fused merge's count with every thread's __threadfence (bitdecode.cuh's
// lastArrival) instead of lastArrivalRel.
const mergeFenceSCDefine = "-DBD_MERGE_FENCE_SC=1"

// wgmmaFewDefine is the NVRTC option of a decode_wgmma.cu plan whose
// shared memory is padded to hold its CTAs at wgmmaFewCTAsPerSM an SM
// (wgmmaFewSmem): the kernel does not read it, but it makes the plan's
// program, and so its function, its own (a function's dynamic shared
// memory limit and its programmatic launch are per function).
const wgmmaFewDefine = "-DBD_WGMMA_FEW=1"

// sessionOptions applies a decode plan's session 17 tuning to the program
// of kernel k (decode_mma.cu or decode_wgmma.cu, GridDependent by
// gridDependent): its PDL mode (PDLAuto: early for DecodeMMA, and for
// DecodeWGMMA only where few, its plan padded to two CTAs an SM; off for
// other DecodeWGMMA plans) and its merge fence.
func sessionOptions(prog *cuda.Program, k DecodeKernel, t DecodeTuning, few bool) {
	if few {
		prog.Options = append(prog.Options, wgmmaFewDefine)
	}
	m := t.PDL
	if m == PDLAuto {
		m = PDLEarly
		if k == DecodeWGMMA && !few {
			m = PDLOff
		}
	}
	switch m {
	case PDLWait:
		prog.Options = append(prog.Options, pdlEarlyDefine)
	case PDLOff:
		prog.GridDependent = false
	}
	if t.MergeFenceSC {
		prog.Options = append(prog.Options, mergeFenceSCDefine)
	}
}

// program returns the NVRTC program of source src named name, with
// bitdecode.cuh (and the extra headers, e.g. dec.cu for gemvq_dec) handed
// to NVRTC in memory: the .cu files #include them by name, and their texts
// are part of the program's CUBIN cache key. A program named in
// gridDependent is GridDependent.
func program(name, src string, exprs, opts []string, extra ...cuda.Header) cuda.Program {
	headers := append([]cuda.Header{{Name: headerName, Source: headerSource}}, extra...)
	return cuda.Program{Name: name, Source: src, Headers: headers, Exprs: exprs, Options: opts,
		GridDependent: gridDependent[name]}
}

// flagArg is a kernel's bool argument as this package's kernels take it:
// an int32, 1 for true.
func flagArg(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// compileReporting compiles prog on dev. Where ptxas is not nil (the
// tunings' Ptxas, BITDECODE_PTXAS_VERBOSE) it asks ptxas for its register
// and spill report and writes it there, headed by the program's name and
// what (its kernels' name expressions).
func compileReporting(dev *cuda.Device, prog cuda.Program, ptxas io.Writer, what string) (*cuda.Module, error) {
	if ptxas != nil {
		prog.Options = append(prog.Options, "--ptxas-options=-v")
	}
	mod, err := dev.Compile(prog)
	if err != nil {
		return nil, err
	}
	if ptxas != nil {
		fmt.Fprintf(ptxas, "%s [%s]:\n%s\n", prog.Name, what, mod.Log())
	}
	return mod, nil
}

package cuda

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Each is wrapped with the reason, so errors.Is matches and
// the text says what happened.
var (
	// ErrNoDriver means the CUDA driver library could not be loaded or
	// initialized, e.g. "cuda: no CUDA driver: libcuda.so.1: cannot open
	// shared object file: No such file or directory".
	ErrNoDriver = errors.New("cuda: no CUDA driver")
	// ErrNoDevice means the driver loaded but reports no usable device, or
	// the requested ordinal does not exist.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrNoNVRTC means the NVRTC library could not be loaded, so kernels
	// cannot be compiled.
	ErrNoNVRTC = errors.New("cuda: no NVRTC")
	// ErrNoCUBLASLt means the cuBLASLt library could not be loaded.
	ErrNoCUBLASLt = errors.New("cuda: no cuBLASLt")
	// ErrClosed is returned by a Device used after Close.
	ErrClosed = errors.New("cuda: device is closed")
)

// Error is a failed CUDA driver, NVRTC or cuBLASLt call.
type Error struct {
	Call   string // the C function, e.g. "cuMemAlloc_v2"
	Code   int    // the numeric result (CUresult, nvrtcResult or cublasStatus_t)
	Name   string // the result's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg    string // the library's description, e.g. "out of memory"
	Kernel string // for launches: the kernel's name expression; else empty
}

// Error reads like "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of
// memory)"; a launch error adds the kernel:
// "cuda: cuLaunchKernel (kernel scale<4>): CUDA_ERROR_INVALID_VALUE (...)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("cuda: ")
	b.WriteString(e.Call)
	if e.Kernel != "" {
		b.WriteString(" (kernel ")
		b.WriteString(e.Kernel)
		b.WriteString(")")
	}
	b.WriteString(": ")
	if e.Name != "" {
		b.WriteString(e.Name)
	} else {
		fmt.Fprintf(&b, "error %d", e.Code)
	}
	if e.Msg != "" && e.Msg != e.Name {
		b.WriteString(" (")
		b.WriteString(e.Msg)
		b.WriteString(")")
	}
	return b.String()
}

// CompileError is a failed NVRTC compilation. Its text names the program,
// its name expressions and the architecture, and ends with the compiler log.
type CompileError struct {
	Program string   // Program.Name, e.g. "decode_int4.cu"
	Exprs   []string // the name expressions asked for
	Arch    string   // e.g. "sm_90a"
	Log     string   // NVRTC's program log
	Err     error    // the failed call, usually an *Error from nvrtcCompileProgram
}

// Error returns "cuda: compile decode.cu [decode<128>] for sm_90a: <cause>",
// followed by the log on the next lines.
func (e *CompileError) Error() string {
	var b strings.Builder
	b.WriteString("cuda: compile ")
	b.WriteString(e.Program)
	if len(e.Exprs) > 0 {
		b.WriteString(" [")
		b.WriteString(strings.Join(e.Exprs, ", "))
		b.WriteString("]")
	}
	if e.Arch != "" {
		b.WriteString(" for ")
		b.WriteString(e.Arch)
	}
	b.WriteString(": ")
	cause := "failed"
	if e.Err != nil {
		cause = strings.TrimPrefix(e.Err.Error(), "cuda: ")
	}
	b.WriteString(cause)
	if log := strings.TrimSpace(e.Log); log != "" {
		b.WriteString("\n")
		b.WriteString(log)
	}
	return b.String()
}

// Unwrap returns the failed call.
func (e *CompileError) Unwrap() error { return e.Err }

// CUresult codes this package treats specially. Values from cuda.h.
const (
	cudaSuccess     = 0
	cudaErrNoDevice = 100 // CUDA_ERROR_NO_DEVICE
	cudaErrNotFound = 500 // CUDA_ERROR_NOT_FOUND
)

// cublasStatusNames maps cublasStatus_t to its name (cublas_api.h), used when
// cublasLtGetStatusName is unavailable.
var cublasStatusNames = map[int]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// nvrtcResultNames maps nvrtcResult to its name (nvrtc.h).
var nvrtcResultNames = []string{
	"NVRTC_SUCCESS",
	"NVRTC_ERROR_OUT_OF_MEMORY",
	"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT",
	"NVRTC_ERROR_INVALID_PROGRAM",
	"NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION",
	"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"NVRTC_ERROR_INTERNAL_ERROR",
	"NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	"NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
	"NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
	"NVRTC_ERROR_PCH_CREATE",
	"NVRTC_ERROR_CANCELLED",
	"NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
}

func nvrtcResultName(code int) string {
	if code >= 0 && code < len(nvrtcResultNames) {
		return nvrtcResultNames[code]
	}
	return fmt.Sprintf("NVRTC_ERROR_%d", code)
}

func cublasStatusName(code int) string {
	if n, ok := cublasStatusNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUBLAS_STATUS_%d", code)
}

// Package cuda is bitdecode's GPU runtime: CUDA driver API, NVRTC and
// cuBLASLt bindings in pure Go, with no cgo and no CUDA toolkit at build time.
//
// # Libraries
//
// The libraries are opened with dlopen (through github.com/ebitengine/purego)
// the first time they are needed:
//
//   - the driver, libcuda.so.1 (override: Config.LibCUDA);
//   - NVRTC, libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so (Config.NVRTC);
//   - cuBLASLt, libcublasLt.so.13, libcublasLt.so.12, libcublasLt.so
//     (Config.CUBLASLt);
//   - NCCL, libnccl.so.2, libnccl.so (Config.NCCL), for tensor-parallel
//     groups only (nccl.go): before it loads, libc's environment gets
//     NCCL_NVLS_ENABLE=0, so NVLink multicast stays off.
//
// # Settings
//
// The package reads no environment variable. A program parses its settings
// once at its edge, cfg, err := [ParseConfig](os.LookupEnv) (BITDECODE_LIBCUDA,
// BITDECODE_NVRTC, BITDECODE_CUBLASLT, BITDECODE_LIBNCCL, BITDECODE_CACHE_DIR, CUDA_HOME,
// CUDA_PATH; docs/gpu.md has the table), and hands them to [Configure]
// before the first use. Without Configure the zero [Config] holds: sonames,
// the usual CUDA include folders and the user cache directory.
//
// When the driver cannot be loaded, or no device is present, [Open] and
// [Available] return an error wrapping [ErrNoDriver] or [ErrNoDevice] whose
// text says why, so callers can fall back to the CPU with one clear line.
//
// # Threads
//
// CUDA contexts are current per OS thread. A [Device] owns one goroutine,
// locked to its OS thread, that made the device's primary context current;
// every driver call runs there. [Device.Do] hands that goroutine a function
// and waits for it; the function receives a [Ctx], the owner thread's view of
// the device, whose methods call the driver directly. Batch work into one Do:
// each Do costs a goroutine hand-off, calls on a Ctx cost nothing extra. The
// Device's own methods ([Device.Alloc], [Device.Launch], ...) are Do wrappers
// for one-off calls; called from inside a Do function they run inline. A
// Device is safe for concurrent use; a Ctx must not leave the function it was
// given to. No thread is locked in init.
//
// Measured on the H100 machine (2026-11-22, driver 580, Go benchmarks in
// gpu_bench_test.go): one Do hand-off costs about 24 µs (waking a locked
// thread), a launch from inside a Do about 4.3 µs with one 96-byte
// allocation (purego's argument slice), Device.Launch about 27 µs. So a
// decode step is one Do, or one CUDA graph replay, never a Do per kernel.
//
// # Kernels
//
// [Device.Compile] compiles a CUDA C++ [Program] with NVRTC for the device's
// exact architecture (sm_90a on compute capability 9.0, sm_XY otherwise) and
// loads the CUBIN. Template kernels are instantiated through name expressions
// ("decode<128, 4>"), whose lowered names are kept with the module; look a
// kernel up with [Module.Function] by its name expression, or by its plain
// name for extern "C" kernels. Default NVRTC options: the architecture,
// -std=c++17, -default-device, and -I for the CUDA headers when a directory
// holding cuda_fp16.h is found (Config.IncludeDirs, the
// NVRTC library's ../include, /usr/local/cuda/include,
// /usr/local/cuda-*/include). When found, the macro BITDECODE_CUDA_HEADERS is
// defined, and only then may a kernel #include <cuda_fp16.h> or
// <cuda_bf16.h>; [NVRTC] reports the directory. Fast math is off unless a
// program asks for it. NVRTC rejects -O3. [Program.Headers] are in-memory
// files the source may #include by name (nvrtcCreateProgram's headers).
//
// CUBINs are cached on disk under os.UserCacheDir()/bitdecode/kernels
// (override: Config.CacheDir), keyed by the SHA-256 of the source, the
// headers, the options, the name expressions, the NVRTC version and the
// architecture. An
// entry is written to a temporary file and renamed into place, so two
// processes can fill the cache at once; each entry carries its length and a
// checksum, and a corrupt or truncated entry is rebuilt. [CacheInfo] reports
// the location and size.
//
// # Launching
//
// [Ctx.Launch] takes the kernel arguments as Go values: [DevicePtr], int32,
// uint32, float32, int64, uint64, float64, int16, uint16, int8, uint8,
// uintptr, or a []byte holding a struct passed by value (its Go layout must
// match the C struct's). Go's int is refused, since its
// size differs from C's int. The argument block lives in memory owned by the
// Device and pinned with runtime.Pinner, so a launch allocates nothing beyond
// boxing the values into interfaces.
//
// # GEMM
//
// [Ctx.GEMM] computes the linear-layer product Y[M,N] = X[M,K] · W[N,K]ᵀ on
// row-major fp16 or bf16 matrices with fp32 accumulation, writing fp16, bf16
// or fp32, through cuBLASLt. The heuristic's choice is cached per shape.
// M=3, N=4096, K=4096 fp16 takes 11.3 µs on the H100 (2.97 TB/s of weights).
//
// # Errors
//
// Every CUDA, NVRTC and cuBLASLt call is checked. A failed call returns an
// [*Error] naming the call and the error, for example
// "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; a failed
// launch also names the kernel; a failed compilation returns a
// [*CompileError] holding the NVRTC log.
package cuda

package cuda

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
)

// Environment variables of this package's settings. ParseConfig is the one
// place that reads them; the library itself never looks at the environment.
const (
	EnvLibCUDA  = "BITDECODE_LIBCUDA"   // path of the CUDA driver library
	EnvNVRTC    = "BITDECODE_NVRTC"     // path of the NVRTC library
	EnvCUBLASLt = "BITDECODE_CUBLASLT"  // path of the cuBLASLt library
	EnvLibNCCL  = "BITDECODE_LIBNCCL"   // path of the NCCL library (tensor parallelism)
	EnvCacheDir = "BITDECODE_CACHE_DIR" // directory of the CUBIN cache
	// EnvCUDAHome and EnvCUDAPath are the CUDA toolkit's own variables: the
	// first places searched for cuda_fp16.h (their include folders).
	EnvCUDAHome = "CUDA_HOME"
	EnvCUDAPath = "CUDA_PATH"
)

// Config holds the settings of the GPU runtime: where the libraries and the
// CUDA headers are and where compiled kernels are cached. The zero Config is
// the default: libraries by soname, headers in the usual toolkit folders,
// the cache under os.UserCacheDir()/bitdecode/kernels. A program fills it
// once at its edge (ParseConfig(os.LookupEnv)) and hands it to Configure
// before the first use of the package.
type Config struct {
	// LibCUDA, NVRTC, CUBLASLt and NCCL, when set, name the only file
	// tried for the driver, NVRTC, cuBLASLt and NCCL (instead of the
	// sonames).
	LibCUDA, NVRTC, CUBLASLt, NCCL string
	// CacheDir is the CUBIN cache's directory; "" is
	// os.UserCacheDir()/bitdecode/kernels.
	CacheDir string
	// IncludeDirs are searched first for cuda_fp16.h, before the NVRTC
	// library's ../include and /usr/local/cuda*/include ($CUDA_HOME/include,
	// $CUDA_PATH/include).
	IncludeDirs []string
}

// ParseConfig reads the package's environment variables through lookup
// (os.LookupEnv at a program's edge, a map in tests). An empty value is
// unset; paths are trimmed of surrounding blanks.
func ParseConfig(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	c := Config{LibCUDA: get(EnvLibCUDA), NVRTC: get(EnvNVRTC), CUBLASLt: get(EnvCUBLASLt), NCCL: get(EnvLibNCCL), CacheDir: get(EnvCacheDir)}
	for _, name := range []string{EnvCUDAHome, EnvCUDAPath} {
		if v := get(name); v != "" {
			c.IncludeDirs = append(c.IncludeDirs, filepath.Join(v, "include"))
		}
	}
	return c, nil
}

// lib names the libraries whose settings cannot change once loaded.
type lib int

const (
	libNone lib = iota
	libDriver
	libNVRTC
	libCUBLASLt
	libNCCL
)

var (
	configMu sync.Mutex
	config   Config
	// loaded marks the libraries opened with config's settings: those
	// settings cannot change afterwards.
	loaded [libNCCL + 1]bool
)

// Configure sets the package's settings. Call it before the first use: once
// a library has been loaded, a Config naming another file for it (or, for
// NVRTC, other include folders) is an error; settings of libraries not yet
// loaded, and the cache directory (read at each compilation), may change.
func Configure(c Config) error {
	configMu.Lock()
	defer configMu.Unlock()
	for _, k := range []struct {
		l         lib
		what      string
		same      bool
		have, got string
	}{
		{libDriver, "the CUDA driver", c.LibCUDA == config.LibCUDA, config.LibCUDA, c.LibCUDA},
		{libNVRTC, "NVRTC", c.NVRTC == config.NVRTC, config.NVRTC, c.NVRTC},
		{libNVRTC, "NVRTC's include folders", strings.Join(c.IncludeDirs, "\x00") == strings.Join(config.IncludeDirs, "\x00"),
			strings.Join(config.IncludeDirs, ":"), strings.Join(c.IncludeDirs, ":")},
		{libCUBLASLt, "cuBLASLt", c.CUBLASLt == config.CUBLASLt, config.CUBLASLt, c.CUBLASLt},
		{libNCCL, "NCCL", c.NCCL == config.NCCL, config.NCCL, c.NCCL},
	} {
		if loaded[k.l] && !k.same {
			return fmt.Errorf("cuda: Configure: %s is already loaded with %q, not %q; configure before the first use", k.what, k.have, k.got)
		}
	}
	c.IncludeDirs = append([]string(nil), c.IncludeDirs...)
	config = c
	return nil
}

// currentConfig returns the settings; l, unless libNone, marks that
// library's settings as in use (it is about to be opened with them).
func currentConfig(l lib) Config {
	configMu.Lock()
	defer configMu.Unlock()
	if l != libNone {
		loaded[l] = true
	}
	return config
}

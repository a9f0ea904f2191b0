package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"},
			"cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"},
		{&Error{Call: "cuLaunchKernel", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Msg: "invalid argument", Kernel: "scale<4, float>"},
			"cuda: cuLaunchKernel (kernel scale<4, float>): CUDA_ERROR_INVALID_VALUE (invalid argument)"},
		{&Error{Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Msg: "NVRTC_ERROR_COMPILATION"},
			"cuda: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION"},
		{&Error{Call: "cublasLtMatmul", Code: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED"},
			"cuda: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED"},
		{&Error{Call: "cuInit", Code: 999},
			"cuda: cuInit: error 999"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestCompileErrorFormat(t *testing.T) {
	cause := &Error{Call: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Msg: "NVRTC_ERROR_COMPILATION"}
	e := &CompileError{
		Program: "decode.cu", Exprs: []string{"decode<128, 4>", "decode<64, 4>"}, Arch: "sm_90a",
		Log: "decode.cu(3): error: identifier \"x\" is undefined\n\n", Err: cause,
	}
	want := "cuda: compile decode.cu [decode<128, 4>, decode<64, 4>] for sm_90a: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION\n" +
		"decode.cu(3): error: identifier \"x\" is undefined"
	if got := e.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	var ce *Error
	if !errors.As(e, &ce) || ce != cause {
		t.Errorf("errors.As(CompileError, *Error) failed")
	}
	wrapped := fmt.Errorf("kernels: %w", e)
	var got *CompileError
	if !errors.As(wrapped, &got) || got.Log == "" {
		t.Errorf("errors.As(wrapped, *CompileError) failed")
	}
}

func TestResultNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{nvrtcResultName(0), "NVRTC_SUCCESS"},
		{nvrtcResultName(6), "NVRTC_ERROR_COMPILATION"},
		{nvrtcResultName(10), "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID"},
		{nvrtcResultName(17), "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED"},
		{nvrtcResultName(99), "NVRTC_ERROR_99"},
		{cublasStatusName(7), "CUBLAS_STATUS_INVALID_VALUE"},
		{cublasStatusName(15), "CUBLAS_STATUS_NOT_SUPPORTED"},
		{cublasStatusName(42), "CUBLAS_STATUS_42"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// fakeOpener opens only the names in ok and fails the rest like dlopen.
func fakeOpener(ok ...string) (opener, *[]string) {
	var tried []string
	return func(name string) (uintptr, error) {
		tried = append(tried, name)
		for _, o := range ok {
			if o == name {
				return 0x1000, nil
			}
		}
		return 0, errors.New(name + ": cannot open shared object file: No such file or directory")
	}, &tried
}

// env returns the Config that ParseConfig reads from the variables kv.
func env(kv map[string]string) Config {
	c, err := ParseConfig(func(k string) (string, bool) { v, ok := kv[k]; return v, ok })
	if err != nil {
		panic(err)
	}
	return c
}

// setCacheDir configures the cache directory dir for the rest of the test.
func setCacheDir(t *testing.T, dir string) {
	t.Helper()
	old := currentConfig(libNone)
	c := old
	c.CacheDir = dir
	if err := Configure(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Configure(old) })
}

// TestConfigureAfterLoad checks that a loaded library's settings are fixed
// while the others, and the cache directory, may still change.
func TestConfigureAfterLoad(t *testing.T) {
	configMu.Lock()
	savedLoaded, savedConfig := loaded, config
	loaded = [len(loaded)]bool{}
	configMu.Unlock()
	defer func() {
		configMu.Lock()
		loaded, config = savedLoaded, savedConfig
		configMu.Unlock()
	}()
	base := Config{LibCUDA: "/a/libcuda.so.1"}
	if err := Configure(base); err != nil {
		t.Fatal(err)
	}
	currentConfig(libDriver) // as loadDriver does
	if err := Configure(Config{LibCUDA: "/a/libcuda.so.1", NVRTC: "/b/libnvrtc.so", IncludeDirs: []string{"/c"}, CacheDir: "/d"}); err != nil {
		t.Errorf("changing what is not loaded yet: %v", err)
	}
	currentConfig(libNVRTC)
	for _, c := range []Config{
		{LibCUDA: "/x/libcuda.so.1", NVRTC: "/b/libnvrtc.so", IncludeDirs: []string{"/c"}},
		{LibCUDA: "/a/libcuda.so.1", NVRTC: "/x/libnvrtc.so", IncludeDirs: []string{"/c"}},
		{LibCUDA: "/a/libcuda.so.1", NVRTC: "/b/libnvrtc.so"},
	} {
		if err := Configure(c); err == nil || !strings.Contains(err.Error(), "already loaded") {
			t.Errorf("Configure(%+v) after the load = %v, want an error", c, err)
		}
	}
	if err := Configure(Config{LibCUDA: "/a/libcuda.so.1", NVRTC: "/b/libnvrtc.so", IncludeDirs: []string{"/c"}, CUBLASLt: "/e", CacheDir: "/f"}); err != nil {
		t.Errorf("changing cuBLASLt (not loaded) and the cache: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	c := env(map[string]string{EnvLibCUDA: " /x/libcuda.so.1 ", EnvNVRTC: "", EnvCacheDir: "/c", EnvCUDAHome: "/opt/cuda", EnvCUDAPath: "/usr/cuda"})
	want := Config{LibCUDA: "/x/libcuda.so.1", CacheDir: "/c", IncludeDirs: []string{"/opt/cuda/include", "/usr/cuda/include"}}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("ParseConfig = %+v, want %+v", c, want)
	}
	if c := env(nil); fmt.Sprint(c) != fmt.Sprint(Config{}) {
		t.Errorf("ParseConfig of nothing = %+v, want the zero Config", c)
	}
}

func TestOpenLibraryFallbacks(t *testing.T) {
	tests := []struct {
		name      string
		spec      libSpec
		env       map[string]string
		available []string
		wantName  string
		wantTried []string
	}{
		{"nvrtc 13 present", specNVRTC, nil, []string{"libnvrtc.so.13", "libnvrtc.so.12"},
			"libnvrtc.so.13", []string{"libnvrtc.so.13"}},
		{"nvrtc falls back to 12", specNVRTC, nil, []string{"libnvrtc.so.12"},
			"libnvrtc.so.12", []string{"libnvrtc.so.13", "libnvrtc.so.12"}},
		{"nvrtc falls back to dev symlink", specNVRTC, nil, []string{"libnvrtc.so"},
			"libnvrtc.so", []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}},
		{"cublasLt falls back to 12", specCUBLASLt, nil, []string{"libcublasLt.so.12"},
			"libcublasLt.so.12", []string{"libcublasLt.so.13", "libcublasLt.so.12"}},
		{"env override is the only try", specNVRTC, map[string]string{EnvNVRTC: "/opt/nvrtc/libnvrtc.so.13"}, []string{"/opt/nvrtc/libnvrtc.so.13", "libnvrtc.so.13"},
			"/opt/nvrtc/libnvrtc.so.13", []string{"/opt/nvrtc/libnvrtc.so.13"}},
		{"driver soname", specDriver, nil, []string{"libcuda.so.1"},
			"libcuda.so.1", []string{"libcuda.so.1"}},
		{"driver override", specDriver, map[string]string{EnvLibCUDA: "/x/libcuda.so.1"}, []string{"/x/libcuda.so.1"},
			"/x/libcuda.so.1", []string{"/x/libcuda.so.1"}},
	}
	for _, tt := range tests {
		open, tried := fakeOpener(tt.available...)
		lib, err := openLibrary(tt.spec, env(tt.env), open)
		if err != nil {
			t.Errorf("%s: openLibrary: %v", tt.name, err)
			continue
		}
		if lib.name != tt.wantName {
			t.Errorf("%s: opened %q, want %q", tt.name, lib.name, tt.wantName)
		}
		if strings.Join(*tried, ",") != strings.Join(tt.wantTried, ",") {
			t.Errorf("%s: tried %v, want %v", tt.name, *tried, tt.wantTried)
		}
	}
}

func TestOpenLibraryFailureListsEveryCandidate(t *testing.T) {
	open, _ := fakeOpener()
	_, err := openLibrary(specCUBLASLt, env(nil), open)
	if err == nil {
		t.Fatal("openLibrary succeeded with nothing available")
	}
	for _, n := range specCUBLASLt.names {
		if !strings.Contains(err.Error(), n+": cannot open shared object file") {
			t.Errorf("error %q does not mention %s", err, n)
		}
	}
}

func TestNoDriverSentinel(t *testing.T) {
	// A real dlopen of a path that does not exist.
	const missing = "/nonexistent/bitdecode/libcuda.so.1"
	_, err := openDriver(env(map[string]string{EnvLibCUDA: missing}), dlopenNow)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("openDriver(%s) = %v, want ErrNoDriver", missing, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "cuda: no CUDA driver: ") || !strings.Contains(msg, missing) {
		t.Errorf("error %q should start with the sentinel and name %s", msg, missing)
	}
	t.Logf("%v", err)

	_, err = openNVRTC(env(map[string]string{EnvNVRTC: "/nonexistent/libnvrtc.so.13"}), dlopenNow)
	if !errors.Is(err, ErrNoNVRTC) {
		t.Errorf("openNVRTC = %v, want ErrNoNVRTC", err)
	}
	_, err = openCUBLASLt(env(map[string]string{EnvCUBLASLt: "/nonexistent/libcublasLt.so.13"}), dlopenNow)
	if !errors.Is(err, ErrNoCUBLASLt) {
		t.Errorf("openCUBLASLt = %v, want ErrNoCUBLASLt", err)
	}
}

func TestArchName(t *testing.T) {
	tests := []struct {
		major, minor int
		want         string
	}{
		{9, 0, "sm_90a"}, {8, 0, "sm_80"}, {8, 6, "sm_86"}, {8, 9, "sm_89"}, {7, 5, "sm_75"}, {10, 0, "sm_100"}, {12, 0, "sm_120"},
	}
	for _, tt := range tests {
		if got := archName(tt.major, tt.minor); got != tt.want {
			t.Errorf("archName(%d, %d) = %q, want %q", tt.major, tt.minor, got, tt.want)
		}
	}
}

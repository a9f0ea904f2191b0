package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NVRTC options every program is compiled with, besides the architecture
// and include path. Fast math is deliberately not among them.
var nvrtcBaseOptions = []string{"-std=c++17", "-default-device"}

// headerMacro is defined (-D) when a CUDA include directory was found, so a
// kernel can guard #include <cuda_fp16.h> with #ifdef.
const headerMacro = "BITDECODE_CUDA_HEADERS"

// probeHeader is the file whose presence marks a usable CUDA include dir.
const probeHeader = "cuda_fp16.h"

// nvrtcLib holds the entry points of NVRTC.
type nvrtcLib struct {
	lib        *library
	path       string // the file that was mapped, if known
	major      int
	minor      int
	includeDir string // "" when no directory holding cuda_fp16.h was found
	archs      []int  // supported SM versions, e.g. 75, 80, ..., 90, 100, 120

	nvrtcVersion, nvrtcGetErrorString, nvrtcCreateProgram, nvrtcDestroyProgram uintptr
	nvrtcAddNameExpression, nvrtcCompileProgram, nvrtcGetProgramLogSize        uintptr
	nvrtcGetProgramLog, nvrtcGetCUBINSize, nvrtcGetCUBIN, nvrtcGetLoweredName  uintptr
	nvrtcGetNumSupportedArchs, nvrtcGetSupportedArchs                          uintptr
}

var (
	nvrtcOnce   sync.Once
	nvrtcLoaded *nvrtcLib
	nvrtcErr    error
)

// loadNVRTC opens NVRTC once per process. Failures wrap ErrNoNVRTC.
func loadNVRTC() (*nvrtcLib, error) {
	nvrtcOnce.Do(func() {
		nvrtcLoaded, nvrtcErr = openNVRTC(currentConfig(libNVRTC), dlopenNow)
	})
	return nvrtcLoaded, nvrtcErr
}

func openNVRTC(c Config, open opener) (*nvrtcLib, error) {
	lib, err := openLibrary(specNVRTC, c, open)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNVRTC, err)
	}
	s := &symbols{lib: lib}
	n := &nvrtcLib{lib: lib}
	n.nvrtcVersion = s.need("nvrtcVersion")
	n.nvrtcGetErrorString = s.need("nvrtcGetErrorString")
	n.nvrtcCreateProgram = s.need("nvrtcCreateProgram")
	n.nvrtcDestroyProgram = s.need("nvrtcDestroyProgram")
	n.nvrtcAddNameExpression = s.need("nvrtcAddNameExpression")
	n.nvrtcCompileProgram = s.need("nvrtcCompileProgram")
	n.nvrtcGetProgramLogSize = s.need("nvrtcGetProgramLogSize")
	n.nvrtcGetProgramLog = s.need("nvrtcGetProgramLog")
	n.nvrtcGetCUBINSize = s.need("nvrtcGetCUBINSize")
	n.nvrtcGetCUBIN = s.need("nvrtcGetCUBIN")
	n.nvrtcGetLoweredName = s.need("nvrtcGetLoweredName")
	n.nvrtcGetNumSupportedArchs = s.optional("nvrtcGetNumSupportedArchs")
	n.nvrtcGetSupportedArchs = s.optional("nvrtcGetSupportedArchs")
	if s.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNVRTC, s.err)
	}
	var major, minor int32
	r, _, _ := purego.SyscallN(n.nvrtcVersion, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))
	if err := n.check("nvrtcVersion", r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNVRTC, err)
	}
	n.major, n.minor = int(major), int(minor)
	n.archs = n.supportedArchs()
	n.path = loadedPath("libnvrtc.so")
	if n.path == "" && strings.Contains(lib.name, "/") {
		n.path = lib.name
	}
	n.includeDir = findIncludeDir(c.IncludeDirs, n.path, filepath.Glob)
	return n, nil
}

// check turns an nvrtcResult into nil or an *Error.
func (n *nvrtcLib) check(call string, r uintptr) error {
	code := int32(r)
	if code == 0 {
		return nil
	}
	msg, _, _ := purego.SyscallN(n.nvrtcGetErrorString, uintptr(code))
	return &Error{Call: call, Code: int(code), Name: nvrtcResultName(int(code)), Msg: goString(msg)}
}

func (n *nvrtcLib) version() string { return fmt.Sprintf("%d.%d", n.major, n.minor) }

func (n *nvrtcLib) supportedArchs() []int {
	if n.nvrtcGetNumSupportedArchs == 0 || n.nvrtcGetSupportedArchs == 0 {
		return nil
	}
	var count int32
	r, _, _ := purego.SyscallN(n.nvrtcGetNumSupportedArchs, uintptr(unsafe.Pointer(&count)))
	if int32(r) != 0 || count <= 0 || count > 1024 {
		return nil
	}
	archs := make([]int32, count)
	r, _, _ = purego.SyscallN(n.nvrtcGetSupportedArchs, uintptr(unsafe.Pointer(&archs[0])))
	if int32(r) != 0 {
		return nil
	}
	out := make([]int, count)
	for i, a := range archs {
		out[i] = int(a)
	}
	return out
}

// supports reports whether NVRTC can target compute capability major.minor.
// Without the query functions it assumes yes and lets compilation say no.
func (n *nvrtcLib) supports(major, minor int) bool {
	if len(n.archs) == 0 {
		return true
	}
	want := major*10 + minor
	for _, a := range n.archs {
		if a == want {
			return true
		}
	}
	return false
}

// findIncludeDir returns the first directory holding cuda_fp16.h among
// first (Config.IncludeDirs: $CUDA_HOME/include, $CUDA_PATH/include), the
// NVRTC library's ../include, /usr/local/cuda/include and
// /usr/local/cuda-*/include (newest first), or "".
func findIncludeDir(first []string, nvrtcPath string, glob func(string) ([]string, error)) string {
	dirs := append([]string(nil), first...)
	if nvrtcPath != "" {
		libDir := filepath.Dir(nvrtcPath)
		dirs = append(dirs, filepath.Join(libDir, "..", "include"))
		// Toolkit layout: lib64 -> targets/x86_64-linux/lib; include beside it.
		if real, err := filepath.EvalSymlinks(nvrtcPath); err == nil {
			dirs = append(dirs, filepath.Join(filepath.Dir(real), "..", "include"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/include")
	if m, err := glob("/usr/local/cuda-*/include"); err == nil {
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, probeHeader)); err == nil && !fi.IsDir() {
			return filepath.Clean(d)
		}
	}
	return ""
}

// compileOptions returns the full NVRTC option list for arch: the base
// options, the include path and macro when headers were found, then the
// program's own options.
func (n *nvrtcLib) compileOptions(arch string, extra []string) []string {
	opts := []string{"--gpu-architecture=" + arch}
	opts = append(opts, nvrtcBaseOptions...)
	if n.includeDir != "" {
		opts = append(opts, "-I"+n.includeDir, "-D"+headerMacro+"=1")
		// CUDA 13 keeps libcu++ (cuda/std/...) under include/cccl.
		if fi, err := os.Stat(filepath.Join(n.includeDir, "cccl")); err == nil && fi.IsDir() {
			opts = append(opts, "-I"+filepath.Join(n.includeDir, "cccl"))
		}
	}
	return append(opts, extra...)
}

// compiled is what a compilation produces and the cache stores.
type compiled struct {
	cubin   []byte
	exprs   []string // name expressions, as asked
	lowered []string // lowered (mangled) names, parallel to exprs
	log     string   // NVRTC's log (warnings), may be empty
}

// cstrArray holds C strings and an array of pointers to them (a C
// const char* const*), pinned while C reads them.
type cstrArray struct {
	bufs [][]byte
	ptrs []*byte
	pin  runtime.Pinner
}

func newCstrArray(ss []string) *cstrArray {
	a := &cstrArray{bufs: make([][]byte, len(ss)), ptrs: make([]*byte, len(ss))}
	for i, s := range ss {
		a.bufs[i] = cstring(s)
		a.ptrs[i] = &a.bufs[i][0]
		a.pin.Pin(a.ptrs[i])
	}
	if len(ss) > 0 {
		a.pin.Pin(&a.ptrs[0])
	}
	return a
}

func (a *cstrArray) base() uintptr {
	if len(a.ptrs) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&a.ptrs[0]))
}

func (a *cstrArray) free() { a.pin.Unpin() }

// compile runs NVRTC on p with the full option list opts (from
// compileOptions) and returns the CUBIN and the lowered names of p.Exprs.
func (n *nvrtcLib) compile(p Program, arch string, opts []string) (compiled, error) {
	fail := func(log string, err error) (compiled, error) {
		return compiled{}, &CompileError{Program: p.Name, Exprs: p.Exprs, Arch: arch, Log: log, Err: err}
	}
	src, name := cstring(p.Source), cstring(p.Name)
	hdrSrc, hdrName := make([]string, len(p.Headers)), make([]string, len(p.Headers))
	for i, h := range p.Headers {
		hdrSrc[i], hdrName[i] = h.Source, h.Name
	}
	headers, includeNames := newCstrArray(hdrSrc), newCstrArray(hdrName)
	defer headers.free()
	defer includeNames.free()
	var prog uintptr
	r, _, _ := purego.SyscallN(n.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&name[0])), uintptr(len(p.Headers)), headers.base(), includeNames.base())
	if err := n.check("nvrtcCreateProgram", r); err != nil {
		return fail("", err)
	}
	defer func() { purego.SyscallN(n.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog))) }()

	exprs := newCstrArray(p.Exprs)
	defer exprs.free()
	for i := range p.Exprs {
		r, _, _ := purego.SyscallN(n.nvrtcAddNameExpression, prog, uintptr(unsafe.Pointer(exprs.ptrs[i])))
		if err := n.check("nvrtcAddNameExpression", r); err != nil {
			return fail("", fmt.Errorf("name expression %q: %w", p.Exprs[i], err))
		}
	}
	o := newCstrArray(opts)
	defer o.free()
	r, _, _ = purego.SyscallN(n.nvrtcCompileProgram, prog, uintptr(len(opts)), o.base())
	compileErr := n.check("nvrtcCompileProgram", r)
	log := n.programLog(prog)
	if compileErr != nil {
		return fail(log, compileErr)
	}

	var size uintptr
	r, _, _ = purego.SyscallN(n.nvrtcGetCUBINSize, prog, uintptr(unsafe.Pointer(&size)))
	if err := n.check("nvrtcGetCUBINSize", r); err != nil {
		return fail(log, err)
	}
	if size == 0 {
		return fail(log, fmt.Errorf("nvrtcGetCUBINSize: empty CUBIN (is the architecture %s a real sm_ target?)", arch))
	}
	cubin := make([]byte, size)
	r, _, _ = purego.SyscallN(n.nvrtcGetCUBIN, prog, uintptr(unsafe.Pointer(&cubin[0])))
	if err := n.check("nvrtcGetCUBIN", r); err != nil {
		return fail(log, err)
	}
	out := compiled{cubin: cubin, exprs: append([]string(nil), p.Exprs...), log: log}
	for i, e := range p.Exprs {
		var lowered uintptr
		r, _, _ := purego.SyscallN(n.nvrtcGetLoweredName, prog, uintptr(unsafe.Pointer(exprs.ptrs[i])), uintptr(unsafe.Pointer(&lowered)))
		if err := n.check("nvrtcGetLoweredName", r); err != nil {
			return fail(log, fmt.Errorf("name expression %q: %w", e, err))
		}
		out.lowered = append(out.lowered, goString(lowered))
	}
	return out, nil
}

func (n *nvrtcLib) programLog(prog uintptr) string {
	var size uintptr
	r, _, _ := purego.SyscallN(n.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&size)))
	if int32(r) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	r, _, _ = purego.SyscallN(n.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0])))
	if int32(r) != 0 {
		return ""
	}
	return trimNUL(buf)
}

// NVRTCInfo describes the NVRTC library kernels are compiled with.
type NVRTCInfo struct {
	Version    string // e.g. "13.0"
	Library    string // the file that was loaded, or its soname
	IncludeDir string // directory holding cuda_fp16.h, or "" if none was found
	Archs      []int  // supported SM versions (e.g. 90 for sm_90), if NVRTC reports them
}

// HasCUDAHeaders reports whether kernels may #include <cuda_fp16.h> and
// friends; compiled programs then also see -DBITDECODE_CUDA_HEADERS=1.
func (i NVRTCInfo) HasCUDAHeaders() bool { return i.IncludeDir != "" }

// NVRTC loads NVRTC (once) and describes it. The error wraps ErrNoNVRTC.
func NVRTC() (NVRTCInfo, error) {
	n, err := loadNVRTC()
	if err != nil {
		return NVRTCInfo{}, err
	}
	lib := n.path
	if lib == "" {
		lib = n.lib.name
	}
	return NVRTCInfo{Version: n.version(), Library: lib, IncludeDir: n.includeDir, Archs: n.archs}, nil
}

package cuda

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// libSpec says how to find one shared library: a Config field that, when
// set, names the only file to try, else sonames tried in order.
type libSpec struct {
	what     string              // for messages: "CUDA driver", "NVRTC", "cuBLASLt"
	override func(Config) string // the Config field (ParseConfig: BITDECODE_LIBCUDA, ...)
	names    []string            // sonames, newest first
}

// The libraries this package loads. Sonames follow the CUDA 13 and 12
// toolkits; the bare .so is the development symlink.
var (
	specDriver   = libSpec{"CUDA driver", func(c Config) string { return c.LibCUDA }, []string{"libcuda.so.1"}}
	specNVRTC    = libSpec{"NVRTC", func(c Config) string { return c.NVRTC }, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}}
	specCUBLASLt = libSpec{"cuBLASLt", func(c Config) string { return c.CUBLASLt }, []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}}
	// NCCL keeps soname libnccl.so.2 across CUDA versions.
	specNCCL = libSpec{"NCCL", func(c Config) string { return c.NCCL }, []string{"libnccl.so.2", "libnccl.so"}}
)

// candidates lists the files to try, in order.
func (s libSpec) candidates(c Config) []string {
	if p := strings.TrimSpace(s.override(c)); p != "" {
		return []string{p}
	}
	return s.names
}

// opener opens a shared library by name or path; dlopenNow in production,
// a fake in tests.
type opener func(name string) (uintptr, error)

// library is an opened shared library.
type library struct {
	name   string  // the name that opened, e.g. "libnvrtc.so.13"
	handle uintptr // dlopen handle
}

// openLibrary tries each candidate in order and returns the first that
// opens. The error lists every candidate with its reason, e.g.
// "libcuda.so.1: cannot open shared object file: No such file or directory".
func openLibrary(s libSpec, c Config, open opener) (*library, error) {
	var reasons []string
	for _, name := range s.candidates(c) {
		h, err := open(name)
		if err == nil {
			return &library{name: name, handle: h}, nil
		}
		msg := err.Error()
		if !strings.Contains(msg, name) {
			msg = name + ": " + msg
		}
		reasons = append(reasons, msg)
	}
	return nil, fmt.Errorf("%s", strings.Join(reasons, "; "))
}

// symbols binds functions of one library, remembering the first failure so
// a binding list reads as a flat sequence of assignments.
type symbols struct {
	lib *library
	err error
}

// need returns the address of a required symbol.
func (s *symbols) need(name string) uintptr {
	if s.err != nil {
		return 0
	}
	p, err := dlsym(s.lib.handle, name)
	if err != nil || p == 0 {
		s.err = fmt.Errorf("%s has no symbol %s (library too old?)", s.lib.name, name)
		return 0
	}
	return p
}

// first returns the address of the first of names that exists, else records
// an error naming all of them.
func (s *symbols) first(names ...string) uintptr {
	if s.err != nil {
		return 0
	}
	for _, n := range names {
		if p, err := dlsym(s.lib.handle, n); err == nil && p != 0 {
			return p
		}
	}
	s.err = fmt.Errorf("%s has none of the symbols %s (library too old?)", s.lib.name, strings.Join(names, ", "))
	return 0
}

// optional returns the address of a symbol, or 0.
func (s *symbols) optional(name string) uintptr {
	p, err := dlsym(s.lib.handle, name)
	if err != nil {
		return 0
	}
	return p
}

// loadedPath returns the file backing the first mapping of this process
// whose path contains substr (read from /proc/self/maps), or "".
func loadedPath(substr string) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := line[i:]
		if strings.Contains(path[strings.LastIndexByte(path, '/')+1:], substr) {
			return path
		}
	}
	return ""
}

// cstring returns s as a NUL-terminated byte slice for C.
func cstring(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// goString copies the NUL-terminated C string at p.
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}

// trimNUL cuts a C string held in a Go buffer at its first NUL.
func trimNUL(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

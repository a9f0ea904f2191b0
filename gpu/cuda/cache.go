package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Program is CUDA C++ source for NVRTC.
type Program struct {
	// Name is the source's file name, used in diagnostics and errors,
	// e.g. "decode_int4.cu".
	Name string
	// Source is the CUDA C++ text.
	Source string
	// Headers are files the source (or another header) may #include by
	// name, handed to NVRTC in memory (nvrtcCreateProgram's headers and
	// includeNames), e.g. gpu/kernels' shared bitdecode.cuh. They are part
	// of the cache key: a changed header compiles anew.
	Headers []Header
	// Exprs are name expressions of the kernels (or __device__ variables)
	// to instantiate and look up after compilation, e.g. "decode<128, 4>"
	// or "scale". extern "C" kernels need none.
	Exprs []string
	// Options are extra NVRTC options, e.g. "-DHEAD_DIM=128", "-lineinfo",
	// "--use_fast_math". The architecture, -std=c++17, -default-device and
	// the CUDA include path are added by Compile.
	Options []string
	// GridDependent declares that every kernel of the program may start
	// before the kernel queued ahead of it on its stream has finished
	// (programmatic dependent launch, compute capability 9.0 and later):
	// every thread of every kernel executes griddepcontrol.wait
	// (bitdecode.cuh's gridDependencyWait) before its first read of memory
	// an earlier kernel writes and before its first write of global memory.
	// [Ctx.Launch] launches the program's kernels with
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION while the Ctx
	// allows it ([Ctx.SetGridDependentLaunch]); kernels of programs without
	// it launch as plain cuLaunchKernel, which the attribute must never
	// reach. It is part of the cache key (so of the module a program
	// shares), not of the compiled code.
	GridDependent bool
}

// Header is one in-memory file a Program may #include "Name".
type Header struct {
	Name   string // the include name, e.g. "bitdecode.cuh"
	Source string // its text
}

// Cache file layout. An entry is a fixed header followed by the payload:
//
//	magic     [8]byte  "BDKCUBIN"
//	version   uint32   cacheFormatVersion
//	reserved  uint32   0
//	length    uint64   payload bytes
//	checksum  [32]byte SHA-256 of the payload
//	payload:  uint32 n; n × (uint32 len, expr, uint32 len, lowered name);
//	          uint64 len, CUBIN
//
// Integers are little-endian. An entry whose size, magic, version, checksum
// or structure does not match is treated as missing and rebuilt.
const (
	cacheMagic         = "BDKCUBIN"
	cacheFormatVersion = 1
	cacheHeaderBytes   = 8 + 4 + 4 + 8 + sha256.Size
	cacheFileExt       = ".bdk"
	cacheTempPrefix    = ".tmp-"
	cacheKeyDomain     = "bitdecode kernel cache v1"
	cacheMaxEntryBytes = 1 << 30 // a sanity bound on the length field
)

// cacheKey is the SHA-256 naming one cache entry.
type cacheKey [sha256.Size]byte

// makeCacheKey hashes everything that determines the CUBIN: the program's
// name, source, headers (names and texts) and name expressions, the full
// option list (which includes
// the architecture and include path), the NVRTC version and the
// architecture; and GridDependent, which the module loaded from it keeps. Each field is length-prefixed so no two inputs collide by
// concatenation.
func makeCacheKey(p Program, opts []string, nvrtcVersion, arch string) cacheKey {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	list := func(ss []string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(ss)))
		h.Write(n[:])
		for _, s := range ss {
			field(s)
		}
	}
	field(cacheKeyDomain)
	field(p.Name)
	field(p.Source)
	binary.LittleEndian.PutUint64(n[:], uint64(len(p.Headers)))
	h.Write(n[:])
	for _, hd := range p.Headers {
		field(hd.Name)
		field(hd.Source)
	}
	list(p.Exprs)
	list(opts)
	field(nvrtcVersion)
	field(arch)
	if p.GridDependent {
		// Last and only when set, so that every other program's key (and
		// its cache entry) stays what it was.
		field("grid-dependent")
	}
	var k cacheKey
	h.Sum(k[:0])
	return k
}

func (k cacheKey) String() string { return hex.EncodeToString(k[:]) }

// compileFunc compiles p for arch with the full option list; NVRTC in
// production, a fake in tests.
type compileFunc func(p Program, arch string, opts []string) (compiled, error)

// kernelCache puts a disk cache in front of a compiler.
type kernelCache struct {
	dir     string // "" disables the disk cache
	version string // compiler version, part of the key
	compile compileFunc
}

// get returns the compiled program from disk, or compiles and stores it.
// hit reports a disk hit. A failure to write the cache is not an error; it
// is remembered for CacheInfo.
func (k *kernelCache) get(p Program, arch string, opts []string) (c compiled, hit bool, err error) {
	if path := k.path(p, arch, opts); path != "" {
		if data, err := os.ReadFile(path); err == nil {
			if c, err := decodeEntry(data); err == nil && equalStrings(c.exprs, p.Exprs) {
				return c, true, nil
			}
		}
	}
	c, err = k.rebuild(p, arch, opts)
	return c, false, err
}

// rebuild compiles p, ignoring any entry on disk, and stores the result.
func (k *kernelCache) rebuild(p Program, arch string, opts []string) (compiled, error) {
	c, err := k.compile(p, arch, opts)
	if err != nil {
		return compiled{}, err
	}
	if len(c.lowered) != len(p.Exprs) {
		return compiled{}, fmt.Errorf("cuda: compile %s: %d lowered names for %d name expressions", p.Name, len(c.lowered), len(p.Exprs))
	}
	c.exprs = append([]string(nil), p.Exprs...)
	if path := k.path(p, arch, opts); path != "" {
		noteCacheWrite(k.dir, writeFileAtomic(path, encodeEntry(c)))
	}
	return c, nil
}

// path returns the entry's file, or "" when the disk cache is disabled.
func (k *kernelCache) path(p Program, arch string, opts []string) string {
	if k.dir == "" {
		return ""
	}
	return filepath.Join(k.dir, makeCacheKey(p, opts, k.version, arch).String()+cacheFileExt)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// encodeEntry serializes c in the cache file layout.
func encodeEntry(c compiled) []byte {
	var payload bytes.Buffer
	u32 := func(v int) { payload.Write(binary.LittleEndian.AppendUint32(nil, uint32(v))) }
	u32(len(c.exprs))
	for i, e := range c.exprs {
		u32(len(e))
		payload.WriteString(e)
		u32(len(c.lowered[i]))
		payload.WriteString(c.lowered[i])
	}
	payload.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(c.cubin))))
	payload.Write(c.cubin)

	p := payload.Bytes()
	sum := sha256.Sum256(p)
	out := make([]byte, 0, cacheHeaderBytes+len(p))
	out = append(out, cacheMagic...)
	out = binary.LittleEndian.AppendUint32(out, cacheFormatVersion)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	out = append(out, sum[:]...)
	return append(out, p...)
}

// errCorrupt is returned by decodeEntry for any malformed entry.
var errCorrupt = errors.New("cuda: corrupt kernel cache entry")

// decodeEntry parses and verifies one cache file.
func decodeEntry(data []byte) (compiled, error) {
	if len(data) < cacheHeaderBytes || string(data[:8]) != cacheMagic {
		return compiled{}, errCorrupt
	}
	if binary.LittleEndian.Uint32(data[8:]) != cacheFormatVersion {
		return compiled{}, errCorrupt
	}
	n := binary.LittleEndian.Uint64(data[16:])
	if n > cacheMaxEntryBytes || uint64(len(data)-cacheHeaderBytes) != n {
		return compiled{}, errCorrupt
	}
	p := data[cacheHeaderBytes:]
	if sha256.Sum256(p) != [sha256.Size]byte(data[24:cacheHeaderBytes]) {
		return compiled{}, errCorrupt
	}
	r := entryReader{b: p, ok: true}
	count := r.u32()
	if count > uint32(len(p)) {
		return compiled{}, errCorrupt
	}
	var c compiled
	for i := uint32(0); i < count && r.ok; i++ {
		c.exprs = append(c.exprs, string(r.bytes(uint64(r.u32()))))
		c.lowered = append(c.lowered, string(r.bytes(uint64(r.u32()))))
	}
	c.cubin = r.bytes(r.u64())
	if !r.ok || len(r.b) != 0 || len(c.cubin) == 0 {
		return compiled{}, errCorrupt
	}
	return c, nil
}

// entryReader reads little-endian fields, turning any overrun into ok=false.
type entryReader struct {
	b  []byte
	ok bool
}

func (r *entryReader) bytes(n uint64) []byte {
	if !r.ok || uint64(len(r.b)) < n {
		r.ok = false
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *entryReader) u32() uint32 {
	if b := r.bytes(4); len(b) == 4 {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *entryReader) u64() uint64 {
	if b := r.bytes(8); len(b) == 8 {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// writeFileAtomic writes data to a temporary file in path's directory and
// renames it over path, so readers see either no entry or a whole one even
// when several processes write the same entry at once.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cuda: kernel cache: %w", err)
	}
	f, err := os.CreateTemp(dir, cacheTempPrefix+"*")
	if err != nil {
		return fmt.Errorf("cuda: kernel cache: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("cuda: kernel cache: write %s: %w", path, werr)
	}
	return nil
}

// cacheWriteErrs holds, per cache directory, the last failure to write an
// entry in this process; a later successful write clears it.
var (
	cacheErrMu     sync.Mutex
	cacheWriteErrs = map[string]string{}
)

func noteCacheWrite(dir string, err error) {
	cacheErrMu.Lock()
	defer cacheErrMu.Unlock()
	if err == nil {
		delete(cacheWriteErrs, dir)
		return
	}
	cacheWriteErrs[dir] = err.Error()
}

// cacheDir returns the CUBIN cache directory: Config.CacheDir, else
// os.UserCacheDir()/bitdecode/kernels.
func cacheDir() (string, error) {
	if d := strings.TrimSpace(currentConfig(libNone).CacheDir); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cuda: kernel cache: %w (set %s)", err, EnvCacheDir)
	}
	return filepath.Join(base, "bitdecode", "kernels"), nil
}

// CacheStats describes the CUBIN cache on disk.
type CacheStats struct {
	Dir            string // the cache directory
	Entries        int    // number of cached programs
	Bytes          int64  // their total size
	LastWriteError string // the last failure to write an entry here in this process, if any
}

// CacheInfo reports the CUBIN cache's location and size. A cache directory
// that does not exist yet has no entries and is not an error.
func CacheInfo() (CacheStats, error) {
	dir, err := cacheDir()
	if err != nil {
		return CacheStats{}, err
	}
	st := CacheStats{Dir: dir}
	cacheErrMu.Lock()
	st.LastWriteError = cacheWriteErrs[dir]
	cacheErrMu.Unlock()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("cuda: kernel cache: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), cacheFileExt) || strings.HasPrefix(e.Name(), cacheTempPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		st.Entries++
		st.Bytes += fi.Size()
	}
	return st, nil
}

package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeCompiler produces a deterministic "CUBIN" from its inputs and counts
// its calls.
type fakeCompiler struct {
	calls atomic.Int64
	fail  error
}

func (f *fakeCompiler) compile(p Program, arch string, opts []string) (compiled, error) {
	f.calls.Add(1)
	if f.fail != nil {
		return compiled{}, f.fail
	}
	c := compiled{cubin: []byte("CUBIN:" + arch + ":" + strings.Join(opts, " ") + ":" + p.Source)}
	for _, e := range p.Exprs {
		c.lowered = append(c.lowered, "_Z"+strings.NewReplacer("<", "I", ">", "E", ", ", "_").Replace(e))
	}
	return c, nil
}

var testProgram = Program{
	Name:   "scale.cu",
	Source: "template<int N> __global__ void scale(float* y) {}",
	Exprs:  []string{"scale<1>", "scale<4>"},
}

var testOpts = []string{"--gpu-architecture=sm_90a", "-std=c++17"}

func TestCacheKeySensitivity(t *testing.T) {
	base := makeCacheKey(testProgram, testOpts, "13.0", "sm_90a")
	if again := makeCacheKey(testProgram, append([]string(nil), testOpts...), "13.0", "sm_90a"); again != base {
		t.Fatal("cache key is not deterministic")
	}
	p := testProgram
	variants := map[string]cacheKey{}
	p.Source += " "
	variants["source"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p = testProgram
	p.Exprs = []string{"scale<1>"}
	variants["exprs"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p.Exprs = []string{"scale<4>", "scale<1>"}
	variants["expr order"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p = testProgram
	p.Name = "other.cu"
	variants["name"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p.Headers = []Header{{Name: "shared.cuh", Source: "// v1"}}
	withHeader := makeCacheKey(p, testOpts, "13.0", "sm_90a")
	variants["a header"] = withHeader
	p.Headers = []Header{{Name: "shared.cuh", Source: "// v2"}}
	variants["a header's text"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p.Headers = []Header{{Name: "other.cuh", Source: "// v1"}}
	variants["a header's name"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p.Headers = []Header{{Name: "shared.cuh", Source: "// v1"}, {Name: "more.cuh"}}
	variants["another header"] = makeCacheKey(p, testOpts, "13.0", "sm_90a")
	p.Headers = []Header{{Name: "shared.cuh", Source: "// v1"}}
	if makeCacheKey(p, testOpts, "13.0", "sm_90a") != withHeader {
		t.Error("the same header twice gives two keys")
	}
	variants["options"] = makeCacheKey(testProgram, append(append([]string(nil), testOpts...), "-DX=1"), "13.0", "sm_90a")
	variants["nvrtc version"] = makeCacheKey(testProgram, testOpts, "12.8", "sm_90a")
	variants["arch"] = makeCacheKey(testProgram, testOpts, "13.0", "sm_80")
	// Length prefixes: moving a boundary between fields changes the key.
	variants["option split"] = makeCacheKey(testProgram, []string{"--gpu-architecture=sm_90a-std=c++17"}, "13.0", "sm_90a")
	for what, k := range variants {
		if k == base {
			t.Errorf("changing the %s does not change the key", what)
		}
	}
}

func TestCacheMissThenHit(t *testing.T) {
	dir := t.TempDir()
	fc := &fakeCompiler{}
	kc := &kernelCache{dir: dir, version: "13.0", compile: fc.compile}

	c1, hit, err := kc.get(testProgram, "sm_90a", testOpts)
	if err != nil || hit {
		t.Fatalf("first get: hit=%v err=%v", hit, err)
	}
	c2, hit, err := kc.get(testProgram, "sm_90a", testOpts)
	if err != nil || !hit {
		t.Fatalf("second get: hit=%v err=%v", hit, err)
	}
	if fc.calls.Load() != 1 {
		t.Errorf("compiler ran %d times, want 1", fc.calls.Load())
	}
	if !bytes.Equal(c1.cubin, c2.cubin) || !equalStrings(c1.lowered, c2.lowered) || !equalStrings(c2.exprs, testProgram.Exprs) {
		t.Errorf("cached entry differs: %+v vs %+v", c1, c2)
	}
	if c2.lowered[1] != "_Z"+"scaleI4E" {
		t.Errorf("lowered name %q not kept", c2.lowered[1])
	}
	// Another architecture is another entry.
	if _, hit, _ := kc.get(testProgram, "sm_80", testOpts); hit {
		t.Error("sm_80 hit the sm_90a entry")
	}
	assertNoTempFiles(t, dir)

	setCacheDir(t, dir)
	st, err := CacheInfo()
	if err != nil {
		t.Fatal(err)
	}
	if st.Dir != dir || st.Entries != 2 || st.Bytes <= 0 {
		t.Errorf("CacheInfo = %+v, want 2 entries in %s", st, dir)
	}
}

func TestCacheRebuildsCorruptEntries(t *testing.T) {
	corruptions := []struct {
		name string
		mod  func([]byte) []byte
	}{
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-3] }},
		{"truncated header", func(b []byte) []byte { return b[:cacheHeaderBytes-1] }},
		{"empty file", func([]byte) []byte { return nil }},
		{"flipped cubin byte", func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b }},
		{"flipped checksum byte", func(b []byte) []byte { b[30] ^= 1; return b }},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"future version", func(b []byte) []byte { b[8] = 9; return b }},
		{"trailing garbage", func(b []byte) []byte { return append(b, 0) }},
		{"huge length", func(b []byte) []byte {
			copy(b[16:24], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
			return b
		}},
	}
	for _, tc := range corruptions {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fc := &fakeCompiler{}
			kc := &kernelCache{dir: dir, version: "13.0", compile: fc.compile}
			want, _, err := kc.get(testProgram, "sm_90a", testOpts)
			if err != nil {
				t.Fatal(err)
			}
			path := kc.path(testProgram, "sm_90a", testOpts)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.mod(data), 0o644); err != nil {
				t.Fatal(err)
			}
			got, hit, err := kc.get(testProgram, "sm_90a", testOpts)
			if err != nil || hit {
				t.Fatalf("get after corruption: hit=%v err=%v (want a rebuild)", hit, err)
			}
			if fc.calls.Load() != 2 || !bytes.Equal(got.cubin, want.cubin) {
				t.Errorf("calls=%d, cubin equal=%v", fc.calls.Load(), bytes.Equal(got.cubin, want.cubin))
			}
			// The rebuild repaired the entry.
			if _, hit, _ := kc.get(testProgram, "sm_90a", testOpts); !hit {
				t.Error("entry not repaired after rebuild")
			}
		})
	}
}

func TestDecodeEntryRoundTrip(t *testing.T) {
	c := compiled{cubin: []byte{0x7f, 'E', 'L', 'F', 0, 1}, exprs: []string{"a<1>", ""}, lowered: []string{"_Z1aILi1EEvv", "b"}}
	got, err := decodeEntry(encodeEntry(c))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.cubin, c.cubin) || !equalStrings(got.exprs, c.exprs) || !equalStrings(got.lowered, c.lowered) {
		t.Errorf("round trip: got %+v, want %+v", got, c)
	}
	// Every strict prefix is rejected.
	enc := encodeEntry(c)
	for n := 0; n < len(enc); n++ {
		if _, err := decodeEntry(enc[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("prefix of %d bytes accepted", n)
		}
	}
}

func TestCacheExprMismatchRecompiles(t *testing.T) {
	// An entry whose stored name expressions differ from the request (a
	// different format or a hash collision) is not trusted.
	dir := t.TempDir()
	fc := &fakeCompiler{}
	kc := &kernelCache{dir: dir, version: "13.0", compile: fc.compile}
	path := kc.path(testProgram, "sm_90a", testOpts)
	os.WriteFile(path, encodeEntry(compiled{cubin: []byte("x"), exprs: []string{"other"}, lowered: []string{"o"}}), 0o644)
	if _, hit, err := kc.get(testProgram, "sm_90a", testOpts); hit || err != nil {
		t.Errorf("hit=%v err=%v, want a recompile", hit, err)
	}
}

func TestCacheCompileErrorNotStored(t *testing.T) {
	dir := t.TempDir()
	want := &CompileError{Program: "bad.cu", Log: "error: x"}
	fc := &fakeCompiler{fail: want}
	kc := &kernelCache{dir: dir, version: "13.0", compile: fc.compile}
	if _, _, err := kc.get(testProgram, "sm_90a", testOpts); err != want {
		t.Fatalf("err = %v, want %v", err, want)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("failed compile left %d files", len(ents))
	}
}

func TestCacheConcurrentWriters(t *testing.T) {
	// Several caches (standing in for processes) fill the same entry at once.
	dir := t.TempDir()
	var wg sync.WaitGroup
	var hits, misses atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc := &fakeCompiler{}
			kc := &kernelCache{dir: dir, version: "13.0", compile: fc.compile}
			for i := 0; i < 20; i++ {
				c, hit, err := kc.get(testProgram, "sm_90a", testOpts)
				if err != nil || !bytes.HasPrefix(c.cubin, []byte("CUBIN:")) {
					t.Errorf("get: %v (cubin %q)", err, c.cubin)
					return
				}
				if hit {
					hits.Add(1)
				} else {
					misses.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if hits.Load() == 0 {
		t.Error("no goroutine ever hit the cache")
	}
	assertNoTempFiles(t, dir)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in the cache, want 1", len(ents))
	}
}

func TestCacheUnwritableDirStillCompiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o644)
	fc := &fakeCompiler{}
	kc := &kernelCache{dir: filepath.Join(file, "kernels"), version: "13.0", compile: fc.compile}
	if _, _, err := kc.get(testProgram, "sm_90a", testOpts); err != nil {
		t.Fatalf("get with an unwritable cache: %v", err)
	}
	setCacheDir(t, kc.dir)
	st, _ := CacheInfo()
	if st.LastWriteError == "" {
		t.Error("the write failure was not recorded")
	}
	setCacheDir(t, t.TempDir())
	if st, _ := CacheInfo(); st.LastWriteError != "" {
		t.Errorf("another directory reports the failure: %q", st.LastWriteError)
	}
}

func TestCacheDirDefault(t *testing.T) {
	setCacheDir(t, "")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-test")
	d, err := cacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if d != "/tmp/xdg-test/bitdecode/kernels" {
		t.Errorf("cacheDir = %q", d)
	}
	setCacheDir(t, "/elsewhere")
	if d, _ := cacheDir(); d != "/elsewhere" {
		t.Errorf("override: cacheDir = %q", d)
	}
	setCacheDir(t, "/does/not/exist/yet")
	if st, err := CacheInfo(); err != nil || st.Entries != 0 {
		t.Errorf("CacheInfo of a missing dir = %+v, %v", st, err)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), cacheTempPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

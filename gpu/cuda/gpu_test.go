package cuda

// GPU tests. Each starts with testDevice, which skips with
// "no CUDA driver: ..." where libcuda.so.1 cannot be loaded or no GPU is
// present. Build them here and run them on the GPU machine:
//
//	CGO_ENABLED=0 go test -c -o .gpu/cuda.test ./gpu/cuda
//	./cuda.test -test.v            # on the GPU machine
//
// TestMain prints one summary line naming the device (or why there is none).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuErr  error
)

func TestMain(m *testing.M) {
	// The test binary is a program's edge: it configures the package from
	// the environment, and keeps the GPU tests' kernels out of the user's
	// cache unless BITDECODE_CACHE_DIR names one.
	cfg, err := ParseConfig(os.LookupEnv)
	if err != nil {
		fmt.Println("gpu/cuda:", err)
		os.Exit(2)
	}
	tmpCache := ""
	if cfg.CacheDir == "" {
		if dir, err := os.MkdirTemp("", "bitdecode-cuda-test-"); err == nil {
			tmpCache = dir
			cfg.CacheDir = dir
		}
	}
	if err := Configure(cfg); err != nil {
		fmt.Println("gpu/cuda:", err)
		os.Exit(2)
	}
	code := m.Run()
	if gpuDev != nil {
		fmt.Printf("gpu/cuda: GPU tests ran on device 0: %s (%s, %d SMs)\n", gpuDev.Name(), gpuDev.Arch(), gpuDev.SMs())
		if err := gpuDev.Close(); err != nil {
			fmt.Println("gpu/cuda: Close:", err)
			code = 1
		}
	} else if gpuErr != nil {
		fmt.Printf("gpu/cuda: GPU tests skipped: %v\n", gpuErr)
	}
	if tmpCache != "" {
		os.RemoveAll(tmpCache)
	}
	os.Exit(code)
}

// testDevice opens device 0 once for all tests, or skips.
func testDevice(t *testing.T) *Device {
	t.Helper()
	gpuOnce.Do(func() { gpuDev, gpuErr = Open(0) })
	if errors.Is(gpuErr, ErrNoDriver) || errors.Is(gpuErr, ErrNoDevice) {
		// Reads "no CUDA driver: libcuda.so.1: cannot open shared object file: ...".
		t.Skip(strings.TrimPrefix(gpuErr.Error(), "cuda: "))
	}
	if gpuErr != nil {
		t.Fatalf("Open(0): %v", gpuErr)
	}
	return gpuDev
}

// compileTest compiles src on d, skipping when NVRTC is missing.
func compileTest(t *testing.T, d *Device, p Program) *Module {
	t.Helper()
	m, err := d.Compile(p)
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatalf("Compile %s: %v", p.Name, err)
	}
	return m
}

func fn(t *testing.T, m *Module, name string) Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatalf("Function(%q): %v", name, err)
	}
	return f
}

var uniqueSeq atomic.Int64

// uniqueComment returns a source line that makes a program distinct from
// every other in this process, so it is compiled and loaded afresh.
func uniqueComment() string {
	return fmt.Sprintf("\n// unique %d %d\n", os.Getpid(), uniqueSeq.Add(1))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func f32s(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func TestGPUInfo(t *testing.T) {
	d := testDevice(t)
	in, err := d.Info(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", in)
	if in.Name == "" || in.SMs <= 0 || in.MemTotalBytes == 0 || in.MemFreeBytes == 0 || in.MemFreeBytes > in.MemTotalBytes ||
		in.L2Bytes <= 0 || in.SharedPerBlockOptinBytes < 48<<10 || in.ComputeMajor < 5 || in.DriverVersion == "" {
		t.Errorf("implausible info: %+v", in)
	}
	if in.ComputeMajor == 9 && in.ComputeMinor == 0 && in.Arch != "sm_90a" {
		t.Errorf("Hopper arch = %q, want sm_90a", in.Arch)
	}
	if in.NVRTCError != "" || in.CUBLASLtError != "" {
		t.Errorf("libraries missing on a GPU machine: nvrtc=%q cublasLt=%q", in.NVRTCError, in.CUBLASLtError)
	}
}

func TestGPUAllocCopyRoundTrip(t *testing.T) {
	d := testDevice(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 3, 4096, 1<<20 + 7} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		err := d.Do(func(c *Ctx) error {
			a, err := c.Alloc(n)
			if err != nil {
				return err
			}
			defer c.Free(a)
			b, err := c.Alloc(n)
			if err != nil {
				return err
			}
			defer c.Free(b)
			if err := c.HtoD(a, src); err != nil {
				return err
			}
			if err := c.DtoD(b, a, n); err != nil {
				return err
			}
			got := make([]byte, n)
			if err := c.DtoH(got, b); err != nil {
				return err
			}
			if !bytes.Equal(got, src) {
				return fmt.Errorf("%d bytes: sync round trip differs", n)
			}
			// Async path on the device stream, with memsets.
			s := d.Stream()
			if err := c.Memset8Async(b, 0xab, n, s); err != nil {
				return err
			}
			if err := c.HtoDAsync(a, src, s); err != nil {
				return err
			}
			if err := c.DtoDAsync(b, a, n/2, s); err != nil {
				return err
			}
			clear(got)
			if err := c.DtoHAsync(got, b, s); err != nil {
				return err
			}
			if err := c.SyncStream(s); err != nil {
				return err
			}
			for i := range got {
				want := src[i]
				if i >= n/2 {
					want = 0xab
				}
				if got[i] != want {
					return fmt.Errorf("%d bytes: async byte %d = %#x, want %#x", n, i, got[i], want)
				}
			}
			if n%4 == 0 {
				if err := c.Memset32(b, 0xdeadbeef, n/4); err != nil {
					return err
				}
				if err := c.DtoH(got, b); err != nil {
					return err
				}
				if binary.LittleEndian.Uint32(got[n-4:]) != 0xdeadbeef {
					return fmt.Errorf("Memset32 did not fill")
				}
			}
			return nil
		})
		must(t, err)
	}
	// Device convenience methods from another goroutine than the owner.
	p, err := d.Alloc(64)
	must(t, err)
	must(t, d.HtoD(p, []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")))
	got := make([]byte, 64)
	must(t, d.DtoH(got, p))
	must(t, d.Free(p))
	if got[63] != 'f' {
		t.Errorf("convenience round trip: %q", got)
	}
}

func TestGPUOutOfMemoryError(t *testing.T) {
	d := testDevice(t)
	_, err := d.Alloc(1 << 50) // 1 PiB
	var ce *Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc_v2" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("Alloc(1 PiB) = %v, want a cuMemAlloc_v2 CUDA_ERROR_OUT_OF_MEMORY *Error", err)
	}
	t.Logf("%v", err)
}

func TestGPUConcurrentCallers(t *testing.T) {
	d := testDevice(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				want := []byte(fmt.Sprintf("goroutine %02d call %02d", g, i))
				p, err := d.Alloc(len(want))
				if err == nil {
					err = d.HtoD(p, want)
				}
				got := make([]byte, len(want))
				if err == nil {
					err = d.DtoH(got, p)
				}
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("got %q, want %q", got, want)
				}
				if ferr := d.Free(p); err == nil {
					err = ferr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// templateSource exercises name expressions, a struct passed by value and
// every scalar argument type.
const templateSource = `
struct Affine {        // passed by value; mirrored by affineArgs in the test
    float scale;
    float shift;
    int   n;
};

// y[j] = x[j]*scale + shift for j < n; each thread handles kVec elements.
template <int kVec, typename T>
__global__ void affine(T* __restrict__ y, const T* __restrict__ x, Affine p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
        const int j = i * kVec + v;
        if (j < p.n) y[j] = (T)((float)x[j] * p.scale + p.shift);
    }
}

// Writes each scalar argument back, so the test sees what the kernel got.
extern "C" __global__ void echo(long long* out, int a, unsigned int b, float c,
                                long long d, double e, unsigned short f,
                                signed char g, unsigned long long h) {
    out[0] = a; out[1] = b; out[2] = (long long)(c * 1000.0f); out[3] = d;
    out[4] = (long long)(e * 1000.0); out[5] = f; out[6] = g; out[7] = (long long)h;
}
`

type affineArgs struct {
	Scale, Shift float32
	N            int32
}

func structBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

func TestGPUCompileTemplateLaunch(t *testing.T) {
	d := testDevice(t)
	exprs := []string{"affine<4, float>", "affine<1, int>"}
	m := compileTest(t, d, Program{Name: "affine.cu", Source: templateSource, Exprs: exprs})
	for _, e := range exprs {
		l, ok := m.LoweredName(e)
		if !ok || !strings.HasPrefix(l, "_Z") {
			t.Errorf("lowered name of %q = %q, %v", e, l, ok)
		}
	}
	if m2 := compileTest(t, d, Program{Name: "affine.cu", Source: templateSource, Exprs: exprs}); m2 != m {
		t.Error("compiling the same program twice gave two modules")
	}
	const n = 1000 // not a multiple of the block or vector size
	x := make([]float32, n)
	xi := make([]int32, n)
	for i := range x {
		x[i] = float32(i) * 0.5
		xi[i] = int32(i)
	}
	fF := fn(t, m, "affine<4, float>")
	fI := fn(t, m, "affine<1, int>")
	gotF := make([]float32, n)
	gotI := make([]int32, n)
	must(t, d.Do(func(c *Ctx) error {
		bx, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(bx)
		by, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(by)
		s := d.Stream()
		p := affineArgs{Scale: 2, Shift: 1, N: n}
		const block = 128
		if err := c.HtoD(bx, Bytes(x)); err != nil {
			return err
		}
		if err := c.Memset32(by, 0x7fc00000, n); err != nil { // NaN poison
			return err
		}
		if err := c.Launch(fF, Dim3{X: (n/4 + block) / block}, Dim3{X: block}, 0, s, by, bx, structBytes(&p)); err != nil {
			return err
		}
		if err := c.DtoHAsync(Bytes(gotF), by, s); err != nil {
			return err
		}
		if err := c.HtoD(bx, Bytes(xi)); err != nil {
			return err
		}
		p = affineArgs{Scale: 3, Shift: -5, N: n}
		if err := c.Launch(fI, Dim3{X: (n + block - 1) / block}, Dim3{X: block}, 0, s, by, bx, structBytes(&p)); err != nil {
			return err
		}
		if err := c.DtoHAsync(Bytes(gotI), by, s); err != nil {
			return err
		}
		return c.SyncStream(s)
	}))
	for i := range n {
		if want := x[i]*2 + 1; gotF[i] != want {
			t.Fatalf("affine<4, float>: y[%d] = %g, want %g", i, gotF[i], want)
		}
		if want := int32(float32(i)*3 - 5); gotI[i] != want {
			t.Fatalf("affine<1, int>: y[%d] = %d, want %d", i, gotI[i], want)
		}
	}
	// Unknown names fail clearly.
	if _, err := m.Function("affine<8, float>"); err == nil || !strings.Contains(err.Error(), "affine<8, float>") {
		t.Errorf("Function of an unlisted expression: %v", err)
	}
}

func TestGPUScalarArgs(t *testing.T) {
	d := testDevice(t)
	m := compileTest(t, d, Program{Name: "affine.cu", Source: templateSource, Exprs: []string{"affine<4, float>", "affine<1, int>"}})
	echo := fn(t, m, "echo")
	got := make([]int64, 8)
	must(t, d.Do(func(c *Ctx) error {
		out, err := c.Alloc(64)
		if err != nil {
			return err
		}
		defer c.Free(out)
		if err := c.Launch(echo, Dim3{X: 1}, Dim3{X: 1}, 0, 0, out, int32(-7), uint32(4000000000), float32(1.5),
			int64(-1<<40), float64(2.25), uint16(65535), int8(-3), uint64(1<<62)); err != nil {
			return err
		}
		return c.DtoH(Bytes(got), out)
	}))
	want := []int64{-7, 4000000000, 1500, -1 << 40, 2250, 65535, -3, 1 << 62}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arg %d: kernel saw %d, want %d", i, got[i], want[i])
		}
	}
	// A launch error names the kernel: a block larger than the hardware allows.
	err := d.Launch(echo, Dim3{X: 1}, Dim3{X: 4096}, 0, 0, DevicePtr(0), int32(0), uint32(0), float32(0), int64(0), float64(0), uint16(0), int8(0), uint64(0))
	var ce *Error
	if !errors.As(err, &ce) || ce.Kernel != "echo" || ce.Call != "cuLaunchKernel" {
		t.Errorf("oversized launch = %v, want a cuLaunchKernel error naming echo", err)
	}
	t.Logf("%v", err)
}

func TestGPUCompileError(t *testing.T) {
	d := testDevice(t)
	_, err := d.Compile(Program{Name: "broken.cu", Source: "__global__ void k(float* y) { y[0] = undefined_thing; }", Exprs: []string{"k"}})
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC: %v", err)
	}
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Compile(broken) = %v, want *CompileError", err)
	}
	msg := err.Error()
	for _, want := range []string{"broken.cu", "[k]", d.Arch(), "NVRTC_ERROR_COMPILATION", "undefined_thing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	t.Logf("%v", err)
}

func TestGPUKernelCacheOnDisk(t *testing.T) {
	d := testDevice(t)
	setCacheDir(t, t.TempDir())
	p := Program{Name: "cached.cu", Source: "extern \"C\" __global__ void nop() {}\n" + uniqueComment()}
	m := compileTest(t, d, p)
	if m.FromCache() {
		t.Error("first compile in an empty cache came from the cache")
	}
	st, err := CacheInfo()
	if err != nil || st.Entries != 1 || st.LastWriteError != "" {
		t.Fatalf("CacheInfo after one compile = %+v, %v", st, err)
	}
	// A second Device has no in-memory module, so it reads the disk entry.
	d2, err := Open(0)
	must(t, err)
	defer d2.Close()
	m2 := compileTest(t, d2, p)
	if !m2.FromCache() {
		t.Error("second device recompiled instead of reading the cache")
	}
	f := fn(t, m2, "nop")
	must(t, d2.Launch(f, Dim3{X: 1}, Dim3{X: 32}, 0, d2.Stream()))
	must(t, d2.Synchronize())
	// Closing the second Device leaves the first one working.
	must(t, d2.Close())
	if _, err := d2.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close = %v, want ErrClosed", err)
	}
	if _, err := m2.Function("nop"); err == nil {
		t.Error("Function on a closed device's module succeeded")
	}
	p2, err := d.Alloc(16)
	must(t, err)
	must(t, d.Free(p2))
}

// TestGPUCompileWithHeaders compiles a program whose source includes an
// in-memory header that includes another, then checks that a changed
// header is a new compilation (cache key) and not the old module.
func TestGPUCompileWithHeaders(t *testing.T) {
	d := testDevice(t)
	setCacheDir(t, t.TempDir())
	src := `#include "outer.cuh"
extern "C" __global__ void scaled(float* y) { y[threadIdx.x] = scaledOf(float(threadIdx.x)); }` + uniqueComment()
	headers := func(k string) []Header {
		return []Header{
			{Name: "outer.cuh", Source: "#pragma once\n#include \"inner.cuh\"\n__device__ float scaledOf(float x) { return x * kFactor; }\n"},
			{Name: "inner.cuh", Source: "#pragma once\nconstexpr float kFactor = " + k + ";\n"},
		}
	}
	run := func(p Program) []float32 {
		m := compileTest(t, d, p)
		y, err := d.Alloc(32 * 4)
		must(t, err)
		defer d.Free(y)
		must(t, d.Launch(fn(t, m, "scaled"), Dim3{X: 1}, Dim3{X: 32}, 0, d.Stream(), y))
		must(t, d.Synchronize())
		out := make([]byte, 32*4)
		must(t, d.DtoH(out, y))
		return f32s(out)
	}
	for _, k := range []string{"2.f", "3.f"} {
		got := run(Program{Name: "headers.cu", Source: src, Headers: headers(k)})
		want := float32(2)
		if k == "3.f" {
			want = 3
		}
		for i, v := range got {
			if v != want*float32(i) {
				t.Fatalf("kFactor %s: y[%d] = %g, want %g", k, i, v, want*float32(i))
			}
		}
	}
}

// TestGPUCompileInsideDo compiles from inside a Do while another goroutine
// compiles the same program: the other goroutine needs the owner thread to
// load its module, so the owner must not wait for it.
func TestGPUCompileInsideDo(t *testing.T) {
	d := testDevice(t)
	if _, err := NVRTC(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	p := Program{Name: "inside.cu", Source: templateSource + uniqueComment(), Exprs: []string{"affine<4, float>"}}
	done := make(chan error, 1)
	go func() {
		done <- d.Do(func(c *Ctx) error {
			other := make(chan error, 1)
			go func() { _, err := d.Compile(p); other <- err }()
			time.Sleep(5 * time.Millisecond) // let it claim the program
			m, err := d.Compile(p)
			if err != nil {
				return err
			}
			_, err = c.Function(m, "affine<4, float>")
			if err != nil {
				return err
			}
			go func() { done <- <-other }()
			return nil
		})
	}()
	timeout := time.After(2 * time.Minute)
	for range 2 {
		select {
		case err := <-done:
			must(t, err)
		case <-timeout:
			t.Fatal("deadlock: Compile inside Do waited for another goroutine's build")
		}
	}
}

func TestGPUCUDAHeaders(t *testing.T) {
	d := testDevice(t)
	info, err := NVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("NVRTC %s from %s, include dir %q, archs %v", info.Version, info.Library, info.IncludeDir, info.Archs)
	if !info.HasCUDAHeaders() {
		t.Skip("no CUDA include directory found; kernels must not include cuda_fp16.h")
	}
	src := `
#ifndef BITDECODE_CUDA_HEADERS
#error "BITDECODE_CUDA_HEADERS should be defined when headers are found"
#endif
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void to_half(__half* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(x[i]);
}`
	m := compileTest(t, d, Program{Name: "half.cu", Source: src})
	f := fn(t, m, "to_half")
	x := []float32{0, 1, -2, 0.1, 65504, 1e-7, 3.14159}
	got := make([]uint16, len(x))
	must(t, d.Do(func(c *Ctx) error {
		bx, _ := c.Alloc(64)
		by, _ := c.Alloc(64)
		defer c.Free(bx)
		defer c.Free(by)
		c.HtoD(bx, Bytes(x))
		if err := c.Launch(f, Dim3{X: 1}, Dim3{X: 32}, 0, 0, by, bx, int32(len(x))); err != nil {
			return err
		}
		return c.DtoH(Bytes(got), by)
	}))
	for i, v := range x {
		if want := f32ToF16(v); got[i] != want {
			t.Errorf("__float2half_rn(%g) = %#04x, Go reference %#04x", v, got[i], want)
		}
	}
}

const timingSource = `
// Busy-waits about cycles clock ticks, so there is something to time.
extern "C" __global__ void spin(long long cycles, int* out) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

// y[i] = y[i]*0.5 + i: a step whose repetition is order-sensitive.
extern "C" __global__ void step(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] * 0.5f + (float)i;
}

// dst[i] = 3*host[i]; host[i] += 1 (host is mapped pinned memory).
extern "C" __global__ void mapped_rw(int* dst, int* host, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { dst[i] = 3 * host[i]; host[i] += 1; }
}

// Sums n floats through dynamic shared memory (needs the opt-in above 48 KiB).
extern "C" __global__ void smem_sum(float* out, int n) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int i = 0; i < n; ++i) s += buf[i];
        out[0] = s;
    }
}
`

func timingModule(t *testing.T, d *Device) *Module {
	return compileTest(t, d, Program{Name: "timing.cu", Source: timingSource})
}

func TestGPUEventTiming(t *testing.T) {
	d := testDevice(t)
	spin := fn(t, timingModule(t, d), "spin")
	var ms float32
	must(t, d.Do(func(c *Ctx) error {
		out, err := c.Alloc(4 * 4)
		if err != nil {
			return err
		}
		defer c.Free(out)
		start, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(start)
		end, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(end)
		s := d.Stream()
		c.Record(start, s)
		if err := c.Launch(spin, Dim3{X: 4}, Dim3{X: 32}, 0, s, int64(2_000_000), out); err != nil {
			return err
		}
		c.Record(end, s)
		ms, err = c.ElapsedMS(start, end)
		return err
	}))
	t.Logf("spin of 2e6 cycles: %.3f ms", ms)
	if !(ms > 0.1 && ms < 1000) {
		t.Errorf("elapsed %g ms for ~2e6 cycles, want roughly a millisecond", ms)
	}
}

func TestGPUGraphReplay(t *testing.T) {
	d := testDevice(t)
	step := fn(t, timingModule(t, d), "step")
	const n, perGraph, replays = 5000, 3, 4
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(i%17) - 8
	}
	direct := make([]float32, n)
	graphed := make([]float32, n)
	must(t, d.Do(func(c *Ctx) error {
		a, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(a)
		b, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(b)
		s := d.Stream()
		grid, block := Dim3{X: (n + 255) / 256}, Dim3{X: 256}
		c.HtoD(a, Bytes(init))
		c.HtoD(b, Bytes(init))
		for i := 0; i < perGraph*replays; i++ {
			if err := c.Launch(step, grid, block, 0, s, a, int32(n)); err != nil {
				return err
			}
		}
		if err := c.BeginCapture(s); err != nil {
			return err
		}
		for i := 0; i < perGraph; i++ {
			if err := c.Launch(step, grid, block, 0, s, b, int32(n)); err != nil {
				c.EndCapture(s)
				return err
			}
		}
		g, err := c.EndCapture(s)
		if err != nil {
			return err
		}
		defer c.DestroyGraph(g)
		for i := 0; i < replays; i++ {
			if err := c.LaunchGraph(g, s); err != nil {
				return err
			}
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		if err := c.DtoH(Bytes(direct), a); err != nil {
			return err
		}
		return c.DtoH(Bytes(graphed), b)
	}))
	if !bytes.Equal(Bytes(direct), Bytes(graphed)) {
		for i := range direct {
			if direct[i] != graphed[i] {
				t.Fatalf("graph replay differs at %d: %g vs direct %g", i, graphed[i], direct[i])
			}
		}
	}
	if direct[n-1] == init[n-1] {
		t.Error("kernel had no effect")
	}
}

func TestGPUMappedHostMemory(t *testing.T) {
	d := testDevice(t)
	rw := fn(t, timingModule(t, d), "mapped_rw")
	const n = 10000
	got := make([]int32, n)
	var after []int32
	must(t, d.Do(func(c *Ctx) error {
		h, err := c.AllocHost(4*n, true)
		if err != nil {
			return err
		}
		defer c.FreeHost(h)
		if h.DevicePtr() == 0 || h.Len() != 4*n {
			return fmt.Errorf("mapped buffer: devptr %#x len %d", h.DevicePtr(), h.Len())
		}
		host := unsafe.Slice((*int32)(unsafe.Pointer(&h.Bytes()[0])), n)
		for i := range host {
			host[i] = int32(i) - 50
		}
		dst, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(dst)
		if err := c.Launch(rw, Dim3{X: (n + 255) / 256}, Dim3{X: 256}, 0, d.Stream(), dst, h.DevicePtr(), int32(n)); err != nil {
			return err
		}
		if err := c.SyncStream(d.Stream()); err != nil {
			return err
		}
		after = append([]int32(nil), host...)
		// Unmapped pinned memory as an async copy target.
		pinned, err := c.AllocHost(4*n, false)
		if err != nil {
			return err
		}
		defer c.FreeHost(pinned)
		if err := c.DtoHAsync(pinned.Bytes(), dst, d.Stream()); err != nil {
			return err
		}
		if err := c.SyncStream(d.Stream()); err != nil {
			return err
		}
		copy(Bytes(got), pinned.Bytes())
		return nil
	}))
	for i := range n {
		if want := 3 * (int32(i) - 50); got[i] != want {
			t.Fatalf("kernel read mapped host[%d] as %d, want %d", i, got[i]/3, want/3)
		}
		if want := int32(i) - 49; after[i] != want {
			t.Fatalf("kernel write to mapped host[%d] = %d, want %d", i, after[i], want)
		}
	}
}

func TestGPUDynamicSharedAndOccupancy(t *testing.T) {
	d := testDevice(t)
	// A fresh module, so the opt-in below is not left over from an earlier run.
	m := compileTest(t, d, Program{Name: "smem.cu", Source: timingSource + uniqueComment()})
	f := fn(t, m, "smem_sum")
	const sharedBytes = 100 << 10
	if d.MaxSharedPerBlock() < sharedBytes {
		t.Skipf("device allows %d shared bytes per block", d.MaxSharedPerBlock())
	}
	var sum float32
	must(t, d.Do(func(c *Ctx) error {
		out, err := c.Alloc(4)
		if err != nil {
			return err
		}
		defer c.Free(out)
		// Without the opt-in the launch must fail...
		if err := c.Launch(f, Dim3{X: 1}, Dim3{X: 256}, sharedBytes, 0, out, int32(sharedBytes/4)); err == nil {
			return errors.New("launch with 100 KiB dynamic shared memory succeeded without opting in")
		}
		// ...and with it succeed.
		if err := c.SetMaxDynamicShared(f, sharedBytes); err != nil {
			return err
		}
		fi, err := c.FuncInfo(f)
		if err != nil {
			return err
		}
		blocks, err := c.MaxActiveBlocksPerSM(f, 256, sharedBytes)
		if err != nil {
			return err
		}
		t.Logf("smem_sum: %+v, %d blocks/SM with 100 KiB", fi, blocks)
		if fi.Registers <= 0 || blocks < 1 {
			return fmt.Errorf("FuncInfo %+v, blocks/SM %d", fi, blocks)
		}
		if err := c.Launch(f, Dim3{X: 1}, Dim3{X: 256}, sharedBytes, 0, out, int32(sharedBytes/4)); err != nil {
			return err
		}
		b := make([]byte, 4)
		if err := c.DtoH(b, out); err != nil {
			return err
		}
		sum = f32s(b)[0]
		return nil
	}))
	if sum != sharedBytes/4 {
		t.Errorf("sum = %g, want %d", sum, sharedBytes/4)
	}
}

// gemmCase runs one GEMM on random data and compares against a float64
// reference computed from the same rounded inputs.
func gemmCase(t *testing.T, d *Device, g GEMMShape, offsetBytes int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(g.M*1_000_003+g.N), uint64(g.K)))
	round := f32ToF16
	widen := f16ToF32
	if g.In == BF16 {
		round, widen = f32ToBF16, bf16ToF32
	}
	x := make([]uint16, g.M*g.K)
	w := make([]uint16, g.N*g.K)
	for i := range x {
		x[i] = round(float32(rng.Float64()*2 - 1))
	}
	for i := range w {
		w[i] = round(float32(rng.Float64()*2 - 1))
	}
	ref := make([]float64, g.M*g.N)
	for m := 0; m < g.M; m++ {
		xr := x[m*g.K : (m+1)*g.K]
		for n := 0; n < g.N; n++ {
			wr := w[n*g.K : (n+1)*g.K]
			var s float64
			for k := range xr {
				s += float64(widen(xr[k])) * float64(widen(wr[k]))
			}
			ref[m*g.N+n] = s
		}
	}
	yBytes := g.M * g.N * g.Out.Size()
	yRaw := make([]byte, yBytes)
	must(t, d.Do(func(c *Ctx) error {
		bufBytes := 2*(len(x)+len(w)) + yBytes + 3*offsetBytes
		base, err := c.Alloc(bufBytes)
		if err != nil {
			return err
		}
		defer c.Free(base)
		px := base + DevicePtr(offsetBytes)
		pw := px + DevicePtr(2*len(x)) + DevicePtr(offsetBytes)
		py := pw + DevicePtr(2*len(w)) + DevicePtr(offsetBytes)
		if err := c.HtoD(px, Bytes(x)); err != nil {
			return err
		}
		if err := c.HtoD(pw, Bytes(w)); err != nil {
			return err
		}
		if err := c.Memset8(py, 0xff, yBytes); err != nil { // NaN poison in every output type
			return err
		}
		s := d.Stream()
		if err := c.GEMM(s, g, py, px, pw); err != nil {
			return err
		}
		// The second call reuses the cached plan.
		if err := c.GEMM(s, g, py, px, pw); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		return c.DtoH(yRaw, py)
	}))
	rel := checkGEMMOutput(t, fmt.Sprintf("%+v", g), g.N, ref, func(i int) float64 {
		switch g.Out {
		case F16:
			return float64(f16ToF32(binary.LittleEndian.Uint16(yRaw[2*i:])))
		case BF16:
			return float64(bf16ToF32(binary.LittleEndian.Uint16(yRaw[2*i:])))
		}
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(yRaw[4*i:])))
	}, 5)
	t.Logf("%v x %v -> %v M=%d N=%d K=%d (offset %d): relative error %.2e", g.In, g.In, g.Out, g.M, g.N, g.K, offsetBytes, rel)
}

// checkGEMMOutput checks a GEMM's outputs got(i), row-major with n columns,
// against the float64 reference want: every output written (no NaN or Inf
// left from the poison), each within 1% of the reference's RMS plus 1% of
// itself (the first maxReport misses reported), and the relative Frobenius
// error below 1%; it returns that error.
func checkGEMMOutput(t *testing.T, what string, n int, want []float64, got func(i int) float64, maxReport int) float64 {
	t.Helper()
	var refSS, errSS float64
	for _, r := range want {
		refSS += r * r
	}
	rms := math.Sqrt(refSS / float64(len(want)))
	bad := 0
	for i, r := range want {
		y := got(i)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			t.Fatalf("%s: Y[%d,%d] = %g (output not written)", what, i/n, i%n, y)
		}
		e := y - r
		errSS += e * e
		if math.Abs(e) > 1e-2*rms+1e-2*math.Abs(r) {
			if bad++; bad <= maxReport {
				t.Errorf("%s: Y[%d,%d] = %g, want %g", what, i/n, i%n, y, r)
			}
		}
	}
	rel := math.Sqrt(errSS / refSS)
	if rel >= 1e-2 {
		t.Errorf("%s: relative Frobenius error %.3e >= 1e-2", what, rel)
	}
	return rel
}

func TestGPUGEMM(t *testing.T) {
	d := testDevice(t)
	if _, err := CUBLASLtVersion(); err != nil {
		t.Skipf("no cuBLASLt: %v", err)
	}
	tests := []struct {
		g      GEMMShape
		offset int
	}{
		{GEMMShape{M: 3, N: 4096, K: 4096, In: F16, Out: F16}, 0},
		{GEMMShape{M: 64, N: 1024, K: 512, In: F16, Out: F16}, 0},
		{GEMMShape{M: 3, N: 4096, K: 4096, In: F16, Out: F32}, 0},
		{GEMMShape{M: 64, N: 1024, K: 512, In: BF16, Out: BF16}, 0},
		{GEMMShape{M: 64, N: 1024, K: 512, In: BF16, Out: F32}, 0},
		{GEMMShape{M: 5, N: 136, K: 72, In: F16, Out: F16}, 16}, // 16-byte aligned sub-buffers
	}
	for _, tt := range tests {
		gemmCase(t, d, tt.g, tt.offset)
	}
}

func TestGPUGEMMInGraph(t *testing.T) {
	d := testDevice(t)
	if _, err := CUBLASLtVersion(); err != nil {
		t.Skipf("no cuBLASLt: %v", err)
	}
	g := GEMMShape{M: 8, N: 256, K: 128, In: F16, Out: F32}
	x := make([]uint16, g.M*g.K)
	w := make([]uint16, g.N*g.K)
	for i := range x {
		x[i] = f32ToF16(float32(i%7) - 3)
	}
	for i := range w {
		w[i] = f32ToF16(float32(i%5) * 0.25)
	}
	direct := make([]float32, g.M*g.N)
	graphed := make([]float32, g.M*g.N)
	must(t, d.Do(func(c *Ctx) error {
		px, _ := c.Alloc(2 * len(x))
		pw, _ := c.Alloc(2 * len(w))
		py, _ := c.Alloc(4 * g.M * g.N)
		defer c.Free(px)
		defer c.Free(pw)
		defer c.Free(py)
		c.HtoD(px, Bytes(x))
		c.HtoD(pw, Bytes(w))
		s := d.Stream()
		if err := c.GEMM(s, g, py, px, pw); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		c.DtoH(Bytes(direct), py)
		c.Memset8(py, 0xff, 4*g.M*g.N)
		if err := c.BeginCapture(s); err != nil {
			return err
		}
		if err := c.GEMM(s, g, py, px, pw); err != nil {
			c.EndCapture(s)
			return err
		}
		gr, err := c.EndCapture(s)
		if err != nil {
			return err
		}
		defer c.DestroyGraph(gr)
		if err := c.LaunchGraph(gr, s); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		return c.DtoH(Bytes(graphed), py)
	}))
	if !bytes.Equal(Bytes(direct), Bytes(graphed)) {
		t.Error("GEMM replayed from a graph differs from the direct call")
	}
}

func TestGPUBandwidthProbe(t *testing.T) {
	d := testDevice(t)
	bw, err := d.ProbeBandwidth()
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	in, _ := d.Info(false)
	t.Logf("read bandwidth %.0f GB/s (median %.3f ms, min %.3f, max %.3f over %d runs of %d MiB); theoretical peak %.0f GB/s",
		bw.GBps, bw.MedianMS, bw.MinMS, bw.MaxMS, bw.Runs, bw.Bytes>>20, in.PeakGBps())
	if !(bw.GBps > 0) || bw.Bytes < 1<<30 {
		t.Errorf("bandwidth %+v", bw)
	}
	if peak := in.PeakGBps(); peak > 0 && bw.GBps > 1.05*peak {
		t.Errorf("measured %.0f GB/s exceeds the theoretical %.0f GB/s: the probe is not reading memory", bw.GBps, peak)
	}
}

// pdlSource is a GridDependent program: produce triggers its dependents at
// once, then spins before writing a, so a dependent started early would read
// a's old contents unless it waits; consume waits (griddepcontrol.wait)
// before reading a.
const pdlSource = `
extern "C" __global__ void produce(float* a, int n, long long spin) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {}
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = a[i] + 1.0f;
}
extern "C" __global__ void consume(float* b, const float* a, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = b[i] + a[i];
}
`

// TestGPUGridDependentLaunch runs chains of produce and consume launched as
// programmatic dependents, directly and as a captured graph replayed
// several times, and checks every element against the serial result; the
// producer's spin after its trigger makes a missing wait visible.
func TestGPUGridDependentLaunch(t *testing.T) {
	d := testDevice(t)
	if maj, _ := d.ComputeCapability(); maj < 9 {
		t.Skipf("programmatic dependent launch needs compute capability 9.0 (device %s)", d.Arch())
	}
	plain := compileTest(t, d, Program{Name: "plain.cu", Source: `extern "C" __global__ void k() {}` + uniqueComment()})
	if fn(t, plain, "k").GridDependent() {
		t.Error("a kernel of a program without GridDependent reports GridDependent")
	}
	m := compileTest(t, d, Program{Name: "pdl.cu", Source: pdlSource + uniqueComment(), GridDependent: true})
	produce, consume := fn(t, m, "produce"), fn(t, m, "consume")
	if !produce.GridDependent() || !consume.GridDependent() {
		t.Fatal("kernels of a GridDependent program do not report GridDependent")
	}
	const n, rounds, replays = 1 << 16, 6, 3
	const spin = 20000 // clocks, ~10 us: far longer than a launch
	grid, block := Dim3{X: 64}, Dim3{X: 256}
	run := func(graph bool) (a, b []float32) {
		a, b = make([]float32, n), make([]float32, n)
		must(t, d.Do(func(c *Ctx) error {
			if !c.GridDependentLaunch() {
				return fmt.Errorf("programmatic dependent launch is off on a %s", d.Arch())
			}
			pa, err := c.Alloc(4 * n)
			if err != nil {
				return err
			}
			defer c.Free(pa)
			pb, err := c.Alloc(4 * n)
			if err != nil {
				return err
			}
			defer c.Free(pb)
			s := d.Stream()
			if err := c.Memset32Async(pa, 0, n, s); err != nil {
				return err
			}
			if err := c.Memset32Async(pb, 0, n, s); err != nil {
				return err
			}
			queue := func() error {
				for r := 0; r < rounds; r++ {
					if err := c.Launch(produce, grid, block, 0, s, pa, int32(n), int64(spin)); err != nil {
						return err
					}
					if err := c.Launch(consume, grid, block, 0, s, pb, pa, int32(n)); err != nil {
						return err
					}
				}
				return nil
			}
			if graph {
				if err := c.BeginCapture(s); err != nil {
					return err
				}
				qerr := queue()
				g, err := c.EndCapture(s)
				if qerr != nil {
					return qerr
				}
				if err != nil {
					return err
				}
				defer c.DestroyGraph(g)
				for i := 0; i < replays; i++ {
					if err := c.LaunchGraph(g, s); err != nil {
						return err
					}
				}
			} else if err := queue(); err != nil {
				return err
			}
			if err := c.SyncStream(s); err != nil {
				return err
			}
			if err := c.DtoH(Bytes(a), pa); err != nil {
				return err
			}
			return c.DtoH(Bytes(b), pb)
		}))
		return a, b
	}
	for _, graph := range []bool{false, true} {
		calls := 1
		if graph {
			calls = replays
		}
		// After k produce/consume pairs a = k and b = 1 + 2 + ... + k.
		k := rounds * calls
		wantA, wantB := float32(k), float32(k*(k+1)/2)
		a, b := run(graph)
		for i := range a {
			if a[i] != wantA || b[i] != wantB {
				t.Fatalf("graph=%v: element %d: a = %g, b = %g, want %g and %g (a dependent read before its predecessor finished)", graph, i, a[i], b[i], wantA, wantB)
			}
		}
	}
}

package cuda

// Tests of the NCCL binding: settings, the error when the library is
// missing, NVLink multicast off in libc's environment (CPU), and a
// one-rank communicator on GPU 0 (skips without a GPU or NCCL). Groups of
// several GPUs are tested in backend/gpu (group_test.go).

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

func TestParseConfigNCCL(t *testing.T) {
	c := env(map[string]string{EnvLibNCCL: "  /opt/nccl/lib/libnccl.so.2 "})
	if c.NCCL != "/opt/nccl/lib/libnccl.so.2" {
		t.Errorf("NCCL = %q, want the trimmed path", c.NCCL)
	}
	if got := specNCCL.candidates(c); len(got) != 1 || got[0] != c.NCCL {
		t.Errorf("candidates with the override = %v, want only it", got)
	}
	if got := specNCCL.candidates(env(nil)); strings.Join(got, " ") != "libnccl.so.2 libnccl.so" {
		t.Errorf("default candidates = %v", got)
	}
}

func TestNoNCCLSaysWhatToDo(t *testing.T) {
	const missing = "/nonexistent/bitdecode/libnccl.so.2"
	_, err := openNCCL(env(map[string]string{EnvLibNCCL: missing}), dlopenNow)
	if !errors.Is(err, ErrNoNCCL) {
		t.Fatalf("openNCCL(%s) = %v, want ErrNoNCCL", missing, err)
	}
	for _, want := range []string{"cuda: no NCCL: ", missing, "pip install nvidia-nccl-cu13", EnvLibNCCL} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	open, tried := fakeOpener()
	_, err = openNCCL(env(nil), open)
	if !errors.Is(err, ErrNoNCCL) || strings.Join(*tried, " ") != "libnccl.so.2 libnccl.so" {
		t.Errorf("without the library: err = %v after trying %v", err, *tried)
	}
	t.Log(err)
}

func TestNCCLResultName(t *testing.T) {
	for code, want := range map[int]string{0: "ncclSuccess", 4: "ncclInvalidArgument", 6: "ncclRemoteError", 7: "ncclInProgress", 8: "ncclTimeout", 42: "ncclResult_42"} {
		if got := ncclResultName(code); got != want {
			t.Errorf("ncclResultName(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestNCCLEnvNVLSOff sets NCCL_NVLS_ENABLE=1 in libc's environment (as a
// user's shell would) and checks that setNCCLEnv, which runs before NCCL
// loads, turns it off where NCCL reads it.
func TestNCCLEnvNVLSOff(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("libc.so.6 is Linux's")
	}
	libc, err := dlopenNow("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	setenv, err := dlsym(libc, "setenv")
	if err != nil {
		t.Fatal(err)
	}
	set := func(v string) {
		name, value := cstring("NCCL_NVLS_ENABLE"), cstring(v)
		purego.SyscallN(setenv, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(&value[0])), 1)
		runtime.KeepAlive(name)
		runtime.KeepAlive(value)
	}
	set("1")
	t.Cleanup(func() { set("0") }) // whatever happens, never leave it on for NCCL

	if got := cgetenv("NCCL_NVLS_ENABLE"); got != "1" {
		t.Fatalf("libc's NCCL_NVLS_ENABLE = %q after setenv 1", got)
	}
	if err := setNCCLEnv(); err != nil {
		t.Fatal(err)
	}
	if got := cgetenv("NCCL_NVLS_ENABLE"); got != "0" {
		t.Fatalf("libc's NCCL_NVLS_ENABLE = %q after setNCCLEnv, want 0", got)
	}
}

// TestGPUNCCLOneRank makes a communicator of one rank on GPU 0 and sums a
// buffer in place: the sum of one rank is its part, bit for bit.
func TestGPUNCCLOneRank(t *testing.T) {
	d := testDevice(t)
	v, err := NCCLVersion()
	if errors.Is(err, ErrNoNCCL) {
		t.Skipf("%v", err)
	}
	must(t, err)
	t.Logf("NCCL %s", v)
	if got := cgetenv("NCCL_NVLS_ENABLE"); got != "0" {
		t.Fatalf("NCCL loaded with NCCL_NVLS_ENABLE=%q in libc's environment, want 0", got)
	}
	id, err := NewNCCLUniqueID()
	must(t, err)
	const n = 1023
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i) - 511.25
	}
	got := make([]float32, n)
	err = d.Do(func(c *Ctx) error {
		m, err := c.NCCLInit(id, 1, 0)
		if err != nil {
			return err
		}
		defer c.NCCLDestroy(m)
		if m.Rank() != 0 || m.Ranks() != 1 {
			t.Errorf("rank %d of %d, want 0 of 1", m.Rank(), m.Ranks())
		}
		p, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.HtoD(p, Bytes(host)); err != nil {
			return err
		}
		s := d.Stream()
		if err := c.AllReduceSumF32(m, p, n, s); err != nil {
			return err
		}
		for {
			done, err := c.StreamDone(s)
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		if err := m.AsyncError(); err != nil {
			return err
		}
		if err := c.AllReduceSumF32(m, p, -1, s); err == nil {
			t.Error("AllReduceSumF32 of -1 values: no error")
		}
		return c.DtoH(Bytes(got), p)
	})
	must(t, err)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(host[i]) {
			t.Fatalf("element %d: %g, want %g", i, got[i], host[i])
		}
	}
}

package cuda

import (
	"testing"
	"unsafe"
)

// TestLaunchConfigLayout pins the Go mirrors of cuda.h's CUlaunchConfig and
// CUlaunchAttribute to the C layout (x86-64 and arm64 Linux, CUDA 12-13).
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
		{"CUlaunchConfig.sharedMemBytes", unsafe.Offsetof(c.sharedBytes), 24},
		{"CUlaunchConfig.hStream", unsafe.Offsetof(c.stream), 32},
		{"CUlaunchConfig.attrs", unsafe.Offsetof(c.attrs), 40},
		{"CUlaunchConfig.numAttrs", unsafe.Offsetof(c.numAttrs), 48},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"CUlaunchAttribute.value", unsafe.Offsetof(a.val), 8},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
		}
	}
}

// TestCacheKeyGridDependent checks that GridDependent separates two
// otherwise equal programs (they share modules by key) and leaves the key
// of a program without it unchanged by the field's existence.
func TestCacheKeyGridDependent(t *testing.T) {
	p := Program{Name: "a.cu", Source: "__global__ void k() {}"}
	q := p
	q.GridDependent = true
	opts := []string{"--gpu-architecture=sm_90"}
	if makeCacheKey(p, opts, "13.0", "sm_90") == makeCacheKey(q, opts, "13.0", "sm_90") {
		t.Error("GridDependent does not change the cache key")
	}
	if makeCacheKey(q, opts, "13.0", "sm_90") != makeCacheKey(q, opts, "13.0", "sm_90") {
		t.Error("the key of a GridDependent program is not stable")
	}
}

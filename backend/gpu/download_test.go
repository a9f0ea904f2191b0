// download_test.go: Download through the pinned chunk ring (download.go)
// returns every bit the pageable copy does, at chunk sizes that split the
// tensor unevenly, and the option parses.

package gpu_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// TestPinnedDownload: float32 tensors of 4 MiB and more (random values,
// NaNs, infinities and subnormals among them) downloaded through the ring
// at 64 KiB (many chunks, the last short), 3 MiB (a ring of two slots
// reused) and the default 8 MiB chunks (one chunk, or several), into
// slices poisoned with NaN, equal the uploaded
// bits; a tensor under 4 MiB and an fp16 tensor still come back whole.
func TestPinnedDownload(t *testing.T) {
	sizes := []int{1 << 20, 1<<20 + 12345, 7_054_080} // 4 MiB, 4 MiB + 49380 B, 55 x 128256
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, kib := range []int{64, 3072, 0} { // 0: the default, 8 MiB (one chunk, or four of 55 x 128256)
		o := options
		o.DownloadChunkKiB = kib
		be, err := gpu.Open(0, o)
		if err != nil {
			if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
				t.Skipf("no CUDA device: %v", err)
			}
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(kib)+1, 7))
		for _, n := range append(sizes, 1000) {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(rng.NormFloat64() * 8)
			}
			for i, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))} {
				src[(i*7919+1)%n] = v
			}
			src[n-1] = 42.5 // the last element of a short last chunk
			x, err := be.Alloc(backend.F32, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.Upload(x, src); err != nil {
				t.Fatal(err)
			}
			// Twice: the second reuses the ring's slots and events.
			for rep := range 2 {
				got := make([]float32, n)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				if err := be.Download(got, x); err != nil {
					t.Fatalf("chunk %d KiB, n %d: %v", kib, n, err)
				}
				for i := range src {
					if math.Float32bits(got[i]) != math.Float32bits(src[i]) {
						t.Fatalf("chunk %d KiB, n %d, download %d: [%d] = %v (%#x), want %v (%#x)", kib, n, rep, i, got[i], math.Float32bits(got[i]), src[i], math.Float32bits(src[i]))
					}
				}
			}
			be.Free(x)
		}
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseDownloadChunk(t *testing.T) {
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvDownloadChunk: "4096"})); err != nil || o.DownloadChunkKiB != 4096 {
		t.Errorf("%s=4096: %d, %v", gpu.EnvDownloadChunk, o.DownloadChunkKiB, err)
	}
	if o, err := gpu.ParseOptions(env(nil)); err != nil || o.DownloadChunkKiB != 0 {
		t.Errorf("default: %d, %v; want 0 (the default chunk)", o.DownloadChunkKiB, err)
	}
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvDownloadChunk: "0"})); err != nil || o.DownloadChunkKiB >= 0 {
		t.Errorf("%s=0: %d, %v; want a negative value (pageable)", gpu.EnvDownloadChunk, o.DownloadChunkKiB, err)
	}
	for _, v := range []string{"-1", "big", "2000000"} {
		_, err := gpu.ParseOptions(env(map[string]string{gpu.EnvDownloadChunk: v}))
		var ve *kernels.VarError
		if !errors.As(err, &ve) || ve.Name != gpu.EnvDownloadChunk || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: err = %v, want a VarError naming it", gpu.EnvDownloadChunk, v, err)
		}
	}
}

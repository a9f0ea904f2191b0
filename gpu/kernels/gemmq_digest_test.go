package kernels_test

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// envGEMMQDigests names a file of gemmq.cu's output digests
// (TestGEMMQDigest): written where it does not exist, compared with where
// it does.
const envGEMMQDigests = "BITDECODE_GEMMQ_DIGESTS"

// TestGEMMQDigest runs gemmq.cu over fixed int4 and int3 weights and x
// (17 to 128 rows, every int4/int3 tiling at splits 1, 3 and the rule's,
// with a bias) into NaN-poisoned outputs, asserts that every output is
// written and finite, and logs an FNV-1a digest of each launch's float32
// bits. With BITDECODE_GEMMQ_DIGESTS=FILE it writes the digests to FILE
// if FILE does not exist, and otherwise asserts that they equal FILE's:
// run once with one build, then with another, to check that a change
// keeps the bits (session 16: int8's forms in gemmq.cu against main's
// int4 and int3 kernels). It uses only the API gemmq.go had before int8,
// so that the same file builds into both binaries.
func TestGEMMQDigest(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMMQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(16, 88))
	var lines []string
	for _, c := range []struct {
		e       wq.Elem
		G, N, K int
	}{{wq.Int4, 128, 2100, 1152}, {wq.Int3, 128, 2100, 1152}, {wq.Int4, 256, 1000, 4096}, {wq.Int3, 128, 300, 14336}} {
		bits := c.e.Bits()
		m := newGPUMem(t, d)
		qm := gemvqWeight(t, r, c.e, c.G, c.N, c.K)
		const maxT = 128
		x := gemvqX(r, maxT, c.K)
		bias := make([]float32, c.N)
		for i := range bias {
			bias[i] = float32(r.NormFloat64())
		}
		tw, tp, err := kernels.PackTiles(bits, c.N, c.K, c.G, qm.Words, qm.Params)
		if err != nil {
			t.Fatal(err)
		}
		twp, tpp := m.put(cuda.Bytes(tw)), m.put(cuda.Bytes(tp))
		xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
		for _, T := range []int{17, 40, 64, 100, 128} {
			for ci := -1; ci < 3; ci++ {
				for _, splits := range []int{0, 1, 3} {
					if ci < 0 && splits > 0 {
						continue
					}
					g.Config, g.Splits = ci, splits
					sp := m.put(cuda.Bytes(nanF32(g.ScratchBytes(T, c.N, c.K, bits) / 4)))
					yp := m.put(cuda.Bytes(nanF32(T * c.N)))
					m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
						return g.Launch(cx, s, yp, xp, twp, tpp, bp, sp, T, c.N, c.K, bits, c.G)
					})
					g.Config, g.Splits = -1, 0
					got := make([]float32, T*c.N)
					m.read(cuda.Bytes(got), yp)
					h := fnv.New64a()
					var w [4]byte
					for i, v := range got {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("int%d N %d K %d T=%d config %d splits %d: y[%d] = %g", bits, c.N, c.K, T, ci, splits, i, v)
						}
						u := math.Float32bits(v)
						w[0], w[1], w[2], w[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
						h.Write(w[:])
					}
					lines = append(lines, fmt.Sprintf("int%d g%d N%d K%d T=%d config %d splits %d: %016x", bits, c.G, c.N, c.K, T, ci, splits, h.Sum64()))
				}
			}
		}
	}
	for _, l := range lines {
		t.Log(l)
	}
	path := os.Getenv(envGEMMQDigests)
	if path == "" {
		return
	}
	out := []byte(strings.Join(lines, "\n") + "\n")
	old, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d digests to %s", len(lines), path)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, out) {
		ol := strings.Split(strings.TrimSpace(string(old)), "\n")
		for i, l := range lines {
			if i >= len(ol) || ol[i] != l {
				want := "(none)"
				if i < len(ol) {
					want = ol[i]
				}
				t.Errorf("digest %d: %s, %s has %s", i, l, path, want)
			}
		}
		t.Fatalf("gemmq.cu's outputs differ from %s's (%d and %d digests)", path, len(lines), len(ol))
	}
	t.Logf("%d digests equal %s's", len(lines), path)
}

package kernels_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// linearSweepBytes is how many bytes of weight copies a wide sweep shape
// rotates through (twice the H100's 50 MB L2: every launch reads DRAM).
const linearSweepBytes = 200 << 20

// TestLinearWideSweep times (no assertion of speed; it fails only on a
// launch error) the wide kernels on Llama-3.1-8B's layer shapes at 55, 100
// and 256 rows: v3 (Linear.WideV3), the tiled kernel at every token tile
// and cluster size (ForceWide) in 64-k stages, BN 128 without a cluster in
// 128-k stages (ForceWideStage), BN 64 in the deep ring at clusters of 2
// (ForceWideDeep), and tiledFor's choice without and with early
// weight loads (Linear.EarlyWeights), each the median of
// 20 launches (x's conversion included) over weight copies in rotation.
// A tool for choosing the tile and cluster rule (docs/perf/decode-step.md
// v32); runs only with BITDECODE_WIDE_SWEEP=1.
func TestLinearWideSweep(t *testing.T) {
	if os.Getenv("BITDECODE_WIDE_SWEEP") == "" {
		t.Skip("BITDECODE_WIDE_SWEEP=1 times the wide kernels")
	}
	d, l := linearSetup(t)
	_, ops := opsSetup(t)
	defer l.ForceWide(0, 0)
	defer l.ForceWideStage(0)
	defer l.ForceWideDeep(0)
	defer func() { l.WideV3, l.EarlyWeights = false, false }()
	shapes := []struct {
		name string
		Ns   []int
		K    int
	}{
		{"o", []int{4096}, 4096}, {"qkv", []int{4096, 1024, 1024}, 4096},
		{"gate+up", []int{14336, 14336}, 4096}, {"down", []int{4096}, 14336}, {"lm_head", []int{128256}, 4096},
	}
	Ts := []int{55, 100, 256}
	const maxT = 256
	for _, sh := range shapes {
		err := d.Do(func(c *cuda.Ctx) error {
			st := d.Stream()
			var frees []cuda.DevicePtr
			defer func() {
				for _, p := range frees {
					c.Free(p)
				}
			}()
			alloc := func(n int) (cuda.DevicePtr, error) {
				p, err := c.Alloc(n)
				if err == nil {
					frees = append(frees, p)
				}
				return p, err
			}
			total := 0
			for _, N := range sh.Ns {
				total += N
			}
			bytes := 2 * total * sh.K
			copies := max(1, (linearSweepBytes+bytes-1)/bytes)
			ws := make([][]cuda.DevicePtr, copies)
			for i := range ws {
				for j, N := range sh.Ns {
					p, err := alloc(2 * N * sh.K)
					if err != nil {
						return err
					}
					if err := ops.FillNormalF16(c, st, p, N*sh.K, uint32(100*i+j+1), 0.02); err != nil {
						return err
					}
					ws[i] = append(ws[i], p)
				}
			}
			xp, err := alloc(4 * maxT * sh.K)
			if err != nil {
				return err
			}
			xh, err := alloc(2 * maxT * sh.K)
			if err != nil {
				return err
			}
			// x: N(0, 1) in fp16 pairs, read as float32 (finite, not zero).
			if err := ops.FillNormalF16(c, st, xp, 2*maxT*sh.K, 7, 1); err != nil {
				return err
			}
			var ys []cuda.DevicePtr
			for _, N := range sh.Ns {
				p, err := alloc(4 * maxT * N)
				if err != nil {
					return err
				}
				ys = append(ys, p)
			}
			for _, T := range Ts {
				time := func() (float64, error) {
					return c.MedianUS(st, 3, 20, func(i int) error {
						gs := make([]kernels.LinearGroup, len(sh.Ns))
						for j, N := range sh.Ns {
							gs[j] = kernels.LinearGroup{Y: ys[j], W: ws[i%copies][j], N: N}
						}
						return l.LaunchGroups(c, st, xp, xh, T, sh.K, gs...)
					})
				}
				var b strings.Builder
				fmt.Fprintf(&b, "sweep %-8s %5dx%-5d T=%-3d", sh.name, total, sh.K, T)
				l.WideV3 = true
				us, err := time()
				if err != nil {
					return err
				}
				fmt.Fprintf(&b, " v3 %6.1f |", us)
				l.WideV3 = false
				l.ForceWideStage(64)
				for _, bn := range []int{64, 128} {
					for _, S := range []int{1, 2, 4, 8} {
						if !l.HasWideSplit(S) {
							continue
						}
						l.ForceWide(bn, S)
						if us, err = time(); err != nil {
							return err
						}
						fmt.Fprintf(&b, " %d/%d %6.1f", bn, S, us)
					}
					b.WriteString(" |")
				}
				if l.HasWideDeep() {
					l.ForceWideDeep(1)
					if us, err = time(); err != nil {
						return err
					}
					fmt.Fprintf(&b, " 64/2d %6.1f |", us)
					l.ForceWideDeep(-1)
				}
				l.ForceWide(128, 1)
				l.ForceWideStage(128)
				if us, err = time(); err != nil {
					return err
				}
				fmt.Fprintf(&b, " 128/1/k128 %6.1f |", us)
				l.ForceWideStage(0)
				l.ForceWide(0, 0)
				l.ForceWideDeep(0)
				if us, err = time(); err != nil {
					return err
				}
				tiles := 0
				for _, N := range sh.Ns {
					tiles += (N + 15) / 16
				}
				bn, S, ks, deep := l.WideChoice(T, tiles)
				fmt.Fprintf(&b, " auto %d/%d/k%d/deep=%v %6.1f us (%.0f%% of 3000 GB/s)", bn, S, ks, deep, us, float64(bytes)/us/1e3/3000*100)
				l.EarlyWeights = true
				if us, err = time(); err != nil {
					return err
				}
				l.EarlyWeights = false
				fmt.Fprintf(&b, " | auto early %6.1f", us)
				t.Log(b.String())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

package kernels_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
)

// TestGPUPackMatchesGo packs full residual blocks on the GPU and compares
// every byte with kv's Go packer in mma order: codes, scales, zeros, padding.
func TestGPUPackMatchesGo(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(41, 42))
	const hkv = 3
	for _, spec := range []string{"fp16", "bf16", "int8", "int4", "int4:kt32:v32", "int4:ktd", "int2", "int2:kc32:v32", "k4v2", "k8v4", "int4:kc64:res64"} {
		for _, dim := range kernels.HeadDims {
			f := kv.MustResolve(spec, dim).WithOrder(kv.MMA)
			n := f.Residual * dim
			resK, resV := make([]uint16, hkv*n), make([]uint16, hkv*n)
			k, v := kvtest.KeysValues(r, hkv*f.Residual, 1, dim)
			for i := range resK {
				resK[i], resV[i] = half.FromFloat32(k[i]), half.FromFloat32(v[i])
			}
			want := make([]byte, hkv*f.BlockBytes())
			for h := 0; h < hkv; h++ {
				b := want[h*f.BlockBytes():]
				f.K.Pack(b[:f.K.Bytes], resK[h*n:(h+1)*n])
				f.V.Pack(b[f.K.Bytes:f.K.Bytes+f.V.Bytes], resV[h*n:(h+1)*n])
			}
			srcK := cuda.Bytes(kernels.ResidualOrder(kernels.DecodeMMA, f, resK, false))
			srcV := cuda.Bytes(kernels.ResidualOrder(kernels.DecodeMMA, f, resV, true))
			// Three heads are cut into slices of words; one slice per half
			// is the path of launches of many heads.
			for _, slices := range []int{0, 1} {
				plan, err := kernels.PlanPackWith(d, f, kernels.PackTuning{Slices: slices})
				if err != nil {
					t.Fatalf("%s D=%d: %v", spec, dim, err)
				}
				got := make([]byte, len(want))
				err = withBuffers(d, [][]byte{srcK, srcV, make([]byte, len(want))}, func(c *cuda.Ctx, p []cuda.DevicePtr) error {
					if err := plan.Launch(c, d.Stream(), p[0], p[1], p[2], hkv); err != nil {
						return err
					}
					if err := c.SyncStream(d.Stream()); err != nil {
						return err
					}
					return c.DtoH(got, p[2])
				})
				if err != nil {
					t.Fatalf("%s D=%d slices %d: %v", spec, dim, slices, err)
				}
				if !bytes.Equal(got, want) {
					i := 0
					for got[i] == want[i] {
						i++
					}
					t.Fatalf("%s D=%d slices %d: GPU-packed block differs from the Go packer first at byte %d (head %d, offset %d): %#02x vs %#02x",
						spec, dim, slices, i, i/f.BlockBytes(), i%f.BlockBytes(), got[i], want[i])
				}
			}
		}
	}
}

// TestGPUPackTime logs the time to pack one block per KV head for 1 and
// 128 sequences at Hkv=8, D=128 (the bench reports it beside the decode step).
func TestGPUPackTime(t *testing.T) {
	d := device(t)
	for _, spec := range []string{"int4", "int2", "int8"} {
		f := kv.MustResolve(spec, 128).WithOrder(kv.MMA)
		plan, err := kernels.PlanPackWith(d, f, tuning.Pack)
		if err != nil {
			t.Fatal(err)
		}
		for _, seqs := range []int{1, 128} {
			heads := 8 * seqs
			src := make([]byte, heads*f.Residual*128*2)
			for i := 0; i < len(src); i += 2 {
				src[i+1] = 0x3c // fp16 1.x values, never zeros
				src[i] = byte(i)
			}
			us, err := timePack(d, plan, src, heads*f.BlockBytes(), heads)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pack %s, %d sequence(s) x 8 heads (one block each, %d tokens): %.1f us", spec, seqs, f.Residual, us)
		}
	}
}

func timePack(d *cuda.Device, plan *kernels.PackPlan, src []byte, dstBytes, heads int) (float64, error) {
	var us float64
	err := withBuffers(d, [][]byte{src, src, make([]byte, dstBytes)}, func(c *cuda.Ctx, p []cuda.DevicePtr) (err error) {
		us, err = c.MedianUS(d.Stream(), 5, 20, func(int) error {
			return plan.Launch(c, d.Stream(), p[0], p[1], p[2], heads)
		})
		return err
	})
	return us, err
}

// withBuffers uploads bufs to fresh device buffers, runs fn on the owner
// thread and frees them.
func withBuffers(d *cuda.Device, bufs [][]byte, fn func(c *cuda.Ctx, p []cuda.DevicePtr) error) error {
	return d.Do(func(c *cuda.Ctx) error {
		var ptrs []cuda.DevicePtr
		defer func() {
			for _, p := range ptrs {
				c.Free(p)
			}
		}()
		for _, b := range bufs {
			p, err := c.Alloc(max(len(b), 16))
			if err != nil {
				return err
			}
			ptrs = append(ptrs, p)
			if err := c.HtoD(p, b); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
		}
		return fn(c, ptrs)
	})
}

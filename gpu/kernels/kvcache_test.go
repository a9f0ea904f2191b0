package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// TestKVAppendRot: the rotating append (kv_append_rot) writes the bits of
// Ops.Hadamard on q, k and v followed by AppendQ (the path it replaces,
// which the gpukv model tests hold to the CPU cache): the same residual
// bytes in every slot (untouched slots and tokens with slot -1 keep their
// poison), and q's fp16 copy equal to half.FromFloat32 of kv.Rotate of each
// head; q, k and v themselves stay unrotated. With Hq = 0 (a batch's later
// write rounds) qh is left alone. D = 32-256 take kv_append_rot_warp (a
// warp per row), D = 512 kv_append_rot (a block per row).
func TestKVAppendRot(t *testing.T) {
	d, o := opsSetup(t)
	w, err := kernels.LoadKVWriter(d)
	if err != nil {
		t.Fatal(err)
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(31, 32))
	const poison = 0x7e01 // an fp16 NaN no kernel writes
	for _, sh := range []struct{ T, Hq, Hkv, D, Nr, slots int }{
		{1, 32, 8, 128, 64, 2}, {5, 8, 2, 64, 32, 3}, {3, 4, 4, 256, 16, 2}, {17, 6, 2, 128, 128, 4},
		{9, 12, 3, 32, 16, 2}, // a warp per row with one value a lane; rows not a multiple of a block's
		{2, 4, 2, 512, 16, 1}, // past the warp kernel: a block per row
	} {
		for _, withQ := range []bool{true, false} {
			qw, kw := sh.Hq*sh.D, sh.Hkv*sh.D
			q, k, v := randF32(r, sh.T*qw, 2), randF32(r, sh.T*kw, 1), randF32(r, sh.T*kw, 1)
			for i := range k {
				if i%16 == 5 { // outlier channels, as keys have
					k[i] *= 20
				}
			}
			// Distinct (slot, row) places: two tokens never write one.
			slot, row := make([]int32, sh.T), make([]int32, sh.T)
			for i, p := range r.Perm(sh.slots * sh.Nr)[:sh.T] {
				slot[i], row[i] = int32(p/sh.Nr), int32(p%sh.Nr)
			}
			if sh.T > 1 {
				slot[sh.T/2] = -1 // a token another round writes
			}
			resN := sh.slots * sh.Hkv * sh.Nr * sh.D
			poisoned := func(n int) []uint16 {
				p := make([]uint16, n)
				for i := range p {
					p[i] = poison
				}
				return p
			}
			slotP, rowP := g.put(cuda.Bytes(slot)), g.put(cuda.Bytes(row))
			// The old path: Hadamard in place on copies, then AppendQ.
			qa, ka, va := g.put(cuda.Bytes(q)), g.put(cuda.Bytes(k)), g.put(cuda.Bytes(v))
			resKa, resVa, qha := g.put(cuda.Bytes(poisoned(resN))), g.put(cuda.Bytes(poisoned(resN))), g.put(cuda.Bytes(poisoned(sh.T*qw)))
			hq, nq := 0, 0
			if withQ {
				hq, nq = sh.Hq, sh.T*qw
			}
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				for _, x := range []struct {
					p    cuda.DevicePtr
					rows int
				}{{qa, sh.T * sh.Hq}, {ka, sh.T * sh.Hkv}, {va, sh.T * sh.Hkv}} {
					if err := o.Hadamard(c, s, x.p, x.rows, sh.D); err != nil {
						return err
					}
				}
				var qp, qhp cuda.DevicePtr
				if withQ {
					qp, qhp = qa, qha
				}
				return w.AppendQ(c, s, qp, qhp, nq, ka, va, slotP, rowP, resKa, resVa, sh.T, sh.Hkv, sh.D, sh.Nr)
			})
			// The fused path.
			qb, kb, vb := g.put(cuda.Bytes(q)), g.put(cuda.Bytes(k)), g.put(cuda.Bytes(v))
			resKb, resVb, qhb := g.put(cuda.Bytes(poisoned(resN))), g.put(cuda.Bytes(poisoned(resN))), g.put(cuda.Bytes(poisoned(sh.T*qw)))
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return w.AppendRot(c, s, qb, qhb, hq, kb, vb, slotP, rowP, resKb, resVb, sh.T, sh.Hkv, sh.D, sh.Nr)
			})
			u16s := func(p cuda.DevicePtr, n int) []uint16 {
				b := make([]uint16, n)
				g.read(cuda.Bytes(b), p)
				return b
			}
			written := 0
			for _, x := range []struct {
				name string
				a, b cuda.DevicePtr
			}{{"resK", resKa, resKb}, {"resV", resVa, resVb}} {
				want, got := u16s(x.a, resN), u16s(x.b, resN)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%+v q %v: %s[%d] = %#04x, want Hadamard+AppendQ's %#04x", sh, withQ, x.name, i, got[i], want[i])
					}
					if got[i] != poison {
						written++
					}
				}
			}
			if written == 0 {
				t.Fatalf("%+v: nothing written to the residual", sh)
			}
			qr := append([]float32(nil), q...)
			for h := 0; h < len(qr); h += sh.D {
				kv.Rotate(qr[h : h+sh.D])
			}
			qh := u16s(qhb, sh.T*qw)
			for i := range qh {
				want := uint16(poison)
				if withQ {
					want = half.FromFloat32(qr[i])
				}
				if qh[i] != want {
					t.Fatalf("%+v q %v: qh[%d] = %#04x, want %#04x", sh, withQ, i, qh[i], want)
				}
			}
			for _, x := range []struct {
				name string
				p    cuda.DevicePtr
				want []float32
			}{{"q", qb, q}, {"k", kb, k}, {"v", vb, v}} {
				got := g.f32s(x.p, len(x.want))
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(x.want[i]) {
						t.Fatalf("%+v: AppendRot changed its input %s[%d]", sh, x.name, i)
					}
				}
			}
		}
	}
	g.run(func(c *cuda.Ctx, s cuda.Stream) error {
		if err := w.AppendRot(c, s, 0, 0, 4, 0, 0, 0, 0, 0, 0, 2, 2, 96, 16); err == nil {
			t.Error("kv_append_rot of rows of 96 (not a power of two) was accepted")
		}
		return nil
	})
}

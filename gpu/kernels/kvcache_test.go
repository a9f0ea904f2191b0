package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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

// TestKVAppendRoPE: the fused append (kv_append_rope) writes the bits of
// Ops.RoPECols of the joined q|k|v output followed by AppendQ (unrotated
// formats) or AppendRot (rotated ones), the path it replaces: q's fp16 copy
// and every residual byte the same, poisoned places the two leave alone
// (other slots, tokens of slot -1) still poisoned, for D 64, 128 and 256,
// GQA groups 1, 3, 4 and 7, MQA, 8B's 32/8 heads at 55 and 100 tokens,
// with and without biases. D = 32 and 80 are refused.
func TestKVAppendRoPE(t *testing.T) {
	d, o := opsSetup(t)
	w, err := kernels.LoadKVWriter(d)
	if err != nil {
		t.Fatal(err)
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(41, 42))
	const poison = 0x7e01 // an fp16 NaN no kernel writes
	poisoned := func(n int) cuda.DevicePtr {
		p := make([]uint16, n)
		for i := range p {
			p[i] = poison
		}
		return g.put(cuda.Bytes(p))
	}
	for _, sh := range []struct {
		T, Hq, Hkv, D, Nr, slots int
		bias                     bool
	}{
		{55, 32, 8, 128, 128, 1, false}, {100, 32, 8, 128, 256, 1, false}, {3, 6, 2, 64, 128, 3, true},
		{17, 8, 2, 64, 64, 20, true}, {5, 7, 1, 128, 32, 6, true}, {1, 4, 4, 256, 16, 2, false},
		{9, 28, 4, 128, 128, 9, true}, {2, 16, 8, 256, 64, 2, true}, {33, 1, 1, 64, 16, 40, false},
	} {
		for _, rotate := range []bool{false, true} {
			what := fmt.Sprintf("%+v rotate %v", sh, rotate)
			half := sh.D / 2
			qw, kw := sh.Hq*sh.D, sh.Hkv*sh.D
			inv := make([]float32, half)
			for i := range inv {
				inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(sh.D)))
			}
			pos := make([]int32, sh.T)
			for i := range pos {
				pos[i] = int32(r.IntN(131072))
			}
			y := randF32(r, sh.T*(qw+2*kw), 2)
			src := kernels.RoPEQKV{Y: g.put(cuda.Bytes(y)), Pos: g.put(cuda.Bytes(pos)), InvFreq: g.put(cuda.Bytes(inv))}
			if sh.bias {
				src.BQ, src.BV = g.put(cuda.Bytes(randF32(r, qw, 1))), g.put(cuda.Bytes(randF32(r, kw, 1)))
				if sh.Hkv > 1 {
					src.BK = g.put(cuda.Bytes(randF32(r, kw, 1)))
				}
			}
			slot, row := make([]int32, sh.T), make([]int32, sh.T)
			for i, p := range r.Perm(sh.slots * sh.Nr)[:sh.T] {
				slot[i], row[i] = int32(p/sh.Nr), int32(p%sh.Nr)
			}
			if sh.T > 2 {
				slot[sh.T/2] = -1 // a token another round writes
			}
			slotP, rowP := g.put(cuda.Bytes(slot)), g.put(cuda.Bytes(row))
			resN := sh.slots * sh.Hkv * sh.Nr * sh.D
			// The two kernels: rope_cols into float32 q, k, v, then the append.
			q, k, v := g.poisonedF32(sh.T*qw), g.poisonedF32(sh.T*kw), g.poisonedF32(sh.T*kw)
			resKa, resVa, qha := poisoned(resN), poisoned(resN), poisoned(sh.T*qw)
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				err := o.RoPECols(c, s, src.Y, src.Pos, src.InvFreq, sh.T, half, kernels.ColsOut{Y: q, Bias: src.BQ, N: qw},
					kernels.ColsOut{Y: k, Bias: src.BK, N: kw}, kernels.ColsOut{Y: v, Bias: src.BV, N: kw})
				if err != nil {
					return err
				}
				if rotate {
					return w.AppendRot(c, s, q, qha, sh.Hq, k, v, slotP, rowP, resKa, resVa, sh.T, sh.Hkv, sh.D, sh.Nr)
				}
				return w.AppendQ(c, s, q, qha, sh.T*qw, k, v, slotP, rowP, resKa, resVa, sh.T, sh.Hkv, sh.D, sh.Nr)
			})
			// The fused kernel.
			resKb, resVb, qhb := poisoned(resN), poisoned(resN), poisoned(sh.T*qw)
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return w.AppendRoPE(c, s, src, qhb, sh.Hq, slotP, rowP, resKb, resVb, sh.T, sh.Hkv, sh.D, sh.Nr, rotate)
			})
			for _, x := range []struct {
				name string
				a, b cuda.DevicePtr
				n    int
			}{{"qh", qha, qhb, sh.T * qw}, {"resK", resKa, resKb, resN}, {"resV", resVa, resVb, resN}} {
				want, got := g.u16s(x.a, x.n), g.u16s(x.b, x.n)
				written := 0
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: %s[%d] = %#04x, want rope_cols+append's %#04x", what, x.name, i, got[i], want[i])
					}
					if got[i] != poison {
						written++
					}
				}
				full := x.n
				if x.name != "qh" {
					full = sh.T * kw
					if sh.T > 2 {
						full -= kw // the token of slot -1
					}
				}
				if written != full {
					t.Fatalf("%s: %s: %d values written, want %d", what, x.name, written, full)
				}
			}
		}
	}
	g.run(func(c *cuda.Ctx, s cuda.Stream) error {
		for _, D := range []int{32, 80} {
			src := kernels.RoPEQKV{Y: 1, Pos: 1, InvFreq: 1}
			if err := w.AppendRoPE(c, s, src, 1, 4, 0, 0, 0, 0, 2, 2, D, 16, false); err == nil || !strings.Contains(err.Error(), "kv_append_rope") {
				t.Errorf("kv_append_rope of rows of %d: err = %v, want a refusal", D, err)
			}
		}
		return nil
	})
}

package kernels

import (
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// GEMVQMoE holds the expert-indexed forms of the one-row packed GEMVs
// (gemvq4.cu's gemv_q5_moe, gemvq3.cu's gemv_q3_moe): a launch multiplies
// P rows of x, each by the packed weight of the expert a router chose for
// it, the expert's words and params addresses read from device tables at
// each CTA's start. Each (pair, expert) gets the sums GEMVQ's Launch or
// LaunchTiled would give that expert's weight at one row, bit for bit
// (the same kernel body at the same split): a mixture of packed experts is
// routed on the device with the host path's per-expert results, and a
// decode step keeps one set of launches whatever its tokens choose.
type GEMVQMoE struct {
	v5   [len(gemvqBits)][len(gemvq4Splits)][2]cuda.Function // [bits][split][tiled]: LEAN's widths only
	v3   [len(gemvqBits)][len(gemvq3Splits)]cuda.Function
	ring [len(gemvqBits)]int // v5's dynamic shared memory
}

// gemvqMoEV5Expr is gemv_q5_moe's name expression.
func gemvqMoEV5Expr(bits, s int, tiled bool) string {
	return fmt.Sprintf("gemvq4::gemv_q5_moe<%d, %d, %v>", bits, s, tiled)
}

// gemvqMoEV3Expr is gemv_q3_moe's name expression.
func gemvqMoEV3Expr(bits, s int) string { return fmt.Sprintf("gemvq3::gemv_q3_moe<%d, %d>", bits, s) }

// gemvqMoEV5Built reports whether gemv_q5_moe is built for a width and
// layout: LEAN's (int4 and int8 in either layout, int3 tiled).
func gemvqMoEV5Built(bits int, tiled bool) bool {
	if tiled {
		return gemvqTiledIndex(bits) >= 0
	}
	return gemvq5Lean(bits)
}

// LoadGEMVQMoE compiles the expert-indexed GEMVs (gemvq4.cu and gemvq3.cu
// with the default options, as LoadGEMVQ).
func LoadGEMVQMoE(dev *cuda.Device) (*GEMVQMoE, error) {
	m := &GEMVQMoE{}
	var e5, e3 []string
	for _, b := range gemvqBits {
		for _, tiled := range []bool{false, true} {
			if gemvqMoEV5Built(b, tiled) {
				for _, s := range gemvq4Splits {
					e5 = append(e5, gemvqMoEV5Expr(b, s, tiled))
				}
			}
		}
		for _, s := range gemvq3Splits {
			e3 = append(e3, gemvqMoEV3Expr(b, s))
		}
	}
	mod5, err := dev.Compile(program("gemvq4.cu", gemvq4Source, e5, nil, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}))
	if err != nil {
		return nil, err
	}
	mod3, err := dev.Compile(gemvq3Program(e3, nil))
	if err != nil {
		return nil, err
	}
	for bi, b := range gemvqBits {
		m.ring[bi] = gemvq5RingBytes(b, nil)
		for ti, tiled := range []bool{false, true} {
			if !gemvqMoEV5Built(b, tiled) {
				continue
			}
			for si, s := range gemvq4Splits {
				if m.v5[bi][si][ti], err = mod5.Function(gemvqMoEV5Expr(b, s, tiled)); err != nil {
					return nil, err
				}
			}
		}
		for si, s := range gemvq3Splits {
			if m.v3[bi][si], err = mod3.Function(gemvqMoEV3Expr(b, s)); err != nil {
				return nil, err
			}
		}
	}
	return m, dev.Do(func(c *cuda.Ctx) error {
		for bi := range gemvqBits {
			for si := range gemvq4Splits {
				for ti := range 2 {
					if f := m.v5[bi][si][ti]; f != (cuda.Function{}) {
						if err := c.SetMaxDynamicShared(f, m.ring[bi]); err != nil {
							return fmt.Errorf("kernels: gemvq moe: %w", err)
						}
					}
				}
			}
		}
		return nil
	})
}

// ExpertForm is the kernel GEMVQ's one-row launch runs for an [N, K]
// weight: v5 (gemv_q5's LEAN step, v6.1 where tiled) or v3, at split S.
type ExpertForm struct {
	V5    bool
	Tiled bool
	S     int
}

// ExpertForm returns the form Launch (wq's layout) or LaunchTiled (tiled)
// runs at one row of x over an [N, K] weight of this width and group, and
// whether GEMVQMoE has its indexed form: v5.2 or v6.1 (LEAN), or v3; not
// v4, v5.0, v5.1, v6 or v2 (the knobs GEMVQV2, V3 with tiled weights,
// V4Int8, V51, V5Lanes select those).
func (g *GEMVQ) ExpertForm(N, K, bits, G int, tiled bool) (ExpertForm, bool) {
	if tiled {
		if !g.UsesV6(1, N, K, bits, G) || (g.V51 && bits == gemvq6Bits) {
			return ExpertForm{}, false
		}
		return ExpertForm{V5: true, Tiled: true, S: g.SplitV5For(N, K, bits)}, true
	}
	switch {
	case g.UsesV5(1, N, K, bits, G):
		if g.V5Lanes || g.V51 || !gemvq5Lean(bits) {
			return ExpertForm{}, false
		}
		return ExpertForm{V5: true, S: g.SplitV5For(N, K, bits)}, true
	case g.UsesV4(1, N, K, bits, G), g.V2, !g.Reads(bits, G, K):
		return ExpertForm{}, false
	}
	return ExpertForm{S: g.SplitV3For(1, N, K, bits)}, true
}

// Launch computes y[jP + p] = x[p / xdiv]·Ŵ_{j, idx[p]}ᵀ for the P pairs p
// and J projections j of one shape in one launch (gate and up: J 2): x
// float32 rows of K, idx [P] int32 expert indices in [0, E), wtab and ptab
// the experts' words and params addresses (uint64; projection j's E at
// wtab + 16jE and ptab + 16jE bytes, each an [N, K] weight of this width
// and group in f's layout), y [J·P][N] float32. f is GEMVQ's ExpertForm
// for the shape.
func (m *GEMVQMoE) Launch(c *cuda.Ctx, st cuda.Stream, f ExpertForm, y, x, wtab, ptab, idx cuda.DevicePtr, J, P, xdiv, E, N, K, bits, G int) error {
	bi := gemvqBitsIndex(bits)
	if bi < 0 || J <= 0 || P <= 0 || N <= 0 || xdiv <= 0 || E <= 0 || G <= 0 || K%G != 0 {
		return fmt.Errorf("kernels: gemvq moe: J=%d P=%d N=%d K=%d bits=%d G=%d has no kernel", J, P, N, K, bits, G)
	}
	if f.V5 {
		si := slices.Index(gemvq4Splits[:], f.S)
		ti := 0
		if f.Tiled {
			ti = 1
		}
		if si < 0 || !gemvqMoEV5Built(bits, f.Tiled) || gemvq4Shift(G, K) < 0 {
			return fmt.Errorf("kernels: gemvq moe v5: bits=%d G=%d split %d tiled %v has no kernel", bits, G, f.S, f.Tiled)
		}
		rows := gemvq4Rows * gemvq4Warps / f.S
		return c.Launch(m.v5[bi][si][ti], cuda.Dim3{X: (N + rows - 1) / rows, Y: J * P}, cuda.Dim3{X: 32 * gemvq4Warps}, m.ring[bi], st,
			x, wtab, ptab, idx, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), int32(xdiv), int32(E), int32(P), int32(m.ring[bi]))
	}
	si := slices.Index(gemvq3Splits[:], f.S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq moe v3: split %d is not one of %v", f.S, gemvq3Splits)
	}
	rows := gemvq3RowsPerWarp(bits) * gemvq3Warps / f.S
	return c.Launch(m.v3[bi][si], cuda.Dim3{X: (N + rows - 1) / rows, Y: J * P}, cuda.Dim3{X: 32 * gemvq3Warps}, 0, st,
		x, wtab, ptab, idx, y, int32(N), int32(K), int32(G), int32(xdiv), int32(E), int32(P))
}

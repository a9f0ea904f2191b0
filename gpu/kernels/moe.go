package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed moe.cu
var moeSource string

// Launch geometry of moe.cu.
const (
	// MoEMaxK is moe.cu's kMoEMaxK: the most experts a token may choose.
	MoEMaxK = 32
	// moeWarps is moe.cu's kMoEWarps: the GEMVs' warps per block.
	moeWarps = 8
	// moeRouteWarps is moe_route's warps per block (a warp per token).
	moeRouteWarps = 4
	// MoEGroupedAlign is moe.cu's kGN: the grouped path needs H and IE to
	// be multiples of it.
	MoEGroupedAlign = 64
	// MoEGroupMaxExperts is moe.cu's kMoEGroupMaxE: the most experts
	// moe_group counts (shared memory).
	MoEGroupMaxExperts = 1024
	// MoETileRows is moe.cu's kGM: the rows of v2's grouped GEMM tile,
	// the largest; MoETileRows32 and MoETileRows16 are v3's smaller tiles
	// (kernels moe_gemm_*_m32, _m16).
	MoETileRows   = 64
	MoETileRows32 = 32
	MoETileRows16 = 16
	// moeGEMMThreads is moe.cu's kGWarps·32.
	moeGEMMThreads = 128
	// moeGroupThreads is moe_group's block (one block).
	moeGroupThreads = 1024
	// moeRowThreads is moe_gather's and moe_combine's block.
	moeRowThreads = 256
)

// MoE holds moe.cu's kernels: a mixture of experts routed on the device
// (the router's top-k, the chosen experts' gate/up and down GEMVs).
type MoE struct {
	route, gateUp, down                        cuda.Function
	group, gather, gemmGU, gemmDown, combine   cuda.Function
	gemmGULdm, gemmDownLdm                     cuda.Function
	gemmGU32, gemmDown32, gemmGU16, gemmDown16 cuda.Function
}

// LoadMoE compiles moe.cu (once per device; later calls reuse the module).
func LoadMoE(dev *cuda.Device) (*MoE, error) {
	mod, err := dev.Compile(program("moe.cu", moeSource, nil, nil))
	if err != nil {
		return nil, err
	}
	m := &MoE{}
	for _, k := range []struct {
		f    *cuda.Function
		name string
	}{{&m.route, "moe_route"}, {&m.gateUp, "moe_gate_up"}, {&m.down, "moe_down"},
		{&m.group, "moe_group"}, {&m.gather, "moe_gather"}, {&m.gemmGU, "moe_gemm_gu"}, {&m.gemmDown, "moe_gemm_down"}, {&m.combine, "moe_combine"},
		{&m.gemmGULdm, "moe_gemm_gu_ldm"}, {&m.gemmDownLdm, "moe_gemm_down_ldm"},
		{&m.gemmGU32, "moe_gemm_gu_m32"}, {&m.gemmDown32, "moe_gemm_down_m32"},
		{&m.gemmGU16, "moe_gemm_gu_m16"}, {&m.gemmDown16, "moe_gemm_down_m16"}} {
		if *k.f, err = mod.Function(k.name); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkMoE validates the sizes of a launch.
func checkMoE(op string, T, E, k int) error {
	if T <= 0 || T > maxGridX || E <= 0 || k <= 0 || k > min(E, MoEMaxK) {
		return fmt.Errorf("kernels: %s: %d tokens, %d experts, top-%d (at most %d experts chosen)", op, T, E, k, MoEMaxK)
	}
	return nil
}

// Route writes each of T tokens' k experts idx [T, k] int32 and weights
// w [T, k] float32 from the router's logits [T, E] float32: softmax, the
// k largest (ties to the lower index), divided by their sum where norm;
// the slots sorted by expert index (moe.cu's moe_route).
func (m *MoE) Route(c *cuda.Ctx, s cuda.Stream, idx, w, logits cuda.DevicePtr, T, E, k int, norm bool) error {
	if err := checkMoE("moe_route", T, E, k); err != nil {
		return err
	}
	grid := cuda.Dim3{X: (T + moeRouteWarps - 1) / moeRouteWarps}
	return c.Launch(m.route, grid, cuda.Dim3{X: 32 * moeRouteWarps}, 0, s, idx, w, logits, int32(T), int32(E), int32(k), flagArg(norm))
}

// GateUp computes act [T·k, IE] float32 = silu(x·Wgᵀ) ⊙ (x·Wuᵀ) of each
// token's chosen experts (idx [T, k]): x [T, H] float32; gate and up are
// device tables of E addresses of [IE, H] fp16 matrices.
func (m *MoE) GateUp(c *cuda.Ctx, s cuda.Stream, act, x, idx, gate, up cuda.DevicePtr, T, k, H, IE, E int) error {
	if err := checkMoE("moe_gate_up", T*k, E, k); err != nil {
		return err
	}
	if H <= 0 || IE <= 0 || (IE+moeWarps-1)/moeWarps > maxGridY {
		return fmt.Errorf("kernels: moe_gate_up: H %d, IE %d", H, IE)
	}
	grid := cuda.Dim3{X: T * k, Y: (IE + moeWarps - 1) / moeWarps}
	return c.Launch(m.gateUp, grid, cuda.Dim3{X: 32 * moeWarps}, 0, s, act, x, idx, gate, up, int32(k), int32(H), int32(IE), int32(E))
}

// Down computes out [T, H] float32 = Σ_j w[t,j]·(act[t·k+j]·Wdᵀ), each
// product rounded, summed from 0 in slot order, plus sigmoid(sg[t])·
// shared[t] where shared is not 0 (sg [T], shared [T, H] float32); down
// is a device table of E addresses of [H, IE] fp16 matrices.
func (m *MoE) Down(c *cuda.Ctx, s cuda.Stream, out, act, idx, w, down, shared, sg cuda.DevicePtr, T, k, H, IE, E int) error {
	if err := checkMoE("moe_down", T, E, k); err != nil {
		return err
	}
	if H <= 0 || IE <= 0 || (H+moeWarps-1)/moeWarps > maxGridY {
		return fmt.Errorf("kernels: moe_down: H %d, IE %d", H, IE)
	}
	grid := cuda.Dim3{X: T, Y: (H + moeWarps - 1) / moeWarps}
	return c.Launch(m.down, grid, cuda.Dim3{X: 32 * moeWarps}, 0, s, out, act, idx, w, down, shared, sg, int32(k), int32(H), int32(IE), int32(E))
}

// MoEGroupedScratch is the layout of the grouped path's device buffer for
// P = T·k pairs of E experts (offsets in bytes, each 256-aligned): rows
// and pos [P] int32, the tile table [MoETiles(P, E)] int4, xs [P, H] and
// act16 [P, IE] fp16, ys [P, H] float32.
type MoEGroupedScratch struct {
	Rows, Pos, Tiles, XS, Act, YS, Bytes int
}

// MoETiles is the most row tiles of tm rows P pairs over E experts take
// (each expert's last tile may be partial).
func MoETiles(P, E, tm int) int { return (P+tm-1)/tm + E }

// MoEGroupedLayout returns the grouped path's buffer layout (its tile
// table sized for the smallest tiles, so it holds any tile size).
func MoEGroupedLayout(P, E, H, IE int) MoEGroupedScratch {
	var l MoEGroupedScratch
	at := 0
	next := func(bytes int) int {
		o := at
		at += (bytes + 255) &^ 255
		return o
	}
	l.Rows, l.Pos, l.Tiles = next(4*P), next(4*P), next(16*MoETiles(P, E, MoETileRows16))
	l.XS, l.Act, l.YS = next(2*P*H), next(2*P*IE), next(4*P*H)
	l.Bytes = at
	return l
}

// Grouped computes what GateUp and Down do, grouping the T·k (token,
// slot) pairs by expert on the device (moe.cu's v2: moe_group, moe_gather,
// moe_gemm_gu, moe_gemm_down, moe_combine): each expert's rows run as one
// tensor-core GEMM over fp16-rounded x and activations, then out [T, H] =
// Σ_j w[t,j]·y (slot order) + sigmoid(sg)·shared. scratch has
// MoEGroupedLayout(T·k, E, H, IE).Bytes; H and IE are multiples of
// MoEGroupedAlign. The launches depend on the sizes only. tm is the GEMMs'
// tile rows: MoETileRows (v2), MoETileRows32 or MoETileRows16 (v3), all
// the same bits. ldm loads the fragments with ldmatrix (the same bits,
// fewer instructions); the 32-bit loads (ldm false) exist at MoETileRows
// only.
func (m *MoE) Grouped(c *cuda.Ctx, s cuda.Stream, out, x, idx, w, gate, up, down, shared, sg, scratch cuda.DevicePtr, T, k, H, IE, E int, ldm bool, tm int) error {
	if err := checkMoE("moe_group", T, E, k); err != nil {
		return err
	}
	gu, dn := m.gemmGU, m.gemmDown
	switch {
	case tm == MoETileRows && ldm:
		gu, dn = m.gemmGULdm, m.gemmDownLdm
	case tm == MoETileRows32 && ldm:
		gu, dn = m.gemmGU32, m.gemmDown32
	case tm == MoETileRows16 && ldm:
		gu, dn = m.gemmGU16, m.gemmDown16
	case tm != MoETileRows:
		return fmt.Errorf("kernels: moe grouped: tiles of %d rows (ldmatrix %v): want %d, %d or %d, 32-bit loads at %d only", tm, ldm, MoETileRows, MoETileRows32, MoETileRows16, MoETileRows)
	}
	P := T * k
	tiles := MoETiles(P, E, tm)
	if E > MoEGroupMaxExperts || H <= 0 || IE <= 0 || H%MoEGroupedAlign != 0 || IE%MoEGroupedAlign != 0 ||
		P > maxGridX || tiles > maxGridX || IE/MoEGroupedAlign > maxGridY || H/MoEGroupedAlign > maxGridY {
		return fmt.Errorf("kernels: moe grouped: T %d, k %d, H %d, IE %d, E %d (H and IE multiples of %d, at most %d experts)", T, k, H, IE, E, MoEGroupedAlign, MoEGroupMaxExperts)
	}
	l := MoEGroupedLayout(P, E, H, IE)
	at := func(o int) cuda.DevicePtr { return scratch + cuda.DevicePtr(o) }
	rows, pos, tt, xs, act, ys := at(l.Rows), at(l.Pos), at(l.Tiles), at(l.XS), at(l.Act), at(l.YS)
	th := cuda.Dim3{X: moeRowThreads}
	if err := c.Launch(m.group, cuda.Dim3{X: 1}, cuda.Dim3{X: moeGroupThreads}, 0, s, rows, pos, tt, idx, int32(P), int32(E), int32(tiles), int32(tm)); err != nil {
		return err
	}
	if err := c.Launch(m.gather, cuda.Dim3{X: P}, th, 0, s, xs, x, rows, int32(k), int32(H)); err != nil {
		return err
	}
	g := cuda.Dim3{X: moeGEMMThreads}
	if err := c.Launch(gu, cuda.Dim3{X: tiles, Y: IE / MoEGroupedAlign}, g, 0, s, act, xs, tt, gate, up, int32(H), int32(IE)); err != nil {
		return err
	}
	if err := c.Launch(dn, cuda.Dim3{X: tiles, Y: H / MoEGroupedAlign}, g, 0, s, ys, act, tt, down, int32(H), int32(IE)); err != nil {
		return err
	}
	return c.Launch(m.combine, cuda.Dim3{X: T, Y: (H + moeRowThreads - 1) / moeRowThreads}, th, 0, s, out, ys, pos, w, shared, sg, int32(k), int32(H))
}

// Combine is moe_combine over the pairs' outputs in (token, slot) order:
// out [T, H] = Σ_j w[t,j]·ys[t·k + j] (each product rounded, summed from 0
// in slot order), then + sigmoid(sg[t])·shared[t] where shared is not 0.
// ys [T·k, H] float32.
func (m *MoE) Combine(c *cuda.Ctx, s cuda.Stream, out, ys, w, shared, sg cuda.DevicePtr, T, k, H int) error {
	if T <= 0 || k <= 0 || H <= 0 {
		return fmt.Errorf("kernels: moe combine: T=%d k=%d H=%d", T, k, H)
	}
	return c.Launch(m.combine, cuda.Dim3{X: T, Y: (H + moeRowThreads - 1) / moeRowThreads}, cuda.Dim3{X: moeRowThreads}, 0, s,
		out, ys, cuda.DevicePtr(0), w, shared, sg, int32(k), int32(H))
}

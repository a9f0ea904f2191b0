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
)

// MoE holds moe.cu's kernels: a mixture of experts routed on the device
// (the router's top-k, the chosen experts' gate/up and down GEMVs).
type MoE struct {
	route, gateUp, down cuda.Function
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
	}{{&m.route, "moe_route"}, {&m.gateUp, "moe_gate_up"}, {&m.down, "moe_down"}} {
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

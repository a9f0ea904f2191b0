package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed skinny.cu
var skinnySource string

// Tile constants of skinny.cu.
const (
	// skinnyBM is skinny.cu's kBM: output channels a CTA.
	skinnyBM = 128
	// skinnyBK is skinny.cu's kBK: k a shared-memory stage.
	skinnyBK = 64
	// skinnyStages is skinny.cu's kStages: the cp.async ring's depth.
	skinnyStages = 4
	// skinnyWarpsM is skinny.cu's kWarpsM, skinnyMaxWN its kMaxWN.
	skinnyWarpsM = 4
	skinnyMaxWN  = 8
	// skinnyThreads3 is skinny.cu's kThreads3 (v3: two warpgroups), and
	// skinnyAtomBytes its kAtomBytes (a 128-byte swizzle atom).
	skinnyThreads3  = 256
	skinnyAtomBytes = 1024
	// skinnyCounters is skinny.cu's kCounters: the int counters at the
	// start of a split launch's workspace, one per m-block.
	skinnyCounters = 4096
	// SkinnyMaxSplit is the largest split-K a launch takes.
	SkinnyMaxSplit = 8
	// SkinnyMaxRows is the most rows (x's T) a skinny launch takes: one CTA
	// holds every row (16 n-tiles of 8); more would read the weights again.
	SkinnyMaxRows = 128
)

// skinnyNTs are the n-tile counts skinny.cu is instantiated with; a launch
// of T rows takes the first that covers T.
var skinnyNTs = [...]int{4, 8, 16}

// Skinny holds skinny.cu's weight-streaming GEMM for 17-128 rows: y =
// x·Wᵀ + bias with x in fp16, each weight byte read once, a fixed split-K
// summed in split order (deterministic for a shape and split; not
// batch-invariant).
type Skinny struct {
	fns, fnsV1, fnsV3 [len(skinnyNTs)]cuda.Function
	sms               int
	hopper            bool // compute capability 9.0: v3 runs
	// Version is the kernel a launch runs: SkinnyV3 (the default on
	// compute capability 9.0: wgmma from the shared stages), SkinnyV2 (the
	// default elsewhere: weights in registers) or SkinnyV1 (weights through
	// shared memory, mma.sync), the same arguments and result order.
	Version int
}

// The versions of skinny.cu (its opening comment).
const (
	SkinnyV1 = 1
	SkinnyV2 = 2
	SkinnyV3 = 3
)

// LoadSkinny compiles skinny.cu (once per device) and raises its kernels'
// dynamic shared memory limit.
func LoadSkinny(dev *cuda.Device) (*Skinny, error) {
	expr := func(nt int) string { return fmt.Sprintf("skinny::skinny_f16_v2<%d>", nt) }
	exprV1 := func(nt int) string { return fmt.Sprintf("skinny::skinny_f16<%d>", nt) }
	exprV3 := func(nt int) string { return fmt.Sprintf("skinny::skinny_f16_v3<%d>", nt) }
	var exprs []string
	for _, nt := range skinnyNTs {
		exprs = append(exprs, expr(nt), exprV1(nt), exprV3(nt))
	}
	mod, err := dev.Compile(program("skinny.cu", skinnySource, exprs, nil))
	if err != nil {
		return nil, err
	}
	major, minor := dev.ComputeCapability()
	s := &Skinny{sms: dev.SMs(), Version: SkinnyV2, hopper: major == 9 && minor == 0}
	if s.hopper {
		s.Version = SkinnyV3
	}
	for i, nt := range skinnyNTs {
		if s.fns[i], err = mod.Function(expr(nt)); err != nil {
			return nil, err
		}
		if s.fnsV1[i], err = mod.Function(exprV1(nt)); err != nil {
			return nil, err
		}
		if s.fnsV3[i], err = mod.Function(exprV3(nt)); err != nil {
			return nil, err
		}
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		for i, nt := range skinnyNTs {
			if err := c.SetMaxDynamicShared(s.fns[i], skinnySharedBytes(SkinnyV2, nt)); err != nil {
				return fmt.Errorf("kernels: skinny: %w", err)
			}
			if err := c.SetMaxDynamicShared(s.fnsV1[i], skinnySharedBytes(SkinnyV1, nt)); err != nil {
				return fmt.Errorf("kernels: skinny: %w", err)
			}
			if err := c.SetMaxDynamicShared(s.fnsV3[i], skinnySharedBytes(SkinnyV3, nt)); err != nil {
				return fmt.Errorf("kernels: skinny: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// skinnySharedBytes is skinny.cu's dynamic shared memory for NT n-tiles:
// v1's Config<NT>::SharedBytes (the ring of W and x tiles), v2's
// X2<NT>::SharedBytes (the ring of x tiles), v3's Config3<NT>::SharedBytes
// (v1's ring and the slack that aligns it to a 1024-byte swizzle atom).
func skinnySharedBytes(version, nt int) int {
	switch version {
	case SkinnyV1:
		return skinnyStages * (skinnyBM + nt*8) * skinnyBK * 2
	case SkinnyV3:
		return skinnyStages*(skinnyBM+nt*8)*skinnyBK*2 + skinnyAtomBytes
	}
	return skinnyStages * nt * 8 * skinnyBK * 2
}

// skinnyNTFor returns the index in skinnyNTs for T rows.
func skinnyNTFor(T int) int {
	for i, nt := range skinnyNTs {
		if T <= nt*8 {
			return i
		}
	}
	return len(skinnyNTs) - 1
}

// skinnyCTAsPerSM is how many CTAs of the T-row kernel an H100 SM holds:
// v1 by shared memory (228 KB a SM, 1 KB reserved a CTA), v2 by registers
// (NVRTC 12.5, sm_90a: 165 a thread at NT = 4, 213 at 8 and 16, of 64K a
// SM, at 128, 128 and 256 threads).
func (s *Skinny) skinnyCTAsPerSM(T int) int {
	nt := skinnyNTs[skinnyNTFor(T)]
	if s.Version == SkinnyV1 || s.Version == SkinnyV3 {
		return max(1, (228<<10)/(skinnySharedBytes(s.Version, nt)+1<<10))
	}
	switch nt {
	case 4:
		return 3
	case 8:
		return 2
	}
	return 1
}

// SkinnySplit is the split-K a T-row launch of an [N, K] weight takes on
// this device, from the shape alone (so the bits are the same in every
// process): the smallest split whose CTAs fill the SMs' slots in whole
// waves best (waves a split of the work, each wave costing a fixed 8%
// more per split for the partials' sum), at least 8 k-blocks a split, and
// none above 1 when the m-blocks outnumber the counters.
func (s *Skinny) SkinnySplit(T, N, K int) int {
	mb := (N + skinnyBM - 1) / skinnyBM
	nb := (K + skinnyBK - 1) / skinnyBK
	if mb > skinnyCounters {
		return 1
	}
	if s.Version == SkinnyV3 {
		// v3 (measured at 55 and 100 rows, decode-step.md v40): the most
		// splits whose CTAs fit the SMs one each, at least 8 k-blocks a
		// split; more CTAs than SMs cost more in fixed work than they add.
		best := 1
		for S := 2; S <= SkinnyMaxSplit && S*8 <= nb && mb*S <= s.sms; S++ {
			best = S
		}
		return best
	}
	slots := s.sms * s.skinnyCTAsPerSM(T)
	best, bestCost := 1, 0.0
	for S := 1; S <= SkinnyMaxSplit && S*8 <= nb; S++ {
		waves := (mb*S + slots - 1) / slots
		cost := float64(waves) / float64(S) * (1 + 0.08*float64(S-1))
		if S == 1 || cost < bestCost {
			best, bestCost = S, cost
		}
	}
	return best
}

// SkinnyWorkspaceBytes is the workspace a launch of T rows into N channels
// at split S needs: the counters, and the partials when S > 1.
func SkinnyWorkspaceBytes(T, N, S int) int {
	if S <= 1 {
		return 0
	}
	return 4*skinnyCounters + 4*S*T*N
}

// CheckSkinnyShape reports whether skinny.cu takes x [T, K] into N
// channels at split S, as an error naming the shape.
func CheckSkinnyShape(T, N, K, S int) error {
	nb := (K + skinnyBK - 1) / skinnyBK
	switch {
	case T < 1 || T > SkinnyMaxRows || N < 1 || K < 1 || K%8 != 0:
		return fmt.Errorf("kernels: skinny: x [%d, %d] into %d channels: needs 1 <= T <= %d and K a positive multiple of 8", T, K, N, SkinnyMaxRows)
	case S < 1 || S > SkinnyMaxSplit || S > nb:
		return fmt.Errorf("kernels: skinny: split %d of K = %d: needs 1 to %d and at most one a %d-channel k-block", S, K, SkinnyMaxSplit, skinnyBK)
	case S > 1 && (N+skinnyBM-1)/skinnyBM > skinnyCounters:
		return fmt.Errorf("kernels: skinny: split %d of N = %d: more than %d m-blocks", S, N, skinnyCounters)
	}
	return nil
}

// CheckSplit is CheckSkinnyShape for the launch's version: v3's splits sum
// their slices once all S CTAs of an m-block have written their partials,
// so a v3 launch with S > 1 must fit the GPU in one wave (every CTA
// resident together) and its m-blocks two counters each.
func (s *Skinny) CheckSplit(T, N, K, S int) error {
	if err := CheckSkinnyShape(T, N, K, S); err != nil {
		return err
	}
	mb := (N + skinnyBM - 1) / skinnyBM
	if s.Version == SkinnyV3 && S > 1 && (mb*S > s.sms*s.skinnyCTAsPerSM(T) || 2*mb > skinnyCounters) {
		return fmt.Errorf("kernels: skinny: v3 split %d of N = %d: %d CTAs do not fit one wave of %d", S, N, mb*S, s.sms*s.skinnyCTAsPerSM(T))
	}
	return nil
}

// Launch computes y = x·Wᵀ + bias (bias may be 0): xh [T][K] fp16, w [N][K]
// fp16, bias [N] float32, y [T][N] float32, at split S (SkinnySplit's, or
// any other for a sweep); ws holds SkinnyWorkspaceBytes(T, N, S) bytes
// whose counters are zero (as every launch leaves them), 0 when S = 1.
// With early the kernel copies its first stages' weights before waiting
// for the kernel ahead (only where no kernel ahead writes w).
func (s *Skinny) Launch(c *cuda.Ctx, st cuda.Stream, y, xh, w, bias, ws cuda.DevicePtr, T, N, K, S int, early bool) error {
	if err := s.CheckSplit(T, N, K, S); err != nil {
		return err
	}
	if S > 1 && ws == 0 {
		return fmt.Errorf("kernels: skinny: split %d needs a workspace of %d bytes", S, SkinnyWorkspaceBytes(T, N, S))
	}
	i := skinnyNTFor(T)
	nt := skinnyNTs[i]
	threads := 32 * skinnyWarpsM * (nt / min(nt, skinnyMaxWN))
	e := flagArg(early)
	fn := s.fns[i]
	switch s.Version {
	case SkinnyV1:
		fn = s.fnsV1[i]
	case SkinnyV3:
		if !s.hopper {
			return fmt.Errorf("kernels: skinny: v3 (wgmma) needs compute capability 9.0")
		}
		fn, threads = s.fnsV3[i], skinnyThreads3
	}
	return c.Launch(fn, cuda.Dim3{X: (N + skinnyBM - 1) / skinnyBM, Y: S}, cuda.Dim3{X: threads},
		skinnySharedBytes(s.Version, nt), st, xh, w, bias, y, ws, int32(T), int32(N), int32(K), e)
}

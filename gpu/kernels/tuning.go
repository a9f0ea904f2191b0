// tuning.go: the planners' tuning knobs as data (one struct per planner,
// whose zero value is the measured default) and ParseTuning, the one place
// that reads their BITDECODE_* environment variables.

package kernels

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Environment variables of the planners' tuning, read by ParseTuning only
// (docs/gpu.md has the table: meaning, default, who reads it).
const (
	// EnvPtxasVerbose, when true, makes the decode and planes planners
	// compile with ptxas -v and print the register and spill report of each
	// program to stderr (DecodeTuning.Ptxas, PlanesTuning.Ptxas).
	EnvPtxasVerbose = "BITDECODE_PTXAS_VERBOSE"
	// EnvDecodeStages is MMATuning.Stages: decode_mma.cu's cp.async ring
	// depth for low-bit formats (0 off; 2-4 tiles per warp).
	EnvDecodeStages = "BITDECODE_DECODE_STAGES"
	// EnvDecodeSplits set to "target:N" is DecodeTuning.TargetCTAs: the
	// tensor-core kernels' splits sized for about N CTAs per step (v2's
	// rule, N = 528) instead of sizeMMA's wave rule; set to "shortest" or
	// "largest" ("auto"), DecodeTuning.SplitRun: how a one-wave plan of one
	// sequence is cut.
	EnvDecodeSplits = "BITDECODE_DECODE_SPLITS"
	// EnvDecodeMinSplit is DecodeTuning.MinSplitTokens: the fewest tokens
	// per split of the tensor-core kernels.
	EnvDecodeMinSplit = "BITDECODE_DECODE_MINSPLIT"
	// EnvDecodeMT is MMATuning.MT: decode_mma.cu's fragment groups per tile
	// (1, 2, 4 or 8; still capped by the block and key group).
	EnvDecodeMT = "BITDECODE_DECODE_MT"
	// EnvDecodeMinB is MMATuning.MinB: the CTAs per SM that decode_mma.cu's
	// registers must allow (1-4; __launch_bounds__).
	EnvDecodeMinB = "BITDECODE_DECODE_MINB"
	// EnvDecodeQK8 is MMATuning.QK8: true (1) runs decode_mma.cu's K·q on
	// int8 tensor cores (v2.8) for every int2 and int4 key format it can,
	// false (0) on fp16 tensor cores; unset, the planner's rule (mmaQK8).
	EnvDecodeQK8 = "BITDECODE_DECODE_QK8"
	// EnvDecodePV8 is MMATuning.PV8: true (1) runs decode_mma.cu's P·V on
	// int8 tensor cores (v2.9) for int2 values where it can, false (0) on
	// fp16 tensor cores; unset, the planner's rule (mmaPV8).
	EnvDecodePV8 = "BITDECODE_DECODE_PV8"
	// EnvDecodeLA is MMATuning.LA: false (0) turns decode_mma.cu's
	// look-ahead refold for int2 keys (v2.24) off, true (1) on where it
	// reads the layout; unset, the planner's rule (mmaLA).
	EnvDecodeLA = "BITDECODE_DECODE_LA"
	// EnvDecodeSeqLean is MMATuning.SeqLean: true (1) compiles every
	// per-sequence decode_mma.cu kernel (the batch-invariant mode's) with
	// v2.34's leaner tile loop, false (0) none (the kernel of before);
	// unset, the planner's rule (mmaSeqLean).
	EnvDecodeSeqLean = "BITDECODE_DECODE_SEQLEAN"
	// EnvDecodeFuse set to false (0) is DecodeTuning.NoFuse: the merge of
	// the splits left to decode_combine (a second launch), for comparisons.
	EnvDecodeFuse = "BITDECODE_DECODE_FUSE"
	// EnvDecodeOut32 set to false (0) is DecodeTuning.NoOut32: the decode
	// plans report that they write no float32 output (DecodePlan.Out32), so
	// a cache converts theirs in a launch of its own, as before
	// decode-step.md v39, for comparisons.
	EnvDecodeOut32 = "BITDECODE_DECODE_OUT32"
	// EnvPrefillFA set to false (0) is DecodeTuning.NoPrefill: the GPU
	// cache prefills through the decode kernel (Tq = the chunk) as before
	// prefill.cu, for comparisons.
	EnvPrefillFA = "BITDECODE_PREFILL_FA"
	// EnvPrefillStep is DecodeTuning.PrefillStep: prefill.cu's math step
	// in keys (16 or 32; unset or 64: the whole 64-key tile).
	EnvPrefillStep = "BITDECODE_PREFILL_STEP"
	// EnvPrefillMT is DecodeTuning.PrefillMT: prefill.cu's m16 tiles of
	// query rows a warp, for every launch (1 or 2; unset: the planner's
	// choice by launch, prefillLaunchMT).
	EnvPrefillMT = "BITDECODE_PREFILL_MT"
	// EnvPrefillKS is DecodeTuning.PrefillKS: prefill.cu's warp groups a
	// CTA that split its key tiles (1 or 2; unset: the planner's, prefillKS).
	EnvPrefillKS = "BITDECODE_PREFILL_KS"
	// EnvPrefillDequant set to false (0) is DecodeTuning.NoPrefillDequant:
	// prefill.cu reads a low-bit cache's blocks itself instead of over an
	// fp16 copy of them (PrefillPlan.LaunchDequant), for comparisons.
	EnvPrefillDequant = "BITDECODE_PREFILL_DEQUANT"
	// EnvDecodePDL is DecodeTuning.PDL: how the tensor-core decode kernels
	// start after the kernel ahead (the KV append or pack). "early" and
	// "wait" run both as programmatic dependents, reading the blocks packed
	// before the launch's tokens before their dependency wait or only after
	// it; "off" launches both after the kernel ahead has finished (as before
	// session 17). Unset: decode_mma.cu early, decode_wgmma.cu early for its
	// padded one-sequence plan and off otherwise (PDLAuto).
	// Either way a split grid of more than one wave, or of several
	// sequences, launches after the kernel ahead has finished
	// (DecodePlan.dependentLaunch).
	EnvDecodePDL = "BITDECODE_DECODE_PDL"
	// EnvDecodeMergeFence set to "sc" is DecodeTuning.MergeFenceSC: the
	// fused merge's count with every thread's __threadfence (v2.5-v2.15)
	// instead of one thread's release and acquire ("rel", the default).
	EnvDecodeMergeFence = "BITDECODE_DECODE_MERGE_FENCE"
	// EnvDecodeTimeline set to true (1) is DecodeTuning.Timeline:
	// decode_mma.cu compiled to record each CTA's phases (session 19),
	// which bench attn prints.
	EnvDecodeTimeline = "BITDECODE_DECODE_TIMELINE"
	// EnvDecodeTimelineCSV is DecodeTuning.TimelineCSV: a file that bench
	// attn appends every timed CTA's record to, as CSV (session 26).
	EnvDecodeTimelineCSV = "BITDECODE_DECODE_TIMELINE_CSV"
	// EnvWGMMAStages, EnvWGMMAMW and EnvWGMMAMinB are WGMMATuning's ring
	// depth (2-8 tiles), tile (1 or 2 wgmma M-blocks of 64 tokens) and CTAs
	// per SM the registers must allow (1-4).
	EnvWGMMAStages = "BITDECODE_WGMMA_STAGES"
	EnvWGMMAMW     = "BITDECODE_WGMMA_MW"
	EnvWGMMAMinB   = "BITDECODE_WGMMA_MINB"
	// EnvWGMMAPad set to false (0) is WGMMATuning.NoPad: a one-sequence
	// fp16 plan's shared memory unpadded (three CTAs may share an SM), so
	// that PDLAuto launches it after the kernel ahead has finished, as
	// before decode-step.md v28.
	EnvWGMMAPad = "BITDECODE_WGMMA_PAD"
	// EnvPlanesMT is PlanesTuning.MT: split_mma's groups of 16 tokens per
	// tile, per tier, "H,M,L" with each 1, 2, 4 or 8 (e.g. "1,2,4").
	EnvPlanesMT = "BITDECODE_PLANES_MT"
	// EnvPlanesPrefetch is PlanesTuning.Prefetch: split_mma's register
	// double buffering of HIGH tiles. Off by default: on the H100 it makes
	// all-HIGH reads 1.2-1.4x faster but MEDIUM and LOW reads (and so every
	// realistic mix) 1.5-2x slower (bench/results/2026-11-23-h100-bw).
	EnvPlanesPrefetch = "BITDECODE_PLANES_PREFETCH"
	// EnvPlanesPrefetchM and EnvPlanesPrefetchL are PlanesTuning's
	// PrefetchMedium and PrefetchLow: true (1) double-buffers split_mma's
	// runs of MEDIUM (LOW) tiles in registers. Off by default: on the H100
	// all-8-bit reads within 1.5% either way, h20:m40:l40 4-16% slower
	// (bench/results/2026-11-25-h100-bw-9).
	EnvPlanesPrefetchM = "BITDECODE_PLANES_PREFETCH_M"
	EnvPlanesPrefetchL = "BITDECODE_PLANES_PREFETCH_L"
	// EnvPlanesMinSplit is PlanesTuning.MinSplitTokens: the fewest positions
	// a split of split_mma gets.
	EnvPlanesMinSplit = "BITDECODE_PLANES_MIN_SPLIT"
	// EnvPlanesWeights is PlanesTuning.Weights: split_mma's cost of a
	// HIGH, MEDIUM and LOW group when a CTA's groups are shared among its
	// warps, "H,M,L" with each 1 to 64 ("1,1,1": equal numbers of groups).
	EnvPlanesWeights = "BITDECODE_PLANES_WEIGHTS"
	// EnvPlanesMinB is PlanesTuning.MinB: the CTAs per SM split_mma's
	// registers must allow (1-4; __launch_bounds__).
	EnvPlanesMinB = "BITDECODE_PLANES_MINB"
	// EnvPlanesSplits set to "target:N" is PlanesTuning.TargetCTAs:
	// split_mma's splits sized for about N CTAs per step (v2.3's rule: N =
	// 528 with BITDECODE_PLANES_MIN_SPLIT=512) instead of planesSplitLen's
	// wave rule (v2.4).
	EnvPlanesSplits = "BITDECODE_PLANES_SPLITS"
	// EnvPlanesSplitCost set to false (0) is PlanesTuning.PositionSplits:
	// split_mma's splits cut the position space in equal lengths (v2.3)
	// instead of equal costs by the tier weights (v2.4).
	EnvPlanesSplitCost = "BITDECODE_PLANES_SPLIT_COST"
	// EnvPlanesFuse set to false (0) is PlanesTuning.NoFuse: the merge of
	// split_mma's splits left to the combine launch (v2.3), for comparisons.
	EnvPlanesFuse = "BITDECODE_PLANES_FUSE"
	// EnvPlanesDeal is PlanesTuning.Deal: "none" (v2.11's contiguous
	// shares by the tier weights), "warps" or "splits" (unset: the
	// planner's, planesDeal).
	EnvPlanesDeal = "BITDECODE_PLANES_DEAL"
	// EnvPlanesTimeline set to true (1) is PlanesTuning.Timeline:
	// split_mma compiled with its launch timeline (decode_timeline.go), for
	// measurement only.
	EnvPlanesTimeline = "BITDECODE_PLANES_TIMELINE"
	// EnvPackSlices is PackTuning.Slices: the slices per half of a pack
	// plan's launches (1 to packMaxSlices).
	EnvPackSlices = "BITDECODE_PACK_SLICES"
)

// Tuning holds every planner's knobs. The zero Tuning is the measured
// default of each (docs/perf/decode-attention.md); a program fills it once
// at its edge (ParseTuning(os.LookupEnv)) and passes the parts down to the
// plans: PlanDecodeWith, PlanPlanesWith, PlanPackWith.
type Tuning struct {
	Decode DecodeTuning
	Planes PlanesTuning
	Pack   PackTuning
}

// DecodeTuning is the decode planner's (PlanDecodeWith): the tensor-core
// kernels' tiles and their splits. Zero fields are the defaults.
type DecodeTuning struct {
	MMA   MMATuning
	WGMMA WGMMATuning
	// MinSplitTokens is the fewest tokens a split of the tensor-core kernels
	// gets (at least 16); 0 is the kernel's: mmaMinSplitTokens (512) for
	// decode_mma.cu, wgmmaMinSplitTokens (256) for decode_wgmma.cu.
	MinSplitTokens int
	// TargetCTAs, when positive, sizes the splits for about this many CTAs
	// per step (v2's rule) instead of whole waves (splitBlocks).
	TargetCTAs int
	// SplitRun is which of the block counts that give a one-wave plan of
	// few items (one sequence) its most CTAs the tensor-core planner takes
	// (splitBlocksRun); the zero value SplitRunAuto is the measured routing
	// (splitRunShortest).
	SplitRun SplitRunMode
	// NoFuse leaves the merge of the splits to decode_combine, a second
	// launch, instead of the last split of each row chunk (v2.5).
	NoFuse bool
	// NoOut32 makes DecodePlan.Out32 false: callers convert the fp16
	// output to float32 in a launch of their own (before v39).
	NoOut32 bool
	// NoPrefill keeps the GPU cache's prefill chunks on the decode kernel's
	// plan (Tq = the chunk) instead of prefill.cu (PrefillRoute).
	NoPrefill bool
	// PrefillStep is prefill.cu's online-softmax step in keys (16 or 32),
	// below its tile of 64 (32 at D = 256) whose loads it keeps; 0 is the
	// whole tile.
	PrefillStep int
	// PrefillMT is prefill.cu's m16 tiles of query rows a warp for every
	// launch (1: v3's 16 rows, 64 a CTA; 2: v4's 32 rows, 128 a CTA, where
	// the head dim allows it: prefillMaxMT); 0 is the planner's choice by
	// launch (prefillLaunchMT).
	PrefillMT int
	// PrefillKS is prefill.cu's warp groups a CTA (1: v3's one group of 4
	// warps; 2: v4's two, each taking every other key tile of the CTA's
	// rows, merged at the end); 0 is the planner's choice (prefillKS).
	PrefillKS int
	// NoPrefillDequant plans no dequantizing route for low-bit layouts
	// (PrefillPlan.Dequantizes false): prefill.cu dequantizes each tile
	// itself, as before docs/perf/prefill.md v5.
	NoPrefillDequant bool
	// PDL is how the tensor-core kernels start after the kernel ahead of
	// them on the stream (session 17); the zero value PDLAuto is the
	// measured default. Ctx.SetGridDependentLaunch(false) (gpu.Options.NoPDL)
	// turns every programmatic launch off whatever PDL says.
	PDL PDLMode
	// MergeFenceSC counts a split done in the fused merge after every
	// thread's __threadfence (fence.sc.gpu), as v2.5-v2.15 did, instead of
	// one thread's fence.acq_rel.gpu (bitdecode.cuh's lastArrivalRel). The
	// same bits either way.
	MergeFenceSC bool
	// Timeline compiles decode_mma.cu with its launch timeline
	// (-DBD_TIMELINE=1): each CTA writes %globaltimer at its entry and at the
	// end of each phase into a buffer of the plan's, read back by
	// DecodePlan.Timeline (decode_timeline.go). For measurement only: the
	// default kernel has none of it.
	Timeline bool
	// TimelineCSV, when not empty with Timeline, names a file that bench
	// attn appends the timed CTAs' records to (WriteTimelineCSV).
	TimelineCSV string
	// Ptxas, when not nil, receives ptxas's register and spill report of
	// each decode program as it is compiled.
	Ptxas io.Writer
}

// PDLMode is how a decode program starts after the kernel ahead of it
// (DecodeTuning.PDL).
type PDLMode int

const (
	// PDLAuto is PDLEarly for decode_mma.cu and for decode_wgmma.cu's
	// one-sequence fp16 plan padded to two CTAs an SM (wgmmaFewSmem,
	// decode-step.md v28), PDLOff for decode_wgmma.cu's other plans.
	// H100, B = 1 step (bench/results/2026-11-26-h100-attn-12/call2, main
	// and this alternated twice): early made the decode_mma.cu steps (int4,
	// int2) 0.05-0.10 ms faster at 32K and 128K, but fp16's decode_wgmma.cu
	// step at 128K 0.21 ms slower (its one-sequence plan counts on two CTAs
	// an SM, which its shared memory does not enforce: scheduled beside the
	// append, some SMs may take three; not measured apart); off is main's.
	// In every mode only a split grid of one wave for one sequence (fewer
	// than splitFewItems CTAs a split) is launched as a dependent: at max
	// batch early cost int4 55 x 32K +0.25 ms and int2 100 x 32K +0.4 ms a
	// step against off (bench/results/2026-11-26-s12-final/pdl), and one
	// wave of 32 x 8K or 16 x 32K +0.2-0.5 ms (session 25;
	// DecodePlan.dependentLaunch).
	PDLAuto PDLMode = iota
	// PDLEarly: a programmatic dependent (cuda.Program.GridDependent); each
	// CTA reads lengths, the block table and its first tiles of the blocks
	// packed before the launch's new tokens before its dependency wait
	// (bitdecode.cuh's kPDLEarly, oldBlocks).
	PDLEarly
	// PDLWait: a programmatic dependent whose every thread waits first
	// (BD_PDL_EARLY=0): only the launch itself overlaps the kernel ahead.
	PDLWait
	// PDLOff: launched as before session 17, after the kernel ahead has
	// finished (the kernels' waits are then no-ops).
	PDLOff
)

// pdlModes are the names of the PDLMode values, in order (EnvDecodePDL).
var pdlModes = []string{"auto", "early", "wait", "off"}

// String returns "auto", "early", "wait" or "off".
func (m PDLMode) String() string {
	if m >= 0 && int(m) < len(pdlModes) {
		return pdlModes[m]
	}
	return fmt.Sprintf("PDLMode(%d)", int(m))
}

// SplitRunMode is how the tensor-core planner cuts a one-wave plan of few
// items (DecodeTuning.SplitRun).
type SplitRunMode int

const (
	// SplitRunAuto is the measured routing (splitRunShortest): today
	// SplitRunShortest's plans.
	SplitRunAuto SplitRunMode = iota
	// SplitRunShortest takes, of the block counts that give the most CTAs,
	// the fewest (the shortest longest split) for every such plan of both
	// kernels.
	SplitRunShortest
	// SplitRunLargest takes the most, as every plan did before session 26
	// (v2.27): the last split may be a block or two.
	SplitRunLargest
)

// splitRunModes are the names of the SplitRunMode values, in order
// (EnvDecodeSplits).
var splitRunModes = []string{"auto", "shortest", "largest"}

// String returns "auto", "shortest" or "largest".
func (m SplitRunMode) String() string {
	if m >= 0 && int(m) < len(splitRunModes) {
		return splitRunModes[m]
	}
	return fmt.Sprintf("SplitRunMode(%d)", int(m))
}

// MMATuning is decode_mma.cu's. Zero fields are the defaults.
type MMATuning struct {
	// MT is the fragment groups of 16 tokens per tile (1, 2, 4 or 8, then
	// capped by the block and the key group); 0 is mmaTile's lane budget.
	MT int
	// Stages is the cp.async ring depth of low-bit formats (v2.11: 2, 3 or 4
	// tiles per warp, cut to what the CTAs per SM leave of shared memory); 0
	// is v2.7's in-place register pipeline, the default (the ring measured
	// slower).
	Stages int
	// MinB is the CTAs per SM the registers are capped for (1-4); 0 is
	// mmaTile's.
	MinB int
	// QK8 picks the scores' tensor cores for int2 and int4 keys (v2.8): 1
	// int8 (the query in 16-bit fixed point, two mmas), -1 fp16, 0 the
	// planner's rule (mmaQK8).
	QK8 int
	// PV8 picks the value side's tensor cores for int2 values (v2.9): 1
	// int8 (the weights in 20-bit fixed point, three mmas), -1 fp16, 0 the
	// planner's rule (mmaPV8).
	PV8 int
	// V211Unpack compiles decode_mma.cu with v2.11's unpack of int2 and
	// int4 values (bitdecode.cuh's code: exact integers under the magic
	// 1024) instead of v2.12's scaled fp16 subnormals (unpackV, unscaleV):
	// the define BD_SCALED_V=0. For the test that measures what the
	// scaling moves in the bits; slower, never the default.
	V211Unpack bool
	// LA switches decode_mma.cu's look-ahead refold (v2.24: int2 keys per
	// channel refold the query for the next tile under the current tile's
	// P·V, the query floats in shared memory): 1 on where it reads the
	// layout, -1 off, 0 the planner's rule (mmaLA).
	LA int
	// SeqLean switches v2.34's leaner tile loop in the per-sequence kernel
	// (plans whose splits follow each sequence's own length, DecodeShape's
	// SplitCap > 0: decode_mma.cu's kSeqLean): 1 on, -1 off, 0 the
	// planner's rule (mmaSeqLean). Fixed-split plans never take it.
	SeqLean int
}

// WGMMATuning is decode_wgmma.cu's. Zero fields are the defaults.
type WGMMATuning struct {
	// Stages is the TMA ring depth (2-8 tiles, fewer where shared memory
	// runs out); 0 is as many as wgmmaRingBudget holds.
	Stages int
	// MW is the tile in wgmma M-blocks of 64 tokens (1 or 2); 0 is 2 for
	// low-bit formats whose two stages fit a third of an SM, else 1.
	MW int
	// MinB is the CTAs per SM the registers are capped for (1-4); 0 is
	// wgmmaMinB's.
	MinB int
	// NoPad keeps a plan that counts on fewer CTAs an SM than its
	// registers and shared memory allow (one sequence, 16-bit K/V:
	// wgmmaPlanCTAs) at its own shared memory, where by default it is
	// padded to hold that count (wgmmaFewSmem) and, under PDLAuto, launched
	// as a programmatic dependent (decode-step.md v28).
	NoPad bool
}

// PlanesTuning is the bit-plane planner's (PlanPlanesWith). Zero fields are
// the defaults.
type PlanesTuning struct {
	// MT is split_mma's groups per tile of HIGH, MEDIUM and LOW tiles (each
	// 1, 2, 4 or 8, all three set or none); zero is planesMT's lane budget.
	MT [3]int
	// Prefetch double-buffers runs of HIGH tiles in registers (D <= 128).
	Prefetch bool
	// PrefetchMedium and PrefetchLow double-buffer runs of MEDIUM (LOW)
	// tiles in registers (D <= 128): 1 on; 0 (the default) and -1 off
	// (planesPrefetch).
	PrefetchMedium, PrefetchLow int
	// MinSplitTokens is the fewest positions a split of split_mma gets (at
	// least 64); 0 is planesMinSplitTokens (256; v2.3: 512).
	MinSplitTokens int
	// Weights is split_mma's cost of a HIGH, MEDIUM and LOW group (each 1
	// to 64, all three set or none) by which a CTA's groups are shared
	// among its warps (and, with cost splits, its (sequence, KV head)s into
	// splits); zero is planesDefaultWeights's.
	Weights [3]int
	// MinB is the CTAs per SM split_mma's registers are capped for (1-4);
	// 0 is the planner's (planesMinB).
	MinB int
	// TargetCTAs, when positive, sizes split_mma's splits for about this
	// many CTAs per step (v2.3's rule: 528, with MinSplitTokens 512)
	// instead of whole waves (planesSplitLen, v2.4).
	TargetCTAs int
	// PositionSplits cuts a (sequence, KV head)'s groups into splits of
	// equal positions (v2.3) instead of equal costs by the tier weights
	// (v2.4); the number of splits is the same.
	PositionSplits bool
	// NoFuse leaves the merge of split_mma's splits to the combine launch
	// (v2.3) instead of the last split CTA of each row chunk (v2.4).
	NoFuse bool
	// Deal is how split_mma shares a mixed (sequence, KV head)'s tiers
	// among its splits and warps; 0 is the planner's (planes.go
	// planesDeal: dealt warps, and dealt splits up to 4 splits).
	Deal PlanesDeal
	// Timeline compiles split_mma with its launch timeline (-DBD_TIMELINE=1,
	// session 14): each CTA writes %globaltimer at its entry and at the
	// ends of its phases, read back by PlanesPlan.Timeline
	// (decode_timeline.go). For measurement only: a one-thread stamp
	// kernel runs before each launch.
	Timeline bool
	// Ptxas, when not nil, receives ptxas's register and spill report of
	// each planes program as it is compiled.
	Ptxas io.Writer
}

// PlanesDeal is PlanesTuning.Deal.
type PlanesDeal int

const (
	// PlanesDealDefault is the planner's choice (planesDeal).
	PlanesDealDefault PlanesDeal = iota
	// PlanesDealNone shares a CTA's groups among its warps in contiguous
	// runs of equal cost by the tier weights, the splits too (v2.11).
	PlanesDealNone
	// PlanesDealWarps deals a mixed CTA's tiles to its warps in turn; the
	// splits are cut by cost.
	PlanesDealWarps
	// PlanesDealSplits gives every split the same share of each tier and
	// deals the warps, whatever the number of splits.
	PlanesDealSplits
)

// PackTuning is the pack planner's (PlanPackWith).
type PackTuning struct {
	// Slices fixes the CTAs per half of every launch (1 to 32); 0 sizes them
	// for about two CTAs per SM (packSlices).
	Slices int
}

// VarError is a bad value of a setting: the environment variable (or Go
// field) named, the value given and what is accepted.
type VarError struct {
	Name  string // e.g. "BITDECODE_DECODE_MT" or "MMATuning.MT"
	Value string
	Want  string // the accepted values, e.g. "1, 2, 4 or 8"
}

// Error returns "NAME=VALUE: want WANT".
func (e *VarError) Error() string { return fmt.Sprintf("%s=%s: want %s", e.Name, e.Value, e.Want) }

// Accepted values of the knobs, shared by ParseTuning and the planners'
// checks of a Tuning built in Go.
var (
	tilePow2       = []int{1, 2, 4, 8}
	mmaStageDepths = []int{0, 2, 3, 4}
	wgmmaMWs       = []int{1, 2}
)

const (
	wantPow2    = "1, 2, 4 or 8"
	wantStages  = "0, 2, 3 or 4"
	wantMinB    = "1 to 4"
	wantWGStage = "2 to 8"
	wantMW      = "1 or 2"
	wantBool    = "1, t, true, 0, f or false"
)

// ParseTuning reads the planners' environment variables through lookup
// (os.LookupEnv at a program's edge, a map in tests). An empty value is
// unset. A value out of range is an error (a *VarError, wrapped) naming the
// variable and the accepted values.
func ParseTuning(lookup func(string) (string, bool)) (Tuning, error) {
	p := envParser{lookup: lookup}
	var t Tuning
	d := &t.Decode
	d.MMA.MT = p.intIn(EnvDecodeMT, tilePow2, wantPow2)
	d.MMA.Stages = p.intIn(EnvDecodeStages, mmaStageDepths, wantStages)
	d.MMA.MinB = p.intRange(EnvDecodeMinB, 1, 4, wantMinB)
	d.WGMMA.Stages = p.intRange(EnvWGMMAStages, 2, wgmmaMaxStages, wantWGStage)
	d.WGMMA.MW = p.intIn(EnvWGMMAMW, wgmmaMWs, wantMW)
	d.WGMMA.MinB = p.intRange(EnvWGMMAMinB, 1, 4, wantMinB)
	if pad, ok := p.boolean(EnvWGMMAPad); ok {
		d.WGMMA.NoPad = !pad
	}
	d.MinSplitTokens = p.intRange(EnvDecodeMinSplit, 16, 1<<30, "a number of tokens of at least 16")
	if v, ok := p.get(EnvDecodeSplits); ok {
		if i := slices.Index(splitRunModes, v); i >= 0 {
			d.SplitRun = SplitRunMode(i)
		} else {
			n, err := strconv.Atoi(strings.TrimPrefix(v, "target:"))
			if !strings.HasPrefix(v, "target:") || err != nil || n < 1 {
				p.fail(EnvDecodeSplits, v, "target:N with N a positive number of CTAs, auto, shortest or largest")
			}
			d.TargetCTAs = n
		}
	}
	if on, ok := p.boolean(EnvDecodeQK8); ok {
		d.MMA.QK8 = -1
		if on {
			d.MMA.QK8 = 1
		}
	}
	if on, ok := p.boolean(EnvDecodePV8); ok {
		d.MMA.PV8 = -1
		if on {
			d.MMA.PV8 = 1
		}
	}
	if on, ok := p.boolean(EnvDecodeLA); ok {
		d.MMA.LA = -1
		if on {
			d.MMA.LA = 1
		}
	}
	if on, ok := p.boolean(EnvDecodeSeqLean); ok {
		d.MMA.SeqLean = -1
		if on {
			d.MMA.SeqLean = 1
		}
	}
	if fuse, ok := p.boolean(EnvDecodeFuse); ok {
		d.NoFuse = !fuse
	}
	if out32, ok := p.boolean(EnvDecodeOut32); ok {
		d.NoOut32 = !out32
	}
	if fa, ok := p.boolean(EnvPrefillFA); ok {
		d.NoPrefill = !fa
	}
	if v, ok := p.get(EnvPrefillStep); ok {
		switch v {
		case "16", "32", "64":
			d.PrefillStep, _ = strconv.Atoi(v)
			if d.PrefillStep == 64 {
				d.PrefillStep = 0
			}
		default:
			p.fail(EnvPrefillStep, v, "16, 32 or 64")
		}
	}
	d.PrefillMT = p.intIn(EnvPrefillMT, []int{1, 2}, "1 or 2")
	d.PrefillKS = p.intIn(EnvPrefillKS, []int{1, 2}, "1 or 2")
	if dq, ok := p.boolean(EnvPrefillDequant); ok {
		d.NoPrefillDequant = !dq
	}
	if v, ok := p.get(EnvDecodePDL); ok {
		i := slices.Index(pdlModes, v)
		if i < 0 {
			p.fail(EnvDecodePDL, v, "auto, early, wait or off")
		}
		d.PDL = PDLMode(max(i, 0))
	}
	if v, ok := p.get(EnvDecodeMergeFence); ok {
		if v != "sc" && v != "rel" {
			p.fail(EnvDecodeMergeFence, v, "rel or sc")
		}
		d.MergeFenceSC = v == "sc"
	}
	d.Timeline, _ = p.boolean(EnvDecodeTimeline)
	d.TimelineCSV, _ = p.get(EnvDecodeTimelineCSV)
	if on, _ := p.boolean(EnvPtxasVerbose); on {
		d.Ptxas, t.Planes.Ptxas = os.Stderr, os.Stderr
	}
	if v, ok := p.get(EnvPlanesMT); ok {
		f := strings.Split(v, ",")
		if len(f) != 3 {
			p.fail(EnvPlanesMT, v, "H,M,L such as 1,2,4, each "+wantPow2)
		}
		for i := 0; i < len(f) && i < 3; i++ {
			n, err := strconv.Atoi(strings.TrimSpace(f[i]))
			if err != nil || !slices.Contains(tilePow2, n) {
				p.fail(EnvPlanesMT, v, "H,M,L such as 1,2,4, each "+wantPow2)
			}
			t.Planes.MT[i] = n
		}
	}
	if v, ok := p.get(EnvPlanesWeights); ok {
		const want = "H,M,L such as 4,2,1, each 1 to 64"
		f := strings.Split(v, ",")
		if len(f) != 3 {
			p.fail(EnvPlanesWeights, v, want)
		}
		for i := 0; i < len(f) && i < 3; i++ {
			n, err := strconv.Atoi(strings.TrimSpace(f[i]))
			if err != nil || n < 1 || n > planesMaxWeight {
				p.fail(EnvPlanesWeights, v, want)
			}
			t.Planes.Weights[i] = n
		}
	}
	t.Planes.MinB = p.intRange(EnvPlanesMinB, 1, 4, "1 to 4")
	t.Planes.Prefetch, _ = p.boolean(EnvPlanesPrefetch)
	for _, v := range []struct {
		name string
		f    *int
	}{{EnvPlanesPrefetchM, &t.Planes.PrefetchMedium}, {EnvPlanesPrefetchL, &t.Planes.PrefetchLow}} {
		if on, ok := p.boolean(v.name); ok {
			*v.f = -1
			if on {
				*v.f = 1
			}
		}
	}
	t.Planes.MinSplitTokens = p.intRange(EnvPlanesMinSplit, planesTile, 1<<30, fmt.Sprintf("a number of positions of at least %d", planesTile))
	if v, ok := p.get(EnvPlanesSplits); ok {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "target:"))
		if !strings.HasPrefix(v, "target:") || err != nil || n < 1 {
			p.fail(EnvPlanesSplits, v, "target:N with N a positive number of CTAs")
		}
		t.Planes.TargetCTAs = n
	}
	if cost, ok := p.boolean(EnvPlanesSplitCost); ok {
		t.Planes.PositionSplits = !cost
	}
	if fuse, ok := p.boolean(EnvPlanesFuse); ok {
		t.Planes.NoFuse = !fuse
	}
	if v, ok := p.get(EnvPlanesDeal); ok {
		switch strings.TrimSpace(v) {
		case "none":
			t.Planes.Deal = PlanesDealNone
		case "warps":
			t.Planes.Deal = PlanesDealWarps
		case "splits":
			t.Planes.Deal = PlanesDealSplits
		default:
			p.fail(EnvPlanesDeal, v, "none, warps or splits")
		}
	}
	t.Planes.Timeline, _ = p.boolean(EnvPlanesTimeline)
	t.Pack.Slices = p.intRange(EnvPackSlices, 1, packMaxSlices, fmt.Sprintf("1 to %d", packMaxSlices))
	if p.err != nil {
		return Tuning{}, fmt.Errorf("kernels: %w", p.err)
	}
	return t, nil
}

// envParser reads variables through lookup and keeps the first bad value.
type envParser struct {
	lookup func(string) (string, bool)
	err    error
}

// get returns the variable's trimmed value and whether it is set and not empty.
func (p *envParser) get(name string) (string, bool) {
	v, _ := p.lookup(name)
	v = strings.TrimSpace(v)
	return v, v != ""
}

func (p *envParser) fail(name, v, want string) {
	if p.err == nil {
		p.err = &VarError{Name: name, Value: strconv.Quote(v), Want: want}
	}
}

// intIn returns the variable as one of allowed, or 0 when unset.
func (p *envParser) intIn(name string, allowed []int, want string) int {
	v, ok := p.get(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || !slices.Contains(allowed, n) {
		p.fail(name, v, want)
		return 0
	}
	return n
}

// intRange returns the variable as a number in [lo, hi], or 0 when unset.
func (p *envParser) intRange(name string, lo, hi int, want string) int {
	v, ok := p.get(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.fail(name, v, want)
		return 0
	}
	return n
}

// boolean returns the variable as strconv.ParseBool reads it, and whether
// it is set.
func (p *envParser) boolean(name string) (on, set bool) {
	v, ok := p.get(name)
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, wantBool)
		return false, false
	}
	return b, true
}

// check returns an error naming the first field of t out of range.
func (t DecodeTuning) check() error {
	bad := func(field string, v int, want string) error {
		return fmt.Errorf("kernels: %w", &VarError{Name: field, Value: strconv.Itoa(v), Want: "0 (the default) or " + want})
	}
	switch {
	case t.MMA.MT != 0 && !slices.Contains(tilePow2, t.MMA.MT):
		return bad("MMATuning.MT", t.MMA.MT, wantPow2)
	case !slices.Contains(mmaStageDepths, t.MMA.Stages):
		return bad("MMATuning.Stages", t.MMA.Stages, wantStages)
	case t.MMA.MinB < 0 || t.MMA.MinB > 4:
		return bad("MMATuning.MinB", t.MMA.MinB, wantMinB)
	case t.MMA.QK8 < -1 || t.MMA.QK8 > 1:
		return bad("MMATuning.QK8", t.MMA.QK8, "1 (int8) or -1 (fp16)")
	case t.MMA.PV8 < -1 || t.MMA.PV8 > 1:
		return bad("MMATuning.PV8", t.MMA.PV8, "1 (int8) or -1 (fp16)")
	case t.MMA.LA < -1 || t.MMA.LA > 1:
		return bad("MMATuning.LA", t.MMA.LA, "1 (on) or -1 (off)")
	case t.WGMMA.Stages != 0 && (t.WGMMA.Stages < 2 || t.WGMMA.Stages > wgmmaMaxStages):
		return bad("WGMMATuning.Stages", t.WGMMA.Stages, wantWGStage)
	case t.WGMMA.MW != 0 && !slices.Contains(wgmmaMWs, t.WGMMA.MW):
		return bad("WGMMATuning.MW", t.WGMMA.MW, wantMW)
	case t.WGMMA.MinB < 0 || t.WGMMA.MinB > 4:
		return bad("WGMMATuning.MinB", t.WGMMA.MinB, wantMinB)
	case t.MinSplitTokens != 0 && t.MinSplitTokens < 16:
		return bad("DecodeTuning.MinSplitTokens", t.MinSplitTokens, "at least 16")
	case t.TargetCTAs < 0:
		return bad("DecodeTuning.TargetCTAs", t.TargetCTAs, "a positive number of CTAs")
	case t.PDL < PDLAuto || t.PDL > PDLOff:
		return bad("DecodeTuning.PDL", int(t.PDL), "PDLEarly (1), PDLWait (2) or PDLOff (3)")
	case t.SplitRun < SplitRunAuto || t.SplitRun > SplitRunLargest:
		return bad("DecodeTuning.SplitRun", int(t.SplitRun), "SplitRunShortest (1) or SplitRunLargest (2)")
	}
	return nil
}

// check returns an error naming the first field of t out of range.
func (t PlanesTuning) check() error {
	if t.MT != [3]int{} {
		for _, n := range t.MT {
			if !slices.Contains(tilePow2, n) {
				return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.MT", Value: fmt.Sprint(t.MT), Want: "all zero (the default) or each of H, M, L " + wantPow2})
			}
		}
	}
	if t.Weights != [3]int{} {
		for _, n := range t.Weights {
			if n < 1 || n > planesMaxWeight {
				return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.Weights", Value: fmt.Sprint(t.Weights),
					Want: fmt.Sprintf("all zero (the default) or each of H, M, L 1 to %d", planesMaxWeight)})
			}
		}
	}
	if t.PrefetchMedium < -1 || t.PrefetchMedium > 1 {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.PrefetchMedium", Value: strconv.Itoa(t.PrefetchMedium), Want: "0 (the default), 1 (on) or -1 (off)"})
	}
	if t.PrefetchLow < -1 || t.PrefetchLow > 1 {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.PrefetchLow", Value: strconv.Itoa(t.PrefetchLow), Want: "0 (the default), 1 (on) or -1 (off)"})
	}
	if t.Deal < PlanesDealDefault || t.Deal > PlanesDealSplits {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.Deal", Value: strconv.Itoa(int(t.Deal)), Want: "0 (the default) to 3 (PlanesDealSplits)"})
	}
	if t.MinB < 0 || t.MinB > 4 {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.MinB", Value: strconv.Itoa(t.MinB), Want: "0 (the default) or 1 to 4"})
	}
	if t.MinSplitTokens != 0 && t.MinSplitTokens < planesTile {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.MinSplitTokens", Value: strconv.Itoa(t.MinSplitTokens),
			Want: fmt.Sprintf("0 (the default) or at least %d", planesTile)})
	}
	if t.TargetCTAs < 0 {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PlanesTuning.TargetCTAs", Value: strconv.Itoa(t.TargetCTAs), Want: "0 (the default) or a positive number of CTAs"})
	}
	return nil
}

// check returns an error when t's slices are out of range.
func (t PackTuning) check() error {
	if t.Slices < 0 || t.Slices > packMaxSlices {
		return fmt.Errorf("kernels: %w", &VarError{Name: "PackTuning.Slices", Value: strconv.Itoa(t.Slices), Want: fmt.Sprintf("0 (the default) or 1 to %d", packMaxSlices)})
	}
	return nil
}

// options.go: the CUDA backend's settings as data, and ParseOptions, the
// one place that reads its environment variables (with those of
// gpu/kernels and gpu/cuda, through their own parsers).

package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// Environment variables of the backend, read by ParseOptions only
// (docs/gpu.md has the table of every BITDECODE_* variable).
const (
	// EnvNoGEMV is Options.NoGEMV: Linear uses cuBLASLt for every batch
	// size (for comparisons; by default decode-sized batches use gemv.cu
	// and linear.cu).
	EnvNoGEMV = "BITDECODE_NO_GEMV"
	// EnvMMADecode is Options.MMADecode: batches of 1-2 rows use linear.cu
	// (grouped) instead of gemv.cu (for comparisons).
	EnvMMADecode = "BITDECODE_MMA_DECODE"
	// EnvBatchInvariant is Options.BatchInvariant: every fp16 linear layer
	// runs linear.cu, whose result for a row does not depend on the other
	// rows of the batch (serve --device cuda turns it on by default).
	EnvBatchInvariant = "BITDECODE_BATCH_INVARIANT"
	// EnvNoGraphs is Options.NoGraphs: every flush of the op queue runs
	// directly, with no CUDA graph replay (for comparisons).
	EnvNoGraphs = "BITDECODE_NO_GRAPHS"
	// EnvDECMode is Options.DECMode: how DEC runs beside the base GEMV,
	// "fused" (the default for int4 residuals: one launch whose
	// first n_tb CTAs select and compensate while the others compute the
	// base GEMV of a packed weight; decode batches), "serial" (selection
	// and compensation kernels after the base GEMV; the default for int8
	// and fp16 residuals) or "concurrent" (both on a second stream beside the base
	// GEMV of a packed weight, joined by one add; decode batches).
	EnvDECMode = "BITDECODE_DEC_MODE"
	// EnvMoEGroupRows is Options.MoEGroupRows: the fewest tokens at which
	// MixExperts groups the rows by expert (moe.cu's grouped GEMMs), or
	// "off" (the per-token GEMVs at every size, for comparisons).
	EnvMoEGroupRows = "BITDECODE_MOE_GROUP_ROWS"
	// EnvNoMoEPacked is Options.NoMoEPacked: packed low-bit experts routed
	// on the host, as before session 19 (for comparisons).
	EnvNoMoEPacked = "BITDECODE_NO_MOE_PACKED"
	// EnvDECBlocks is Options.DECBlocks: n_tb, the compensation's thread
	// blocks, for every DEC weight (also tuned ones), for experiments.
	EnvDECBlocks = "BITDECODE_DEC_BLOCKS"
	// EnvDECResidual is Options.DECResidualOnDevice: "host" (the default,
	// DecDEC's placement: pinned host memory read over PCIe) or "device"
	// (the residual in GPU memory: 0.53 bytes per weight more on the
	// device, and no PCIe read on the decode step's critical path).
	EnvDECResidual = "BITDECODE_DEC_RESIDUAL"
	// EnvNoPDL is Options.NoPDL: every kernel waits for the whole kernel
	// ahead of it, as before programmatic dependent launch (comparisons).
	EnvNoPDL = "BITDECODE_NO_PDL"
	// EnvPDLEarly is Options.PDLEarlyWeights: gemv.cu issues each lane's
	// first weight loads before its dependency wait.
	EnvPDLEarly = "BITDECODE_PDL_EARLY"
	// EnvGEMVDepth is Options.GEMVDepth: 1 (v6's batches of four weight
	// loads), or 4, 8 or 16 (a ring of that many loads a lane).
	EnvGEMVDepth = "BITDECODE_GEMV_DEPTH"
	// EnvGEMVSplits is Options.GEMVSplits: four split-K factors (1, 2, 4,
	// or 0 for the default's), one per tier of a gemv.cu launch's output
	// channels (up to 4096, 8192, 32768, above), e.g. "4,2,2,1".
	EnvGEMVSplits = "BITDECODE_GEMV_SPLITS"
	// EnvGEMVEarly is Options.GEMVEarly: the kinds of gemv.cu launch whose
	// first weight loads go before the dependency wait, a comma list of
	// plain, rope and swiglu, or none (the default: rope).
	EnvGEMVEarly = "BITDECODE_GEMV_EARLY"
	// EnvNoNormEarly is Options.NoEarlyNorm: add_rmsnorm_cluster reads the
	// residual and the norm's weight after its dependency wait always
	// (comparisons).
	EnvNoNormEarly = "BITDECODE_NO_NORM_EARLY"
	// EnvNoLinearEarly is Options.NoLinearEarly: linear.cu's narrow and
	// tiled wide kernels load their weights after their dependency wait,
	// and an add_rmsnorm after one reads its inputs after its own
	// (comparisons).
	EnvNoLinearEarly = "BITDECODE_NO_LINEAR_EARLY"
	// EnvNoLinearPersistent is Options.NoLinearPersistent: linear.cu's
	// narrow launches in the batch-invariant mode run a CTA an m-tile
	// (comparisons).
	EnvNoLinearPersistent = "BITDECODE_NO_LINEAR_PERSISTENT"
	// EnvNoLinearFold is Options.NoLinearFold: SwiGLU (GeGLU) and RoPE run
	// as their own launches after linear.cu's narrow kernel (comparisons).
	EnvNoLinearFold = "BITDECODE_NO_LINEAR_FOLD"
	// EnvNoChunkPath is Options.NoChunkPath: in the batch-invariant mode a
	// prefill chunk's rows run linear.cu with the step's others, as before
	// session 30 (comparisons).
	EnvNoChunkPath = "BITDECODE_NO_CHUNK_PATH"
	// EnvNoRoPEAppend is Options.NoRoPEAppend: a KV cache's append reads
	// q, k and v from q|k|v's RoPE split after it, as its own launch
	// (comparisons).
	EnvNoRoPEAppend = "BITDECODE_NO_ROPE_APPEND"
	// EnvGEMVQV2 is Options.GEMVQV2: packed low-bit weights run gemvq.cu's
	// v2 at one row of x too, instead of gemvq4.cu or gemvq3.cu
	// (comparisons).
	EnvGEMVQV2 = "BITDECODE_GEMVQ_V2"
	// EnvGEMVQV3 is Options.GEMVQV3: packed low-bit weights run gemvq3.cu's
	// v3 at one row of x where gemvq4.cu's v5 (int4) or v4 (int8) would
	// (comparisons).
	EnvGEMVQV3 = "BITDECODE_GEMVQ_V3"
	// EnvGEMVQWQ is Options.GEMVQWQ: int4 weights of 2048 rows or more
	// without DEC keep wq's layout on the device instead of the tiled one
	// (comparisons; the same bits).
	EnvGEMVQWQ = "BITDECODE_GEMVQ_WQ"
	// EnvGEMVQV51 is Options.GEMVQV51: gemvq4.cu's v5 and v6 run session
	// 15's step (v5.1, v6) instead of v5.2's and v6.1's (comparisons; the
	// same bits).
	EnvGEMVQV51 = "BITDECODE_GEMVQ_V51"
	// EnvGEMVQV61 is Options.GEMVQV61: tiled weights at one row of x run
	// v6.1 instead of v6.2 or, for int3, v6.1c (comparisons; the same
	// bits).
	EnvGEMVQV61 = "BITDECODE_GEMVQ_V61"
	// EnvGEMVQInt3V32 is Options.GEMVQInt3V32: int3 weights keep wq's
	// layout and gemvq3.cu's v3.2 at one row of x instead of the tiled
	// layout and v6.1 (comparisons; other sums).
	EnvGEMVQInt3V32 = "BITDECODE_GEMVQ_INT3_V32"
	// EnvGEMVQInt8V4 is Options.GEMVQInt8V4: int8 weights keep wq's layout
	// and gemvq4.cu's v4.1 at one row of x instead of the tiled layout and
	// v6.1 (comparisons; the same bits on the 8B shapes).
	EnvGEMVQInt8V4 = "BITDECODE_GEMVQ_INT8_V4"
	// EnvGEMMQOff is Options.GEMMQOff: packed weights in the tiled layout
	// dequantize to fp16 and go to cuBLASLt at 17-128 rows of x too, as
	// before session 16 (comparisons; other sums).
	EnvGEMMQOff = "BITDECODE_GEMMQ_OFF"
	// EnvGEMVQApart is Options.GEMVQApart: JoinWeights leaves packed
	// weights apart (q|k|v as three GEMVs at one row; comparisons).
	EnvGEMVQApart = "BITDECODE_GEMVQ_APART"
	// EnvDECQ3 is Options.DECQ3: a packed weight with DEC keeps wq's
	// layout and fused mode's gemv_q3_dec beside v3.2 at one row, as
	// before session 19 (comparisons).
	EnvDECQ3 = "BITDECODE_DEC_Q3"
	// EnvNoDECNormSelect is Options.NoDECNormSelect: DEC's lists made by a
	// select_q6 launch a GEMV again instead of by the op that writes x
	// (AddRMSNorm, the attention output's conversion, gate|up's SwiGLU
	// split; sessions 19b-20; comparisons).
	EnvNoDECNormSelect = "BITDECODE_NO_DEC_NORM_SELECT"
	// EnvDECTail is Options.DECTail: which form of gemv_q6_dec the q6
	// route runs, "auto" (the default: the tail from 128 selected rows at
	// splits 2-8), "never" (the DEC warp's) or "always" (comparisons).
	EnvDECTail = "BITDECODE_DEC_TAIL"
	// EnvDECDiag is Options.DECNoRows when "norows": a diagnostic that
	// launches every q6 GEMV with an empty list (its list still made), so
	// that the step times the kernel and the list's producer without the
	// rows' work. Its outputs lack the compensation: timing only.
	EnvDECDiag = "BITDECODE_DEC_DIAG"
	// EnvGEMVQJoinSplit is Options.GEMVQJoinSplit: the warps per row group
	// (1, 2, 4 or 8) of the one v6.1 launch over a joined packed group
	// (comparisons).
	EnvGEMVQJoinSplit = "BITDECODE_GEMVQ_JOIN_SPLIT"
	// EnvSkinny is Options.Skinny: where the large batches' GEMMs of 17-128
	// rows run skinny.cu instead of cuBLASLt: "off", "on" (every one) or
	// "auto" (each shape and 16-row bucket timed once, the faster kept).
	EnvSkinny = "BITDECODE_SKINNY"
	// EnvDownloadChunk is Options.DownloadChunkKiB: a float32 Download of
	// 4 MiB or more (the max-batch step's logits) crosses PCIe in pinned
	// chunks of this many KiB (default 8192), each copied out by several
	// goroutines while the next one travels; 0 copies straight into
	// pageable memory, as before (comparisons).
	EnvDownloadChunk = "BITDECODE_DOWNLOAD_CHUNK"
)

// SkinnyMode is Options.Skinny: where the cuBLASLt path's GEMMs of 17-128
// rows run on skinny.cu (kernels.Skinny) instead.
type SkinnyMode int

// The SkinnyModes; the zero value is the default (SkinnyOff:
// decode-step.md v21-mb).
const (
	SkinnyDefault SkinnyMode = iota
	// SkinnyOff: cuBLASLt for every GEMM, as before v21-mb.
	SkinnyOff
	// SkinnyOn: skinny.cu for every GEMM of 17-128 rows (fp16 weights,
	// K % 8 == 0) at its shape's split (kernels.Skinny.SkinnySplit).
	SkinnyOn
	// SkinnyAuto: the first GEMM of each shape and 16-row bucket times
	// skinny.cu and cuBLASLt on its operands (L2 flushed) and keeps
	// skinny.cu where it is at least 3% faster. Which one a shape runs,
	// and so its bits, may then differ from one process to the next.
	SkinnyAuto
)

// Options are the backend's settings. The zero Options is the default:
// gemv.cu for batches of 1-2 rows, linear.cu (grouped launches) up to 16,
// cuBLASLt above, CUDA graph replay, fused DEC with each
// weight's own n_tb, the kernels' measured tuning, and gpu/cuda configured
// as it already is. A program fills them once at its edge
// (ParseOptions(os.LookupEnv)) and passes them to Open.
type Options struct {
	// NoGEMV sends every Linear batch to cuBLASLt (BatchInvariant wins).
	NoGEMV bool
	// MMADecode sends batches of 1-2 rows to linear.cu (grouped) instead
	// of gemv.cu (BatchInvariant and NoGEMV win).
	MMADecode bool
	// BatchInvariant makes every fp16 Linear (the lm_head too) and
	// LinearGroup run linear.cu for every T: a row's result is then bitwise
	// independent of the batch it is computed in. Packed low-bit weights
	// are refused (gemvq.cu and the dequantize+cuBLASLt path round
	// differently by batch size). The GPU KV cache's own
	// kvcache.Options.BatchInvariant does the same for attention.
	BatchInvariant bool
	// NoGraphs runs every flush of the op queue directly (no graphs).
	NoGraphs bool
	// DECMode is how DEC runs beside the base GEMV; 0 is kernels.DECFused
	// for int4 residuals, kernels.DECSerial for int8 and fp16 ones.
	DECMode kernels.DECMode
	// MoEGroupRows is the fewest tokens at which MixExperts groups the
	// (token, slot) pairs by expert and runs each expert as a tiled GEMM
	// (moe.go); 0 is the default (from 4 rows an expert on average,
	// T·k >= 4·E); negative: never.
	MoEGroupRows int
	// NoMoEPacked makes LoadExperts refuse packed low-bit experts, so that
	// such layers route on the host (model.Llama.moeHost: a round trip per
	// sparse layer, no CUDA graph of the step). By default it takes them
	// (int3, int4, int8; moe.go's quantExperts: the indexed one-row GEMVs
	// of kernels.GEMVQMoE), so that their decode batches route on the
	// device and replay as CUDA graphs (docs/perf/moe.md, moeq: 3.0-3.4x
	// faster a Mixtral-8x7B layer at T = 1, 25-35x a Qwen3-30B-A3B one).
	NoMoEPacked bool
	// DECBlocks, when positive, is n_tb for every DEC weight (else the
	// weight's own wq.DEC.Blocks, else a default); it must fit each
	// weight's shape.
	DECBlocks int
	// DECResidualOnDevice keeps DEC residuals in device memory instead of
	// mapped host memory (EnvDECResidual): the same kernels and bits,
	// without the zero-copy reads' latency (docs/perf/dec.md).
	DECResidualOnDevice bool
	// NoPDL launches every kernel after the whole kernel ahead of it has
	// finished. By default (on Hopper and later) the kernels of ops.cu,
	// gemv.cu and linear.cu start as programmatic dependents: scheduled
	// during the tail of the kernel ahead, they wait for it
	// (griddepcontrol.wait) before touching memory (docs/perf/decode-step.md
	// v6). The bits are the same either way.
	NoPDL bool
	// PDLEarlyWeights makes gemv.cu issue each lane's first weight loads
	// before it waits for the kernel ahead (the backend's weights are
	// written only at load, which ends in a stream sync). No effect with
	// NoPDL beyond the order of the loads; the same bits.
	PDLEarlyWeights bool
	// GEMVDepth, when not 0, is the schedule of gemv.cu's weight loads at
	// 1-2 rows in place of kernels.GEMVDepthFor's (GEMV.Depth):
	// kernels.GEMVBatch (1), or a ring of 4, 8 or 16 loads a lane in
	// flight (docs/perf/decode-step.md v20). The same bits at every depth.
	GEMVDepth int
	// Skinny is where the large batches' GEMMs run on skinny.cu
	// (EnvSkinny); the batch-invariant mode never does.
	Skinny SkinnyMode
	// GEMVSplits, where a tier's entry is not 0, is the split-K factor
	// gemv.cu's launches of that tier take (kernels.GEMV.Splits; a
	// launch's sums depend on its split): for A/Bs in the decode step
	// (docs/perf/decode-step.md v21).
	GEMVSplits [kernels.GEMVSplitTiers]int
	// GEMVEarly is PDLEarlyWeights for some kinds of gemv.cu launch only
	// (kernels.GEMV.EarlyKinds); 0 is defaultGEMVEarly (q|k|v's RoPE
	// launch, decode-step.md v21), kernels.GEMVEarlyNone none. The same
	// bits.
	GEMVEarly kernels.GEMVEarlyKind
	// NoEarlyNorm keeps AddRMSNorm's loads of the residual and the norm's
	// weight after its dependency wait even where the op queued before it
	// is a gemv.cu launch that writes neither (earlyNormInputs; the same
	// bits; decode-step.md v21).
	NoEarlyNorm bool
	// NoLinearEarly, in the batch-invariant mode, keeps linear.cu's narrow
	// kernels' first weight loads (at most kernels.LinearTunedMaxRows
	// rows) and its tiled wide kernels' first weight stage (more than
	// kernels.LinearNarrowMaxRows rows) after their dependency wait
	// (kernels.Linear.EarlyWeights), and
	// an AddRMSNorm queued after such a launch reading its inputs after its
	// own (earlyNormInputs), as before decode-step.md v30. The same bits.
	// (The default mode's linear.cu launches never load early.)
	NoLinearEarly bool
	// NoLinearPersistent, in the batch-invariant mode, keeps linear.cu's
	// narrow launches (at most kernels.LinearTunedMaxRows rows) at a CTA an
	// m-tile (a pair of them for the pair kernels). By default a launch of
	// more tiles than fit on the GPU at once runs as many CTAs as fit,
	// each taking its tiles in turn (kernels.Linear.Persistent;
	// decode-step.md v30). The same bits.
	NoLinearPersistent bool
	// NoLinearFold, in the batch-invariant mode, keeps SwiGLU (GeGLU) and
	// RoPEQK apart from a grouped linear.cu narrow launch (at most
	// kernels.LinearTunedMaxRows rows) queued before them (fuse.go; by
	// default they run in its epilogue, linear.cu's pair kernels,
	// decode-step.md v30). The same bits. (The default mode's linear.cu
	// launches never fold.)
	NoLinearFold bool
	// NoChunkPath, in the batch-invariant mode, computes a prefill chunk's
	// rows of a linear layer with the step's other rows on linear.cu, where
	// by default they run apart on the default mode's path for the chunk's
	// length (chunk.go: a row's bits then depend on its chunk, never on its
	// batch).
	NoChunkPath bool
	// NoRoPEAppend keeps a KV cache's attention op apart from the joined
	// q|k|v GEMM with RoPE queued before it: rope_cols writes float32 q, k
	// and v and the cache's append reads them back, instead of one launch
	// reading the GEMM's output (ropekv.go; the same bits; decode-step.md
	// v24).
	NoRoPEAppend bool
	// GEMVQV2 makes packed low-bit weights without DEC run gemvq.cu's v2
	// (tensor cores) at one row of x too, where gemvq4.cu's v5 / v4 or
	// gemvq3.cu's v3 run by default (kernels.GEMVQ.V2; docs/perf/gemvq.md).
	// Its sums differ from theirs.
	GEMVQV2 bool
	// GEMVQV3 makes packed low-bit weights without DEC run gemvq3.cu's v3
	// (CUDA cores) at one row of x where gemvq4.cu (tensor cores) runs by
	// default: v5 for int4, v4 for int8, weights of 2048 rows or more
	// (kernels.GEMVQ.V3, UsesV5, UsesV4; docs/perf/gemvq.md v4, v5). Its
	// sums differ from theirs.
	GEMVQV3 bool
	// GEMVQWQ keeps int4 weights without DEC that v5 would read at one row
	// of x (kernels.GEMVQ.UsesV5: 2048 rows or more), and the int3 and int8
	// ones LaunchTiled would give v6.1 (UsesV6), in wq's layout on the
	// device. By default such a weight's only device copy is the
	// GPU-private tiled layout (kernels.PackTiles, packed on the device at
	// load, wq's copy freed): v6.1 (v6 with GEMVQV51) at one row of x, v2
	// over the tiled layout at 2-16 rows, the tiled dequantization for
	// prefill, the same bits as v5.1, v2 and the dequantization over wq's
	// layout, and the same bytes (docs/perf/gemvq.md, sessions 15, 15b and
	// 15c). A knob for A/Bs and tests.
	GEMVQWQ bool
	// GEMVQV51 makes gemvq4.cu's v5 (int4 at one row of x) and v6 run
	// session 15's step (v5.1, v6) instead of v5.2's and v6.1's, which
	// issue the same copies and compute the same sums with ~17-20% fewer
	// instructions a step (kernels.GEMVQ.V51; docs/perf/gemvq.md, session
	// 15b). The same bits either way.
	GEMVQV51 bool
	// GEMVQV61 makes tiled weights at one row of x run v6.1 (gemvq4.cu's
	// gemv_q5 LEAN over the tiled layout) where v6.2 (gemv_q7: v6.1 with x
	// split once a CTA instead of every step in every warp) or, for int3,
	// v6.1c (int3's codes unpacked in place) would (kernels.GEMVQ.V61;
	// docs/perf/gemvq.md, sessions 23 and 24). The same bits either way.
	GEMVQV61 bool
	// GEMVQInt3V32 keeps int3 weights without DEC that v6.1 would read at
	// one row of x (kernels.GEMVQ.UsesV6: 2048 rows or more) in wq's
	// layout, read by gemvq3.cu's v3.2 at one row as before session 15d.
	// By default such a weight's only device copy is the int3 tiled layout
	// (as int4's, GEMVQWQ): v6.1 at one row, v2 over it at 2-16 rows, the
	// tiled dequantization for prefill (docs/perf/gemvq.md, session 15d).
	// kernels.GEMVQ.V32Int3; a knob for A/Bs and tests.
	GEMVQInt3V32 bool
	// GEMVQInt8V4 keeps int8 weights without DEC that v6.1 would read at
	// one row of x (kernels.GEMVQ.UsesV6: where v4.1 reads them, 2048 rows
	// or more) in wq's layout, read by gemvq4.cu's v4.1 at one row as
	// before session 16. By default such a weight's only device copy is
	// the int8 tiled layout (as int4's and int3's, GEMVQWQ): v6.1 at one
	// row, v2 over it at 2-16 rows, the tiled dequantization for prefill
	// (docs/perf/gemvq.md, session 16). kernels.GEMVQ.V4Int8; a knob for
	// A/Bs and tests.
	GEMVQInt8V4 bool
	// GEMMQOff keeps the dequantization to fp16 plus cuBLASLt for packed
	// weights in the tiled layout at kernels.GEMMQMinRows to 128 rows of x, where gemmq.cu's fused dequant-GEMM runs by default
	// (qlinear.go linearFused and gemmqRoutes: weights of 2048 rows or
	// more, int8 within its limits; docs/perf/gemvq.md, session 16). A
	// knob for A/Bs and tests.
	GEMMQOff bool
	// GEMVQApart makes JoinWeights leave packed low-bit weights apart: a
	// LinearGroup over them (q|k|v) runs one GEMV per weight at one row,
	// as before session 16's join (k and v on v3.2 over wq's layout). By
	// default JoinWeights places such weights' tiled layouts one after
	// another where v6.1 then reads the joined rows and not some weight
	// alone (join.go's joinTiled; docs/perf/gemvq.md, session 16 "q|k|v
	// packed, one launch"). A knob for A/Bs and tests.
	GEMVQApart bool
	// DECQ3 keeps a packed int4 or int3 weight with DEC in wq's layout
	// and fused mode's gemv_q3_dec (DEC CTAs beside v3.2) at one row of x.
	// By default (session 19, docs/perf/dec.md), where its residual is
	// int4 in device memory, the mode fused and v6.1 would read the weight
	// (or its joined group) at one row, it is stored in the tiled layout
	// and one row runs a selection launch, then gemvq6dec.cu's gemv_q6_dec
	// (v6.1 with a DEC warp a CTA, the same bits as v6.1 then
	// wq.Compensate); 2-16 rows and prefill run the tiled base, then the
	// serial compensation.
	DECQ3 bool
	// NoDECNormSelect keeps a select_q6 launch before every q6 GEMV at one
	// row (session 19's route). By default (session 20, docs/perf/dec.md)
	// a q6 weight's list (or a joined q6 group's) at one row of x is made
	// by the op that writes x, where that op is queued right before the
	// GEMV and has a variant that writes the list too (the same x and the
	// same list as select_q6): AddRMSNorm over a cluster
	// (kernels.Ops.AddRMSNormSel) for q|k|v and gate|up, a GPU KV cache's
	// attention op (AttendOp.RunSel) for o, gate|up's joined split with
	// SwiGLU (kernels.Ops.GLUColsSel) for down: the four selection
	// launches a layer (layer 0: three) gone (normsel.go). A knob for
	// A/Bs and tests.
	NoDECNormSelect bool
	// DECTail is the form of gemv_q6_dec the q6 route runs
	// (kernels.GEMVQ6DEC.Tail; the zero value picks by the list's length).
	// Both forms give the same bits. A knob for A/Bs.
	DECTail kernels.GEMVQ6DECTail
	// DECNoRows launches every q6 GEMV with an empty list (a diagnostic:
	// the step's time without the rows' work; no compensation).
	DECNoRows bool
	// GEMVQJoinSplit is the warps per row group (1, 2, 4 or 8) of the v6.1
	// launch over a joined packed group at one row; 0 takes SplitV5For's
	// rule over the joined rows. Other splits give other sums (within the
	// same bound). A knob for A/Bs.
	GEMVQJoinSplit int
	// DownloadChunkKiB is the chunk size of the ring of two page-locked
	// chunks a float32 Download of 4 MiB or more goes through, each chunk
	// copied into the caller's slice by several goroutines while the next
	// crosses PCIe (download.go): 0 is defaultDownloadChunkKiB, a negative
	// value copies straight into the pageable slice (as before v22). The
	// same bytes either way.
	DownloadChunkKiB int
	// Tuning holds the kernel planners' knobs, for the code that plans
	// kernels on this backend's device (Backend.Options().Tuning).
	Tuning kernels.Tuning
	// CollectiveTimeout bounds each wait of a tensor-parallel rank
	// (OpenGroup) for its stream, which may hold an all-reduce waiting for
	// a peer: beyond it the group's NCCL communicators are aborted and
	// every rank fails. 0 is 60 s.
	CollectiveTimeout time.Duration
	// CUDA, when not nil, configures gpu/cuda (library paths, include
	// folders, kernel cache) before the device is opened.
	CUDA *cuda.Config
}

// ParseOptions reads the backend's environment variables, the kernel
// planners' (kernels.ParseTuning) and gpu/cuda's (cuda.ParseConfig) through
// lookup: os.LookupEnv at a program's edge, a map in tests. An empty value
// is unset; a bad one is an error naming the variable and the accepted
// values.
func ParseOptions(lookup func(string) (string, bool)) (Options, error) {
	var o Options
	get := func(name string) (string, bool) {
		v, _ := lookup(name)
		v = strings.TrimSpace(v)
		return v, v != ""
	}
	bad := func(name, v, want string) error {
		return fmt.Errorf("backend/gpu: %w", &kernels.VarError{Name: name, Value: strconv.Quote(v), Want: want})
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{EnvNoGEMV, &o.NoGEMV}, {EnvMMADecode, &o.MMADecode}, {EnvBatchInvariant, &o.BatchInvariant}, {EnvNoGraphs, &o.NoGraphs},
		{EnvNoPDL, &o.NoPDL}, {EnvPDLEarly, &o.PDLEarlyWeights}, {EnvNoNormEarly, &o.NoEarlyNorm},
		{EnvNoLinearEarly, &o.NoLinearEarly}, {EnvNoLinearFold, &o.NoLinearFold}, {EnvNoChunkPath, &o.NoChunkPath}, {EnvNoLinearPersistent, &o.NoLinearPersistent},
		{EnvNoRoPEAppend, &o.NoRoPEAppend}, {EnvGEMVQV2, &o.GEMVQV2}, {EnvGEMVQV3, &o.GEMVQV3}, {EnvGEMVQWQ, &o.GEMVQWQ},
		{EnvGEMVQV51, &o.GEMVQV51}, {EnvGEMVQV61, &o.GEMVQV61}, {EnvGEMVQInt3V32, &o.GEMVQInt3V32},
		{EnvGEMVQInt8V4, &o.GEMVQInt8V4}, {EnvGEMMQOff, &o.GEMMQOff}, {EnvGEMVQApart, &o.GEMVQApart}, {EnvNoMoEPacked, &o.NoMoEPacked},
		{EnvDECQ3, &o.DECQ3}, {EnvNoDECNormSelect, &o.NoDECNormSelect}} {
		if v, ok := get(b.name); ok {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return Options{}, bad(b.name, v, "1, t, true, 0, f or false")
			}
			*b.dst = on
		}
	}
	if v, ok := get(EnvDECMode); ok {
		m, err := kernels.ParseDECMode(v)
		if err != nil {
			return Options{}, bad(EnvDECMode, v, "serial, concurrent or fused")
		}
		o.DECMode = m
	}
	if v, ok := get(EnvDECTail); ok {
		switch strings.ToLower(v) {
		case "auto":
			o.DECTail = kernels.TailAuto
		case "never":
			o.DECTail = kernels.TailNever
		case "always":
			o.DECTail = kernels.TailAlways
		default:
			return Options{}, bad(EnvDECTail, v, "auto, never or always")
		}
	}
	if v, ok := get(EnvDECDiag); ok {
		if strings.ToLower(v) != "norows" {
			return Options{}, bad(EnvDECDiag, v, "norows")
		}
		o.DECNoRows = true
	}
	if v, ok := get(EnvMoEGroupRows); ok {
		n, err := strconv.Atoi(v)
		switch {
		case v == "off":
			o.MoEGroupRows = -1
		case err != nil || n < 1:
			return Options{}, bad(EnvMoEGroupRows, v, "a positive number of tokens or off")
		default:
			o.MoEGroupRows = n
		}
	}
	if v, ok := get(EnvDECBlocks); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Options{}, bad(EnvDECBlocks, v, "a positive number of thread blocks")
		}
		o.DECBlocks = n
	}
	if v, ok := get(EnvGEMVQJoinSplit); ok {
		n, err := strconv.Atoi(v)
		if err != nil || !slices.Contains(kernels.GEMVQ4Splits(), n) {
			return Options{}, bad(EnvGEMVQJoinSplit, v, "1, 2, 4 or 8")
		}
		o.GEMVQJoinSplit = n
	}
	if v, ok := get(EnvGEMVDepth); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || !kernels.ValidGEMVDepth(n) {
			return Options{}, bad(EnvGEMVDepth, v, "1, 4, 8 or 16")
		}
		o.GEMVDepth = n
	}
	if v, ok := get(EnvSkinny); ok {
		switch strings.ToLower(v) {
		case "off":
			o.Skinny = SkinnyOff
		case "on":
			o.Skinny = SkinnyOn
		case "auto":
			o.Skinny = SkinnyAuto
		default:
			return Options{}, bad(EnvSkinny, v, "off, on or auto")
		}
	}
	if v, ok := get(EnvGEMVSplits); ok {
		f := strings.Split(v, ",")
		var s [kernels.GEMVSplitTiers]int
		ok := len(f) == len(s)
		for i := 0; ok && i < len(s); i++ {
			var err error
			s[i], err = strconv.Atoi(strings.TrimSpace(f[i]))
			ok = err == nil
		}
		if !ok || !kernels.ValidGEMVSplits(s) {
			return Options{}, bad(EnvGEMVSplits, v, "four of 0, 1, 2, 4 split by commas")
		}
		o.GEMVSplits = s
	}
	if v, ok := get(EnvGEMVEarly); ok {
		for _, k := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "none":
				o.GEMVEarly |= kernels.GEMVEarlyNone
			case "plain":
				o.GEMVEarly |= kernels.GEMVEarlyPlain
			case "rope":
				o.GEMVEarly |= kernels.GEMVEarlyRoPE
			case "swiglu":
				o.GEMVEarly |= kernels.GEMVEarlySwiGLU
			default:
				return Options{}, bad(EnvGEMVEarly, v, "none or a comma list of plain, rope, swiglu")
			}
		}
	}
	if v, ok := get(EnvDownloadChunk); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return Options{}, bad(EnvDownloadChunk, v, "0 (pageable) or a chunk size in KiB up to 1048576")
		}
		o.DownloadChunkKiB = n
		if n == 0 {
			o.DownloadChunkKiB = -1
		}
	}
	if v, ok := get(EnvDECResidual); ok {
		switch strings.ToLower(v) {
		case "host":
		case "device":
			o.DECResidualOnDevice = true
		default:
			return Options{}, bad(EnvDECResidual, v, "host or device")
		}
	}
	var err error
	if o.Tuning, err = kernels.ParseTuning(lookup); err != nil {
		return Options{}, err
	}
	c, err := cuda.ParseConfig(lookup)
	if err != nil {
		return Options{}, err
	}
	o.CUDA = &c
	return o, nil
}

// SetLinear sets linear.cu's launch settings as the backend runs them
// (decode-step.md v30): in the batch-invariant mode early weight loads and
// persistent grids unless turned off; outside it neither (the default
// mode's few linear.cu launches). bench gemv uses it to time linear.cu as
// the backend runs it.
func (o Options) SetLinear(l *kernels.Linear) {
	l.EarlyWeights = o.BatchInvariant && !o.NoLinearEarly
	l.Persistent = o.BatchInvariant && !o.NoLinearPersistent
}

// skinnyMode returns the Skinny option with the default resolved.
func (o Options) skinnyMode() SkinnyMode {
	if o.Skinny == SkinnyDefault {
		return SkinnyOff
	}
	return o.Skinny
}

// decMode returns the DEC mode of a residual of element type e: the
// option, or for the zero value fused mode where it runs (int4
// residuals), else serial.
func (o Options) decMode(e wq.Elem) kernels.DECMode {
	if o.DECMode != 0 {
		return o.DECMode
	}
	if e == wq.Int4 {
		return kernels.DECFused
	}
	return kernels.DECSerial
}

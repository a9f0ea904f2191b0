package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/wq"
)

//go:embed dec.cu
var decSource string

// DECSource returns dec.cu's text. A kernel that hosts fused-mode DEC CTAs
// (dec::fused_cta, and part_load, part_ready, tile_value and tile_close on
// the base side; dec.cu's file comment has the contract) compiles it in
// front of its own source, as decode_mma.cu does with decode.cu.
func DECSource() string { return decSource }

// dec.cu's constants.
const (
	// DECThreads is the threads of a compensation CTA (dec.cu's kThreads).
	DECThreads = 256
	// DECTile is the outputs per tile flag in fused mode (kTile).
	DECTile = 16
	// decUnit is the outputs per slice unit: a DEC CTA's slice of the
	// outputs is whole units (kUnit), so N must be a multiple of it.
	decUnit = 32
	// decArgsBytes is sizeof(dec::Args).
	decArgsBytes = 96
	// DECPartEmpty is the bit pattern of an empty word of a fused launch's
	// part buffer (dec.cu's kPartEmpty, a NaN no float32 arithmetic
	// produces): every word of part holds it before the first launch, and
	// each launch leaves it so (whoever consumes a word resets it).
	DECPartEmpty = 0xffffffff
	// DECFusedSelectMax is the most channels per token a fused launch's
	// DEC CTAs select themselves (kSelMax: the list lives in shared
	// memory); with more, a select_topk launch precedes the fused one.
	DECFusedSelectMax = 1024
	// decMaxTokens bounds T (the compensation grid's y dimension).
	decMaxTokens = 65535
	// dec.cu's batching constants (kLoads, kParamLoads, kMinThreads):
	// 16-byte (twice decLoads in CTAs of decMinThreads) and param loads
	// per thread per batch, and the fewest threads a DEC CTA may have (a
	// batch has at most one row per thread).
	decLoads      = 4
	decParamLoads = 1
	decMinThreads = 128
)

// decWordsPerThread are the W instantiations: packed words of the slice
// each thread owns (its outputs' sums live in registers).
var decWordsPerThread = [...]int{1, 2, 4, 8}

// decElems are the residual element types dec.cu reads, indexed as its
// instantiations; the template argument is the wq.Elem value.
var decElems = [...]wq.Elem{wq.FP16, wq.Int8, wq.Int4}

// DECMode is how the compensation runs beside the base GEMV.
type DECMode uint8

const (
	// DECSerial launches the selection and the compensation after the
	// base GEMV on the same stream.
	DECSerial DECMode = iota + 1
	// DECFused runs the compensation CTAs in the base GEMV's grid
	// (dec::fused_cta): they select the channels themselves, and the base
	// CTAs and they meet per output tile through the part words and a
	// flag, whichever comes second adding the compensation (a base CTA
	// waits only for a DEC CTA that has claimed its tile); it needs a base
	// kernel that hosts them (dec.cu's contract).
	DECFused
	// DECConcurrent runs the selection and the compensation on a second
	// stream, forked before the base GEMV and joined after it: the
	// compensation of the residual goes to a zeroed scratch that one
	// elementwise add puts into y (the same single float32 add as serial,
	// so the same bits), and the PCIe reads overlap the GEMV's.
	DECConcurrent
)

// String returns "serial" or "fused".
func (m DECMode) String() string {
	switch m {
	case DECSerial:
		return "serial"
	case DECFused:
		return "fused"
	case DECConcurrent:
		return "concurrent"
	}
	return fmt.Sprintf("DECMode(%d)", uint8(m))
}

// ParseDECMode parses "serial", "concurrent" or "fused"; "" is serial.
func ParseDECMode(s string) (DECMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "serial":
		return DECSerial, nil
	case "fused":
		return DECFused, nil
	case "concurrent":
		return DECConcurrent, nil
	}
	return 0, fmt.Errorf("kernels: DEC mode %q: want serial, concurrent or fused", s)
}

// DECResidual is a DEC residual Rᵀ [K][N] as dec.cu reads it: packed rows
// of wq's layout (one per input channel) in host memory mapped into the
// device, addressed through the mapping's device pointers.
type DECResidual struct {
	Elem   wq.Elem        // wq.Int4 or wq.Int8 (groups of wq.ResidualGroup outputs), or wq.FP16
	Words  cuda.DevicePtr // K rows of RowWords(N) words, 16-byte aligned
	Params cuda.DevicePtr // K rows of N/ResidualGroup (scale, zero) pairs; 0 for fp16
	N, K   int            // the base weight's outputs and inputs
}

// DECReads reports whether dec.cu reads a residual of element type e for N
// outputs, and why not.
func DECReads(e wq.Elem, N int) error {
	if decElemIndex(e) < 0 {
		return fmt.Errorf("kernels: dec: %v residuals have no kernel (int4, int8 or fp16)", e)
	}
	if N <= 0 || N%decUnit != 0 {
		return fmt.Errorf("kernels: dec: %d outputs are not a positive multiple of %d", N, decUnit)
	}
	if e.IsInt() && N%wq.ResidualGroup != 0 {
		return fmt.Errorf("kernels: dec: %d outputs are not a multiple of the residual group %d", N, wq.ResidualGroup)
	}
	return nil
}

func decElemIndex(e wq.Elem) int {
	for i, v := range decElems {
		if v == e {
			return i
		}
	}
	return -1
}

// DECSelected returns S, the channels one token selects over K inputs at
// k_chunk kChunk: Σ over the chunks of wq.ChunkSelect (the length of each
// token's list in the selection scratch).
func DECSelected(K, kChunk int) int {
	kChunk = min(kChunk, wq.ChunkChannels)
	full := K / wq.ChunkChannels
	return full*wq.ChunkSelect(kChunk, wq.ChunkChannels) + wq.ChunkSelect(kChunk, K%wq.ChunkChannels)
}

// decUnitWords returns the packed words of one slice unit: a 32-bit word
// holds 32/bits outputs, so 32 outputs take bits words.
func decUnitWords(e wq.Elem) int { return decUnit * e.Bits() / 32 }

// decSlice returns DEC CTA b's slice of the outputs in units: [u0, u1), as
// dec.cu's slice computes it.
func decSlice(N, blocks, b int) (u0, u1 int) {
	units := N / decUnit
	return b * units / blocks, (b + 1) * units / blocks
}

// decWords returns W, the words per thread that cover the largest slice
// with DECThreads threads, or 0 if none does (too few blocks).
func decWords(e wq.Elem, N, blocks, threads int) int {
	units := N / decUnit
	most := (units + blocks - 1) / blocks * decUnitWords(e)
	for _, w := range decWordsPerThread {
		if w*threads >= most {
			return w
		}
	}
	return 0
}

// decOutputsPerThread are the P instantiations of fused mode
// (dec::fused_cta_any): consecutive outputs of the slice each thread sums.
var decOutputsPerThread = [...]int{1, 2, 4, 8, 16, 32}

// decOutputs returns P, the fewest outputs per thread of
// decOutputsPerThread that cover the largest slice with threads threads,
// or 0 if none does (too few blocks).
func decOutputs(N, blocks, threads int) int {
	units := N / decUnit
	most := (units + blocks - 1) / blocks * decUnit
	for _, p := range decOutputsPerThread {
		if p*threads >= most {
			return p
		}
	}
	return 0
}

// DECFusedMinBlocks returns the fewest DEC CTAs that a fused launch over N
// outputs allows with the fewest threads a fused kernel's CTA has
// (decMinThreads): each thread sums at most 32 outputs.
func DECFusedMinBlocks(N int) int {
	perCTA := decOutputsPerThread[len(decOutputsPerThread)-1] * decMinThreads
	return max(1, (N+perCTA-1)/perCTA)
}

// DECMinBlocks returns the fewest DEC CTAs (n_tb) that can compensate N
// outputs of element type e: each thread sums at most 8 packed words.
func DECMinBlocks(e wq.Elem, N int) int {
	units := N / decUnit
	perCTA := decWordsPerThread[len(decWordsPerThread)-1] * DECThreads / decUnitWords(e)
	return max(1, (units+perCTA-1)/perCTA)
}

// DECMaxBlocks returns the most DEC CTAs worth launching for N outputs: one
// per 32-output unit.
func DECMaxBlocks(N int) int { return max(1, N/decUnit) }

// decMinTile is the fewest outputs of a fused launch's tile: gemvq3.cu's
// fused CTAs own 16/S rows of int4 or int3 weights (S up to 4), one tile
// each; gemvq.cu's own DECTile.
const decMinTile = 4

// DECFlagWords returns the tile flags (uint32, zero before the first
// launch; each launch leaves them zero) a fused launch over N outputs
// needs: one per decMinTile outputs (the smallest tile of any fused
// kernel; gemvq.cu's use the first N/DECTile).
func DECFlagWords(N int) int { return (N + decMinTile - 1) / decMinTile }

// DECLaunch is one DEC launch: buffers, sizes and n_tb.
type DECLaunch struct {
	X, Y   cuda.DevicePtr // x [T][K], y [T][N] float32 on the device
	Sel    cuda.DevicePtr // [T][DECSelected(K, KChunk)] int32 scratch on the device
	Flags  cuda.DevicePtr // [DECFlagWords(N)] uint32, zeroed (fused mode only)
	Part   cuda.DevicePtr // [T][N] float32, the compensation, every word DECPartEmpty (fused mode only; left so)
	R      *DECResidual
	T      int
	KChunk int // channels per wq.ChunkChannels inputs (0: nothing to do)
	Blocks int // n_tb: DEC CTAs over the N outputs
	// Listed says Sel already holds every token's selection for this x and
	// k_chunk, written by an earlier launch (Select, or a fused launch with
	// Keep): a fused launch's DEC CTAs read it and select nothing, so they
	// start with the list. Fused mode only.
	Listed bool
	// Keep asks a fused launch whose DEC CTAs select to write each token's
	// list to Sel too (DEC CTA 0's plain stores), for later launches over
	// the same x and k_chunk (Listed). Fused mode only.
	Keep bool

	selOut cuda.DevicePtr // dec::Args.selOut (DECFusedArgs sets it from Keep)
}

// check validates the launch and returns S; fused launches may have no
// selection scratch (their DEC CTAs select).
func (l *DECLaunch) check(fused bool) (int, error) {
	r := l.R
	if r == nil {
		return 0, fmt.Errorf("kernels: dec: no residual")
	}
	if err := DECReads(r.Elem, r.N); err != nil {
		return 0, err
	}
	if r.K <= 0 || l.T < 1 || l.T > decMaxTokens || l.KChunk < 0 {
		return 0, fmt.Errorf("kernels: dec: T=%d K=%d k_chunk=%d out of range", l.T, r.K, l.KChunk)
	}
	if r.Words == 0 || (r.Elem.IsInt() && r.Params == 0) || l.X == 0 || l.Y == 0 || (l.Sel == 0 && !fused) {
		return 0, fmt.Errorf("kernels: dec: a null buffer (words %#x, params %#x, x %#x, y %#x, sel %#x)", r.Words, r.Params, l.X, l.Y, l.Sel)
	}
	if r.Words%16 != 0 {
		return 0, fmt.Errorf("kernels: dec: residual words at %#x are not 16-byte aligned", r.Words)
	}
	return DECSelected(r.K, l.KChunk), nil
}

// args packs dec::Args (dec.cu) for S selected channels per token and w:
// W, words per thread (serial), or P, outputs per thread (fused); 0 where
// the kernel does not use it.
func (l *DECLaunch) args(S, w int) []byte {
	b := make([]byte, 0, decArgsBytes)
	for _, p := range []cuda.DevicePtr{l.X, l.Y, l.Sel, l.R.Words, l.R.Params, l.Flags, l.Part, l.selOut} {
		b = binary.LittleEndian.AppendUint64(b, uint64(p))
	}
	for _, v := range []int{l.R.N, l.R.K, l.T, S, min(l.KChunk, wq.ChunkChannels), l.Blocks, int(l.R.Elem), w} {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
	}
	return b
}

// DEC holds dec.cu's kernels: the per-chunk selection and the compensation
// (serial mode) of each residual type and words per thread, and, loaded by
// LoadDECSelfTest, the fused protocol's self-test.
type DEC struct {
	sel   cuda.Function
	comp  [len(decElems)][len(decWordsPerThread)]cuda.Function
	fused cuda.Function // the fused protocol's self-test; zero unless LoadDECSelfTest
}

// LoadDEC compiles dec.cu (once per device) without the fused protocol's
// self-test (dec.cu's DEC_NO_SELFTEST: its ~1 MB of SASS is most of the
// program's compile time, and only tests launch it).
func LoadDEC(dev *cuda.Device) (*DEC, error) { return loadDEC(dev, false) }

// LoadDECSelfTest is LoadDEC with the fused protocol's self-test
// (FusedSelfTest), for tests: a program of its own beside LoadDEC's.
func LoadDECSelfTest(dev *cuda.Device) (*DEC, error) { return loadDEC(dev, true) }

func loadDEC(dev *cuda.Device, selfTest bool) (*DEC, error) {
	const selExpr, fusedExpr = "dec::select_topk", "dec::fused_selftest"
	cexpr := func(e wq.Elem, w int) string { return fmt.Sprintf("dec::compensate<%d, %d>", int(e), w) }
	exprs := []string{selExpr}
	opts := []string{"-DDEC_NO_SELFTEST=1"}
	if selfTest {
		exprs, opts = append(exprs, fusedExpr), nil
	}
	for _, e := range decElems {
		for _, w := range decWordsPerThread {
			exprs = append(exprs, cexpr(e, w))
		}
	}
	mod, err := dev.Compile(program("dec.cu", decSource, exprs, opts))
	if err != nil {
		return nil, err
	}
	d := &DEC{}
	if d.sel, err = mod.Function(selExpr); err != nil {
		return nil, err
	}
	if selfTest {
		if d.fused, err = mod.Function(fusedExpr); err != nil {
			return nil, err
		}
	}
	for i, e := range decElems {
		for j, w := range decWordsPerThread {
			if d.comp[i][j], err = mod.Function(cexpr(e, w)); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// Select writes each token's selected channels (wq.SelectApprox, in
// increasing order) to l.Sel: one CTA per (chunk of 1024 inputs, token).
// With k_chunk 0 it launches nothing.
func (d *DEC) Select(c *cuda.Ctx, st cuda.Stream, l *DECLaunch) error {
	S, err := l.check(false)
	if err != nil || S == 0 {
		return err
	}
	chunks := (l.R.K + wq.ChunkChannels - 1) / wq.ChunkChannels
	return c.Launch(d.sel, cuda.Dim3{X: chunks, Y: l.T}, cuda.Dim3{X: wq.ChunkChannels}, 0, st, l.args(S, 0))
}

// blocksFor checks n_tb and returns the words-per-thread instantiation.
func (l *DECLaunch) blocksFor() (ei, wi int, err error) {
	r := l.R
	if l.Blocks < 1 || l.Blocks > DECMaxBlocks(r.N) {
		return 0, 0, fmt.Errorf("kernels: dec: n_tb %d out of range [1, %d] for %d outputs", l.Blocks, DECMaxBlocks(r.N), r.N)
	}
	w := decWords(r.Elem, r.N, l.Blocks, DECThreads)
	if w == 0 {
		return 0, 0, fmt.Errorf("kernels: dec: n_tb %d is too few for %d %v outputs (at least %d)", l.Blocks, r.N, r.Elem, DECMinBlocks(r.Elem, r.N))
	}
	for wi = range decWordsPerThread {
		if decWordsPerThread[wi] == w {
			break
		}
	}
	return decElemIndex(r.Elem), wi, nil
}

// Compensate adds each token's compensation to y (serial mode: y holds the
// base output, l.Sel the selection of a Select launch before it): grid
// (n_tb, T). The result equals wq.Compensate bit for bit. With k_chunk 0
// it launches nothing and y is untouched.
func (d *DEC) Compensate(c *cuda.Ctx, st cuda.Stream, l *DECLaunch) error {
	S, err := l.check(false)
	if err != nil || S == 0 {
		return err
	}
	ei, wi, err := l.blocksFor()
	if err != nil {
		return err
	}
	return c.Launch(d.comp[ei][wi], cuda.Dim3{X: l.Blocks, Y: l.T}, cuda.Dim3{X: DECThreads}, 0, st, l.args(S, decWordsPerThread[wi]))
}

// FusedSelfTest runs fused mode's protocol with trivial base CTAs: n_tb DEC
// CTAs at the lowest blockIdx plus one base CTA per DECTile outputs that
// copies yBase [T][N] into y under the protocol. y ends as Compensate would
// leave yBase, l.Flags all zero and l.Part all DECPartEmpty again. The DEC CTAs select themselves
// unless S > DECFusedSelectMax (then a Select launch into l.Sel comes
// first). late > 0 forces the path where a base CTA finds its tile claimed
// by the DEC CTA and the words not yet stored (the DEC CTAs wait late
// between their claims and their stores; each base CTA waits for its
// tile's claim first), which must then wait for them. For tests: d must
// come from LoadDECSelfTest.
func (d *DEC) FusedSelfTest(c *cuda.Ctx, st cuda.Stream, l *DECLaunch, yBase cuda.DevicePtr, late time.Duration) error {
	if d.fused == (cuda.Function{}) {
		return fmt.Errorf("kernels: dec: the fused self-test is not compiled (LoadDECSelfTest has it, LoadDEC not)")
	}
	if yBase == 0 {
		return fmt.Errorf("kernels: dec: the fused self-test needs a base output")
	}
	if late < 0 || late > decMaxLate {
		return fmt.Errorf("kernels: dec: the fused self-test's late wait %v is out of [0, %v]", late, decMaxLate)
	}
	args, _, sel, err := DECFusedArgs(l, DECThreads)
	if err != nil {
		return err
	}
	if sel {
		if err := d.Select(c, st, l); err != nil {
			return err
		}
	}
	grid := l.Blocks + l.R.N/DECTile
	return c.Launch(d.fused, cuda.Dim3{X: grid}, cuda.Dim3{X: DECThreads}, 0, st, args, yBase, uint32(late.Nanoseconds()))
}

// decMaxLate bounds FusedSelfTest's late wait (dec.cu's base CTAs wait at
// most kLateWaitNs, 0.1 s, for a claim).
const decMaxLate = 10 * time.Millisecond

// DECFusedArgs returns dec::Args for a base kernel hosting fused-mode DEC
// CTAs with threads threads per CTA (passed by value, 96 bytes), and P, the
// outputs per thread its dec::fused_cta<E, P, THREADS> call must use (Args
// carries it, and the element type, for dec::fused_cta_any). The grid is
// l.Blocks DEC CTAs followed by the base CTAs. l needs Flags (zeroed) and
// Part (every word DECPartEmpty); the launch leaves them so.
// selects reports whether the DEC CTAs read l.Sel, which a Select launch
// must fill first (S > DECFusedSelectMax and not l.Listed); otherwise
// Args carries no selection and the DEC CTAs select themselves (and keep
// the lists in l.Sel with l.Keep), or, with l.Listed, the list in l.Sel.
// Selection, list or not, the result has the same bits.
func DECFusedArgs(l *DECLaunch, threads int) (args []byte, p int, selects bool, err error) {
	S, err := l.check(true)
	if err != nil {
		return nil, 0, false, err
	}
	if S == 0 || l.Flags == 0 || l.Part == 0 {
		return nil, 0, false, fmt.Errorf("kernels: dec: fused mode needs k_chunk > 0, flags and a part buffer")
	}
	if l.Blocks < 1 || l.Blocks > DECMaxBlocks(l.R.N) {
		return nil, 0, false, fmt.Errorf("kernels: dec: n_tb %d out of range [1, %d]", l.Blocks, DECMaxBlocks(l.R.N))
	}
	if threads < decMinThreads || threads%32 != 0 {
		return nil, 0, false, fmt.Errorf("kernels: dec: fused DEC CTAs of %d threads: want a multiple of 32, at least %d", threads, decMinThreads)
	}
	if p = decOutputs(l.R.N, l.Blocks, threads); p == 0 {
		return nil, 0, false, fmt.Errorf("kernels: dec: n_tb %d is too few for %d outputs with %d threads (at least %d)", l.Blocks, l.R.N, threads, DECFusedMinBlocks(l.R.N))
	}
	f := *l
	f.selOut = 0
	switch {
	case l.Listed:
		if l.Sel == 0 {
			return nil, 0, false, fmt.Errorf("kernels: dec: a listed fused launch needs the list (Sel)")
		}
	case S > DECFusedSelectMax:
		if l.Sel == 0 {
			return nil, 0, false, fmt.Errorf("kernels: dec: %d selected channels per token need a selection scratch (more than %d)", S, DECFusedSelectMax)
		}
		selects = true // the list ends in l.Sel, as Keep asks
	default:
		f.Sel = 0
		if l.Keep {
			if l.Sel == 0 {
				return nil, 0, false, fmt.Errorf("kernels: dec: a fused launch that keeps its lists needs Sel")
			}
			f.selOut = l.Sel
		}
	}
	return f.args(S, p), p, selects, nil
}

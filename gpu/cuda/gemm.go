package cuda

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DType is an element type of GEMM operands.
type DType int

// Element types. Values are this package's own; the cudaDataType_t of
// each is given by cudaType.
const (
	F32  DType = iota // float
	F16               // IEEE half
	BF16              // bfloat16
)

// String returns "f32", "f16" or "bf16".
func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// Size returns the element size in bytes.
func (t DType) Size() int {
	if t == F32 {
		return 4
	}
	return 2
}

// cuBLAS / cuBLASLt constants, values from library_types.h, cublas_api.h and
// cublasLt.h (CUDA 13.0).
const (
	cudaR32F  = 0  // CUDA_R_32F
	cudaR16F  = 2  // CUDA_R_16F
	cudaR16BF = 14 // CUDA_R_16BF

	cublasCompute32F = 68 // CUBLAS_COMPUTE_32F
	cublasOpN        = 0  // CUBLAS_OP_N
	cublasOpT        = 1  // CUBLAS_OP_T

	ltDescTransA = 3 // CUBLASLT_MATMUL_DESC_TRANSA (int32)
	ltDescTransB = 4 // CUBLASLT_MATMUL_DESC_TRANSB (int32)

	ltPrefMaxWorkspaceBytes = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64)
	ltPrefMinAlignABytes    = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES (uint32)
	ltPrefMinAlignBBytes    = 6 // ..._B_BYTES
	ltPrefMinAlignCBytes    = 7 // ..._C_BYTES
	ltPrefMinAlignDBytes    = 8 // ..._D_BYTES

	// gemmWorkspaceBytes is the cuBLASLt workspace; NVIDIA recommends
	// 32 MiB on Hopper.
	gemmWorkspaceBytes = 32 << 20
	// gemmMaxAlign is cuBLASLt's default assumed pointer alignment.
	gemmMaxAlign = 256
)

func (t DType) cudaType() (int, error) {
	switch t {
	case F32:
		return cudaR32F, nil
	case F16:
		return cudaR16F, nil
	case BF16:
		return cudaR16BF, nil
	}
	return 0, fmt.Errorf("cuda: unknown DType %d", int(t))
}

// ltAlgo is cublasLtMatmulAlgo_t: struct { uint64_t data[8]; }.
type ltAlgo [8]uint64

// ltHeuristicResult is cublasLtMatmulHeuristicResult_t (96 bytes):
// algo, size_t workspaceSize, cublasStatus_t state, float wavesCount,
// int reserved[4].
type ltHeuristicResult struct {
	algo          ltAlgo
	workspaceSize uint64
	state         int32
	wavesCount    float32
	reserved      [4]int32
}

// cublasLt holds the entry points of cuBLASLt.
type cublasLt struct {
	lib     *library
	version int // cublasLtGetVersion, e.g. 130100 for 13.1.0

	create, destroy, getVersion, getStatusName, getStatusString uintptr
	descCreate, descDestroy, descSetAttribute                   uintptr
	layoutCreate, layoutDestroy                                 uintptr
	prefCreate, prefDestroy, prefSetAttribute                   uintptr
	algoGetHeuristic, matmul                                    uintptr
	algoCheck, algoConfigGet, algoConfigSet                     uintptr
}

var (
	cublasLtOnce   sync.Once
	cublasLtLoaded *cublasLt
	cublasLtErr    error
)

// loadCUBLASLt opens cuBLASLt once per process. Failures wrap ErrNoCUBLASLt.
func loadCUBLASLt() (*cublasLt, error) {
	cublasLtOnce.Do(func() {
		cublasLtLoaded, cublasLtErr = openCUBLASLt(currentConfig(libCUBLASLt), dlopenNow)
	})
	return cublasLtLoaded, cublasLtErr
}

func openCUBLASLt(c Config, open opener) (*cublasLt, error) {
	lib, err := openLibrary(specCUBLASLt, c, open)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCUBLASLt, err)
	}
	s := &symbols{lib: lib}
	l := &cublasLt{lib: lib}
	l.create = s.need("cublasLtCreate")
	l.destroy = s.need("cublasLtDestroy")
	l.getVersion = s.need("cublasLtGetVersion")
	l.getStatusName = s.optional("cublasLtGetStatusName")
	l.getStatusString = s.optional("cublasLtGetStatusString")
	l.descCreate = s.need("cublasLtMatmulDescCreate")
	l.descDestroy = s.need("cublasLtMatmulDescDestroy")
	l.descSetAttribute = s.need("cublasLtMatmulDescSetAttribute")
	l.layoutCreate = s.need("cublasLtMatrixLayoutCreate")
	l.layoutDestroy = s.need("cublasLtMatrixLayoutDestroy")
	l.prefCreate = s.need("cublasLtMatmulPreferenceCreate")
	l.prefDestroy = s.need("cublasLtMatmulPreferenceDestroy")
	l.prefSetAttribute = s.need("cublasLtMatmulPreferenceSetAttribute")
	l.algoGetHeuristic = s.need("cublasLtMatmulAlgoGetHeuristic")
	l.matmul = s.need("cublasLtMatmul")
	l.algoCheck = s.need("cublasLtMatmulAlgoCheck")
	l.algoConfigGet = s.need("cublasLtMatmulAlgoConfigGetAttribute")
	l.algoConfigSet = s.need("cublasLtMatmulAlgoConfigSetAttribute")
	if s.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCUBLASLt, s.err)
	}
	v, _, _ := purego.SyscallN(l.getVersion)
	l.version = int(v)
	return l, nil
}

// versionString formats cublasLtGetVersion's major*10000+minor*100+patch.
func (l *cublasLt) versionString() string {
	return fmt.Sprintf("%d.%d.%d", l.version/10000, l.version/100%100, l.version%100)
}

// check turns a cublasStatus_t into nil or an *Error.
func (l *cublasLt) check(call string, r uintptr) error {
	code := int32(r)
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(code), Name: cublasStatusName(int(code))}
	if l.getStatusName != 0 {
		p, _, _ := purego.SyscallN(l.getStatusName, uintptr(code))
		if s := goString(p); s != "" {
			e.Name = s
		}
	}
	if l.getStatusString != 0 {
		p, _, _ := purego.SyscallN(l.getStatusString, uintptr(code))
		e.Msg = goString(p)
	}
	return e
}

// GEMMShape describes Y[M,N] = X[M,K] · W[N,K]ᵀ, the linear-layer product,
// on row-major matrices: X holds M rows of K inputs, W holds N rows of K
// weights (the PyTorch nn.Linear layout), Y holds M rows of N outputs. In
// and Out are F16 or BF16 for X and W, and F16, BF16 or F32 for Y; the
// accumulation is fp32.
type GEMMShape struct {
	M, N, K int
	In, Out DType
}

func (g GEMMShape) validate() error {
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return fmt.Errorf("cuda: GEMM shape M=%d N=%d K=%d: dimensions must be positive", g.M, g.N, g.K)
	}
	if g.In != F16 && g.In != BF16 {
		return fmt.Errorf("cuda: GEMM input type %v: want f16 or bf16", g.In)
	}
	if g.Out != F16 && g.Out != BF16 && g.Out != F32 {
		return fmt.Errorf("cuda: GEMM output type %v: want f16, bf16 or f32", g.Out)
	}
	if g.Out != F32 && g.Out != g.In {
		return fmt.Errorf("cuda: GEMM %v inputs with %v output: the output must be the input type or f32", g.In, g.Out)
	}
	return nil
}

// ltLayout is the column-major problem cuBLASLt is given for a row-major
// linear layer. A row-major R×C matrix is, read column-major, its C×R
// transpose with leading dimension C. So
//
//	Yᵀ (N×M, ld N) = op(A) · op(B) with
//	A = W read column-major: K×N, ld K, op = T  (gives W, N×K)
//	B = X read column-major: K×M, ld K, op = N  (gives Xᵀ, K×M)
//
// which is cuBLASLt's m=N, n=M, k=K "TN" case, its best-supported layout.
type ltLayout struct {
	transA, transB    int
	aRows, aCols, aLD int
	bRows, bCols, bLD int
	cRows, cCols, cLD int
	m, n, k           int // the column-major problem size
}

// linearLayout maps a row-major linear layer onto cuBLASLt's column-major
// operands.
func linearLayout(g GEMMShape) ltLayout {
	return ltLayout{
		transA: cublasOpT, transB: cublasOpN,
		aRows: g.K, aCols: g.N, aLD: g.K,
		bRows: g.K, bCols: g.M, bLD: g.K,
		cRows: g.N, cCols: g.M, cLD: g.N,
		m: g.N, n: g.M, k: g.K,
	}
}

// gemmKey identifies a cached plan: the shape and the pointer alignment the
// heuristic was asked to assume.
type gemmKey struct {
	shape GEMMShape
	align uint32
}

// tuneKey identifies a tuned choice: a plan's key with M replaced by its
// row bucket (gemmTuneBucket), so that a serving batch whose row count
// changes every step tunes once per bucket, not once per row count.
type tuneKey struct {
	n, k    int
	in, out DType
	align   uint32
	bucket  int
}

// gemmPlan holds cuBLASLt descriptors and the chosen algorithm for one
// shape, reused by every call with that shape.
type gemmPlan struct {
	desc, a, b, c uintptr
	algo          ltAlgo
	workspace     uint64 // bytes the algorithm needs, at most gemmWorkspaceBytes
	// tuned: the algorithm is not the heuristic's first but one that timed
	// faster (gemmTune*), here or for another row count of its bucket.
	tuned bool
}

// Tuning of the decode batches' GEMMs (SetGEMMTuning; off by default). The
// heuristic's first algorithm
// leaves most SMs idle on a narrow linear at 55-100 rows (4096 outputs in
// tiles of 128 are 32 CTAs on 132 SMs), so the first call of a shape of at
// most gemmTuneMaxRows rows whose weight holds at least gemmTuneMinBytes
// (smaller ones are launch-bound, and their timings too noisy to choose
// by) times the heuristic's first gemmTuneHeuristic
// algorithms and split-K variants of its first gemmTuneSplitFrom (each
// split of gemmTuneSplits with an in-place or a compute-type reduction,
// both deterministic), on the call's own operands with L2 flushed before
// each run, and keeps the fastest if it beats the heuristic's first by
// gemmTuneMinGain. The choice is cached per row bucket of
// gemmTuneBucketRows rows; another row count of the bucket reuses it where
// cublasLtMatmulAlgoCheck accepts it.
const (
	gemmTuneMaxRows    = 256
	gemmTuneMinBytes   = 8 << 20
	gemmTuneBucketRows = 16
	gemmTuneHeuristic  = 8
	gemmTuneSplitFrom  = 2
	gemmTuneRounds     = 5 // timed rounds, after one untimed
	gemmTuneMinGain    = 0.03

	ltReductionInPlace     = 1 // CUBLASLT_REDUCTION_SCHEME_INPLACE
	ltReductionComputeType = 2 // CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE

	// cublasLtMatmulAlgoConfigAttributes_t
	ltAlgoConfigID        = 0 // int32
	ltAlgoConfigTile      = 1 // uint32
	ltAlgoConfigSplitK    = 2 // uint32
	ltAlgoConfigReduction = 3 // uint32
	ltAlgoConfigSwizzle   = 4 // uint32
	ltAlgoConfigCustom    = 5 // uint32
	ltAlgoConfigStages    = 6 // uint32
	ltAlgoConfigInner     = 7 // uint16
	ltAlgoConfigCluster   = 8 // uint16
)

// gemmTuneSplits are the split-K counts tried as variants.
var gemmTuneSplits = [...]uint32{2, 3, 4, 6}

// gemmTuneBucket is M's tuning bucket: rows 1-16 are bucket 1, 17-32
// bucket 2, and so on.
func gemmTuneBucket(m int) int { return (m + gemmTuneBucketRows - 1) / gemmTuneBucketRows }

// blasState is a Ctx's cuBLASLt handle, workspace and plan cache. It is
// touched only on the owner thread.
type blasState struct {
	lt          *cublasLt
	handle      uintptr
	workspace   DevicePtr
	plans       map[gemmKey]*gemmPlan
	bare        map[gemmKey]*gemmPlan // descriptors only, for GEMMWith
	tuned       map[tuneKey]ltAlgo
	alpha, beta float32 // host scalars for cublasLtMatmul (pointer mode host)
}

func (c *Ctx) blasInit() (*blasState, error) {
	if c.blas != nil {
		return c.blas, nil
	}
	lt, err := loadCUBLASLt()
	if err != nil {
		return nil, err
	}
	b := &blasState{lt: lt, plans: map[gemmKey]*gemmPlan{}, bare: map[gemmKey]*gemmPlan{},
		tuned: map[tuneKey]ltAlgo{}, alpha: 1, beta: 0}
	r, _, _ := purego.SyscallN(lt.create, uintptr(unsafe.Pointer(&b.handle)))
	if err := lt.check("cublasLtCreate", r); err != nil {
		return nil, err
	}
	if b.workspace, err = c.Alloc(gemmWorkspaceBytes); err != nil {
		purego.SyscallN(lt.destroy, b.handle)
		return nil, fmt.Errorf("cuBLASLt workspace: %w", err)
	}
	c.blas = b
	return b, nil
}

func (c *Ctx) closeBLAS() {
	b := c.blas
	if b == nil {
		return
	}
	for _, p := range b.plans {
		b.destroyPlan(p)
	}
	for _, p := range b.bare {
		b.destroyPlan(p)
	}
	b.plans, b.bare = nil, nil
	c.Free(b.workspace)
	purego.SyscallN(b.lt.destroy, b.handle)
	c.blas = nil
}

func (b *blasState) destroyPlan(p *gemmPlan) {
	lt := b.lt
	for _, l := range []uintptr{p.a, p.b, p.c} {
		if l != 0 {
			purego.SyscallN(lt.layoutDestroy, l)
		}
	}
	if p.desc != 0 {
		purego.SyscallN(lt.descDestroy, p.desc)
	}
}

// alignmentOf returns the largest power of two, at most gemmMaxAlign, that
// divides p.
func alignmentOf(p DevicePtr) uint32 {
	a := uint32(gemmMaxAlign)
	for a > 1 && uint64(p)%uint64(a) != 0 {
		a >>= 1
	}
	return a
}

// describe creates the descriptors of key's problem (no algorithm).
func (b *blasState) describe(key gemmKey) (*gemmPlan, error) {
	g, lt := key.shape, b.lt
	inType, _ := g.In.cudaType()
	outType, _ := g.Out.cudaType()
	lay := linearLayout(g)
	p := &gemmPlan{}
	fail := func(err error) (*gemmPlan, error) {
		b.destroyPlan(p)
		return nil, err
	}
	r, _, _ := purego.SyscallN(lt.descCreate, uintptr(unsafe.Pointer(&p.desc)), cublasCompute32F, cudaR32F)
	if err := lt.check("cublasLtMatmulDescCreate", r); err != nil {
		return fail(err)
	}
	for _, a := range []struct {
		attr int
		val  int32
	}{{ltDescTransA, int32(lay.transA)}, {ltDescTransB, int32(lay.transB)}} {
		v := a.val
		r, _, _ := purego.SyscallN(lt.descSetAttribute, p.desc, uintptr(a.attr), uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v))
		if err := lt.check("cublasLtMatmulDescSetAttribute", r); err != nil {
			return fail(err)
		}
	}
	for _, l := range []struct {
		dst            *uintptr
		typ            int
		rows, cols, ld int
	}{
		{&p.a, inType, lay.aRows, lay.aCols, lay.aLD},
		{&p.b, inType, lay.bRows, lay.bCols, lay.bLD},
		{&p.c, outType, lay.cRows, lay.cCols, lay.cLD},
	} {
		r, _, _ := purego.SyscallN(lt.layoutCreate, uintptr(unsafe.Pointer(l.dst)), uintptr(l.typ), uintptr(l.rows), uintptr(l.cols), uintptr(l.ld))
		if err := lt.check("cublasLtMatrixLayoutCreate", r); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

// heuristic asks cuBLASLt's heuristic for up to n algorithms for p's
// problem at key's alignment, best first; it fails if none is found.
func (b *blasState) heuristic(p *gemmPlan, key gemmKey, n int) ([]ltHeuristicResult, error) {
	lt := b.lt
	var pref uintptr
	r, _, _ := purego.SyscallN(lt.prefCreate, uintptr(unsafe.Pointer(&pref)))
	if err := lt.check("cublasLtMatmulPreferenceCreate", r); err != nil {
		return nil, err
	}
	defer purego.SyscallN(lt.prefDestroy, pref)
	ws := uint64(gemmWorkspaceBytes)
	r, _, _ = purego.SyscallN(lt.prefSetAttribute, pref, ltPrefMaxWorkspaceBytes, uintptr(unsafe.Pointer(&ws)), unsafe.Sizeof(ws))
	if err := lt.check("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
		return nil, err
	}
	if key.align < gemmMaxAlign {
		al := key.align
		for _, attr := range []uintptr{ltPrefMinAlignABytes, ltPrefMinAlignBBytes, ltPrefMinAlignCBytes, ltPrefMinAlignDBytes} {
			r, _, _ := purego.SyscallN(lt.prefSetAttribute, pref, attr, uintptr(unsafe.Pointer(&al)), unsafe.Sizeof(al))
			if err := lt.check("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
				return nil, err
			}
		}
	}
	res := make([]ltHeuristicResult, n)
	var count int32
	r, _, _ = purego.SyscallN(lt.algoGetHeuristic, b.handle, p.desc, p.a, p.b, p.c, p.c, pref, uintptr(n),
		uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(&count)))
	if err := lt.check("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
		return nil, err
	}
	if count == 0 {
		return nil, fmt.Errorf("cublasLtMatmulAlgoGetHeuristic found no algorithm (pointer alignment %d bytes)", key.align)
	}
	if err := lt.check("cublasLtMatmulAlgoGetHeuristic result", uintptr(res[0].state)); err != nil {
		return nil, err
	}
	var ok []ltHeuristicResult
	for _, h := range res[:count] {
		if h.state == 0 && h.workspaceSize <= gemmWorkspaceBytes {
			ok = append(ok, h)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("cublasLtMatmulAlgoGetHeuristic found no algorithm within the %d-byte workspace", gemmWorkspaceBytes)
	}
	return ok, nil
}

// check asks cublasLtMatmulAlgoCheck whether algo runs p's problem within
// the workspace, and returns its result.
func (b *blasState) check(p *gemmPlan, algo ltAlgo) (ltHeuristicResult, bool) {
	var res ltHeuristicResult
	r, _, _ := purego.SyscallN(b.lt.algoCheck, b.handle, p.desc, p.a, p.b, p.c, p.c,
		uintptr(unsafe.Pointer(&algo)), uintptr(unsafe.Pointer(&res)))
	if r != 0 || res.state != 0 || res.workspaceSize > gemmWorkspaceBytes {
		return res, false
	}
	res.algo = algo
	return res, true
}

// configGet reads one algorithm configuration attribute of size bytes (at
// most 8; the attributes are little-endian integers).
func (b *blasState) configGet(algo *ltAlgo, attr, size int) uint64 {
	var v, written uint64
	purego.SyscallN(b.lt.algoConfigGet, uintptr(unsafe.Pointer(algo)), uintptr(attr),
		uintptr(unsafe.Pointer(&v)), uintptr(size), uintptr(unsafe.Pointer(&written)))
	return v
}

// configSet writes one uint32 algorithm configuration attribute.
func (b *blasState) configSet(algo *ltAlgo, attr int, v uint32) bool {
	r, _, _ := purego.SyscallN(b.lt.algoConfigSet, uintptr(unsafe.Pointer(algo)), uintptr(attr),
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v))
	return r == 0
}

// candidates returns the algorithms tuning times for p's problem: the
// heuristic's first gemmTuneHeuristic (its first one first), then the
// split-K variants of its first gemmTuneSplitFrom that
// cublasLtMatmulAlgoCheck accepts and that are not in the list already.
func (b *blasState) candidates(p *gemmPlan, key gemmKey) ([]ltHeuristicResult, error) {
	cands, err := b.heuristic(p, key, gemmTuneHeuristic)
	if err != nil {
		return nil, err
	}
	seen := map[ltAlgo]bool{}
	for _, c := range cands {
		seen[c.algo] = true
	}
	for _, base := range cands[:min(len(cands), gemmTuneSplitFrom)] {
		for _, split := range gemmTuneSplits {
			for _, scheme := range []uint32{ltReductionInPlace, ltReductionComputeType} {
				a := base.algo
				if !b.configSet(&a, ltAlgoConfigSplitK, split) || !b.configSet(&a, ltAlgoConfigReduction, scheme) || seen[a] {
					continue
				}
				if res, ok := b.check(p, a); ok {
					res.wavesCount = 0 // AlgoCheck's estimate, not the heuristic's ranking
					cands = append(cands, res)
					seen[a] = true
				}
			}
		}
	}
	return cands, nil
}

// matmul queues y = x·wᵀ for p's problem with algo on s.
func (b *blasState) matmul(p *gemmPlan, algo *ltAlgo, s Stream, y, x, w DevicePtr) error {
	// alpha and beta are fields of the heap-allocated blasState, so the
	// pointers passed stay valid through the call.
	r, _, _ := purego.SyscallN(b.lt.matmul, b.handle, p.desc,
		uintptr(unsafe.Pointer(&b.alpha)),
		uintptr(w), p.a,
		uintptr(x), p.b,
		uintptr(unsafe.Pointer(&b.beta)),
		uintptr(y), p.c,
		uintptr(y), p.c,
		uintptr(unsafe.Pointer(algo)),
		uintptr(b.workspace), gemmWorkspaceBytes,
		uintptr(s))
	return b.lt.check("cublasLtMatmul", r)
}

// plan returns the cached plan for key, building it on first use: the
// heuristic's first algorithm, or for a decode batch outside a capture
// the tuned one (see gemmTuneMaxRows), timed on s with the call's y, x
// and w.
func (c *Ctx) plan(b *blasState, key gemmKey, s Stream, y, x, w DevicePtr) (*gemmPlan, error) {
	if p, ok := b.plans[key]; ok {
		return p, nil
	}
	g := key.shape
	p, err := b.describe(key)
	if err != nil {
		return nil, fmt.Errorf("GEMM M=%d N=%d K=%d %v->%v: %w", g.M, g.N, g.K, g.In, g.Out, err)
	}
	fail := func(err error) (*gemmPlan, error) {
		b.destroyPlan(p)
		return nil, fmt.Errorf("GEMM M=%d N=%d K=%d %v->%v: %w", g.M, g.N, g.K, g.In, g.Out, err)
	}
	tune := c.gemmTune && g.M <= gemmTuneMaxRows && g.N*g.K*g.In.Size() >= gemmTuneMinBytes && c.capturing == 0
	n := 1
	if tune {
		n = gemmTuneHeuristic
	}
	first, err := b.heuristic(p, key, n)
	if err != nil {
		return fail(err)
	}
	p.algo, p.workspace = first[0].algo, first[0].workspaceSize
	if tune {
		tk := tuneKey{n: g.N, k: g.K, in: g.In, out: g.Out, align: key.align, bucket: gemmTuneBucket(g.M)}
		if a, ok := b.tuned[tk]; ok {
			if res, ok := b.check(p, a); ok {
				p.algo, p.workspace, p.tuned = a, res.workspaceSize, a != first[0].algo
			}
		} else {
			cands, err := b.candidates(p, key)
			if err != nil {
				return fail(err)
			}
			if len(cands) > 1 {
				us, err := c.timeAlgos(b, p, cands, s, y, x, w)
				if err != nil {
					return fail(fmt.Errorf("tuning: %w", err))
				}
				best := 0
				for i := range us {
					if us[i] < us[best] {
						best = i
					}
				}
				if !math.IsInf(us[0], 1) && us[best] > (1-gemmTuneMinGain)*us[0] {
					best = 0
				}
				p.algo, p.workspace, p.tuned = cands[best].algo, cands[best].workspaceSize, best != 0
			}
			b.tuned[tk] = p.algo
		}
	}
	b.plans[key] = p
	return p, nil
}

// timeAlgos returns the median GPU time in microseconds of each candidate
// on p's problem (+Inf for one cublasLtMatmul refuses), run on s with the caller's operands (y is overwritten):
// one untimed round, then gemmTuneRounds rounds, each after a spin (so
// the host queues ahead of the GPU), each run after a write of the 32 MiB
// workspace that evicts most of L2 (the step reads its weights from DRAM).
func (c *Ctx) timeAlgos(b *blasState, p *gemmPlan, cands []ltHeuristicResult, s Stream, y, x, w DevicePtr) ([]float64, error) {
	evs := make([]Event, 2*len(cands))
	for i := range evs {
		e, err := c.NewEvent()
		if err != nil {
			return nil, err
		}
		defer c.DestroyEvent(e)
		evs[i] = e
	}
	times := make([][]float64, len(cands))
	bad := make([]bool, len(cands))
	for round := 0; round <= gemmTuneRounds; round++ {
		if err := c.spin(s); err != nil {
			return nil, err
		}
		for i := range cands {
			if err := c.Memset32Async(b.workspace, 0, gemmWorkspaceBytes/4, s); err != nil {
				return nil, err
			}
			if err := c.Record(evs[2*i], s); err != nil {
				return nil, err
			}
			// A refused candidate is never chosen; its events are
			// recorded all the same, so they stay valid.
			if !bad[i] && b.matmul(p, &cands[i].algo, s, y, x, w) != nil {
				bad[i] = true
			}
			if err := c.Record(evs[2*i+1], s); err != nil {
				return nil, err
			}
		}
		if err := c.SyncEvent(evs[len(evs)-1]); err != nil {
			return nil, err
		}
		if round == 0 {
			continue
		}
		for i := range cands {
			ms, err := c.ElapsedMS(evs[2*i], evs[2*i+1])
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], float64(ms)*1e3)
		}
	}
	med := make([]float64, len(cands))
	for i, t := range times {
		sort.Float64s(t)
		med[i] = t[len(t)/2]
		if bad[i] {
			med[i] = math.Inf(1)
		}
	}
	return med, nil
}

// GEMM queues Y = X · Wᵀ on s (see [GEMMShape] for the layout); x, w and y
// are device addresses of row-major matrices. The first call for a shape
// builds its plan (descriptors and algorithm) and caches it for later
// calls; pointers less than 256-byte aligned get a plan of their own. The
// algorithm is the heuristic's first, except with SetGEMMTuning on for a
// decode batch (at most 256 rows, a weight of at least 8 MiB) outside a
// capture: the first call of its 16-row bucket times the heuristic's
// first 8 algorithms and split-K variants on s with the call's own
// operands and keeps the fastest (y is written by those runs before this
// call's; the call synchronizes with s once). The call can be
// captured into a graph once a call of the same shape and pointer
// alignment has run outside a capture: that first call allocates the
// Ctx's workspace (gemmWorkspaceBytes, fixed for the Ctx's life) and
// builds the plan, neither of which belongs in a capture. A captured call
// then depends only on y, x, w and the shape (the plan is cached for the
// Ctx's life), so equal arguments replay with the direct call's bits
// (TestGPUGEMMGraphReplay). A tuned choice depends on timings, so two
// processes may pick different algorithms (and bits) for a shape.
func (c *Ctx) GEMM(s Stream, g GEMMShape, y, x, w DevicePtr) error {
	if err := g.validate(); err != nil {
		return err
	}
	b, err := c.blasInit()
	if err != nil {
		return err
	}
	align := min(alignmentOf(x), alignmentOf(w), alignmentOf(y))
	p, err := c.plan(b, gemmKey{shape: g, align: align}, s, y, x, w)
	if err != nil {
		return err
	}
	if err := b.matmul(p, &p.algo, s, y, x, w); err != nil {
		return fmt.Errorf("GEMM M=%d N=%d K=%d %v->%v: %w", g.M, g.N, g.K, g.In, g.Out, err)
	}
	return nil
}

// SetGEMMTuning turns GEMM's tuning of decode batches on or off for plans
// built from now on (off by default): see [Ctx.GEMM]. On the H100 it
// finds 3-5% on some shapes in isolation (down, lm_head, the joined
// q|k|v at 55 rows) but nothing measurable in a decode step, and it makes
// the choice, and so the bits, depend on timings
// (docs/perf/decode-step.md v18); it is a tool for measuring.
func (c *Ctx) SetGEMMTuning(on bool) { c.gemmTune = on }

// GEMMAlgo is one cuBLASLt algorithm for a GEMM shape, with its
// configuration as cublasLtMatmulAlgoConfigGetAttribute reports it: a
// tool for measuring them one by one (bench gemv --algos).
type GEMMAlgo struct {
	ID                                               int32
	Tile, Stages, SplitK, Reduction, Swizzle, Custom uint32
	Inner, Cluster                                   uint16
	Workspace                                        uint64  // bytes
	Waves                                            float32 // the heuristic's estimate; 0 for a variant
	// Variant: a split-K variant made from one of the heuristic's
	// algorithms, not one the heuristic returned.
	Variant bool
	algo    ltAlgo
}

// String describes a in one line.
func (a GEMMAlgo) String() string {
	kind := "heuristic"
	if a.Variant {
		kind = "variant"
	}
	return fmt.Sprintf("id %d tile %d stages %d splitK %d reduction %d swizzle %d custom %d inner %d cluster %d ws %d waves %.2f (%s)",
		a.ID, a.Tile, a.Stages, a.SplitK, a.Reduction, a.Swizzle, a.Custom, a.Inner, a.Cluster, a.Workspace, a.Waves, kind)
}

func (b *blasState) describeAlgo(h ltHeuristicResult, variant bool) GEMMAlgo {
	a := h.algo
	return GEMMAlgo{
		ID:   int32(b.configGet(&a, ltAlgoConfigID, 4)),
		Tile: uint32(b.configGet(&a, ltAlgoConfigTile, 4)), Stages: uint32(b.configGet(&a, ltAlgoConfigStages, 4)),
		SplitK: uint32(b.configGet(&a, ltAlgoConfigSplitK, 4)), Reduction: uint32(b.configGet(&a, ltAlgoConfigReduction, 4)),
		Swizzle: uint32(b.configGet(&a, ltAlgoConfigSwizzle, 4)), Custom: uint32(b.configGet(&a, ltAlgoConfigCustom, 4)),
		Inner: uint16(b.configGet(&a, ltAlgoConfigInner, 2)), Cluster: uint16(b.configGet(&a, ltAlgoConfigCluster, 2)),
		Workspace: h.workspaceSize, Waves: h.wavesCount, Variant: variant, algo: a,
	}
}

// bareKey returns the descriptors of g at 256-byte alignment, cached.
func (b *blasState) bareKey(g GEMMShape) (gemmKey, *gemmPlan, error) {
	key := gemmKey{shape: g, align: gemmMaxAlign}
	if p, ok := b.bare[key]; ok {
		return key, p, nil
	}
	p, err := b.describe(key)
	if err != nil {
		return key, nil, err
	}
	b.bare[key] = p
	return key, p, nil
}

// GEMMAlgos returns the algorithms GEMM's tuning would time for g with
// 256-byte aligned operands: the heuristic's first 8 (its first one
// first), then the split-K variants cuBLASLt accepts.
func (c *Ctx) GEMMAlgos(g GEMMShape) ([]GEMMAlgo, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	b, err := c.blasInit()
	if err != nil {
		return nil, err
	}
	key, p, err := b.bareKey(g)
	if err != nil {
		return nil, err
	}
	cands, err := b.candidates(p, key)
	if err != nil {
		return nil, fmt.Errorf("GEMM M=%d N=%d K=%d: %w", g.M, g.N, g.K, err)
	}
	nh := min(len(cands), gemmTuneHeuristic)
	if h, err := b.heuristic(p, key, gemmTuneHeuristic); err == nil {
		nh = len(h)
	}
	out := make([]GEMMAlgo, len(cands))
	for i, h := range cands {
		out[i] = b.describeAlgo(h, i >= nh)
	}
	return out, nil
}

// GEMMWith queues Y = X · Wᵀ on s with algorithm a (from GEMMAlgos for the
// same shape); x, w and y must be 256-byte aligned.
func (c *Ctx) GEMMWith(s Stream, g GEMMShape, a GEMMAlgo, y, x, w DevicePtr) error {
	if err := g.validate(); err != nil {
		return err
	}
	if min(alignmentOf(x), alignmentOf(w), alignmentOf(y)) < gemmMaxAlign {
		return fmt.Errorf("cuda: GEMMWith: operands must be %d-byte aligned", gemmMaxAlign)
	}
	b, err := c.blasInit()
	if err != nil {
		return err
	}
	_, p, err := b.bareKey(g)
	if err != nil {
		return err
	}
	algo := a.algo
	if err := b.matmul(p, &algo, s, y, x, w); err != nil {
		return fmt.Errorf("GEMM M=%d N=%d K=%d with %v: %w", g.M, g.N, g.K, a, err)
	}
	return nil
}

// GEMMChoice returns the algorithm GEMM uses for g with 256-byte aligned
// operands, and whether tuning chose it over the heuristic's first; ok is
// false before GEMM's first call of that shape.
func (c *Ctx) GEMMChoice(g GEMMShape) (a GEMMAlgo, tuned, ok bool) {
	if c.blas == nil {
		return GEMMAlgo{}, false, false
	}
	p, ok := c.blas.plans[gemmKey{shape: g, align: gemmMaxAlign}]
	if !ok {
		return GEMMAlgo{}, false, false
	}
	return c.blas.describeAlgo(ltHeuristicResult{algo: p.algo, workspaceSize: p.workspace}, false), p.tuned, true
}

// GEMM runs Y = X · Wᵀ on the Device; see [Ctx.GEMM].
func (d *Device) GEMM(s Stream, g GEMMShape, y, x, w DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.GEMM(s, g, y, x, w) })
}

// CUBLASLtVersion loads cuBLASLt (once) and returns its version, e.g.
// "13.1.0". The error wraps ErrNoCUBLASLt.
func CUBLASLtVersion() (string, error) {
	lt, err := loadCUBLASLt()
	if err != nil {
		return "", err
	}
	return lt.versionString(), nil
}

package backend

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/wq"
)

// DType is the element type of a tensor, or of the host data a weight is
// made from.
type DType int

// The element types. Weights may be loaded from F32, F16 and BF16 data;
// activations are F32 (F16 and BF16 where a backend supports them); I32 holds
// token ids, positions and row indices.
const (
	F32 DType = iota + 1
	F16
	BF16
	I32
)

// String returns the safetensors-style name of d ("F32", "BF16", ...).
func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	case I32:
		return "I32"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size returns the size of one element of type d in bytes, or 0 for an
// unknown type.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// Tensor is an activation buffer owned by a Backend. Its elements are only
// reached through Upload, UploadInt32 and Download; an op given a tensor of
// another backend, or a freed one, records an error.
type Tensor interface {
	// Shape returns the dimensions of the tensor (a copy).
	Shape() []int
	// DType returns the element type.
	DType() DType
}

// Weight is a read-only parameter owned by a Backend, made once from host
// data by LoadWeight. How it is stored (float32, bf16, a quantized format)
// is the backend's choice.
type Weight interface {
	// Name returns the name given to LoadWeight (the checkpoint tensor name).
	Name() string
	// Shape returns the logical dimensions, [N, K] for a linear layer with K
	// inputs and N outputs, [N] for a vector.
	Shape() []int
}

// Backend is the device a model runs on: memory for activations, weights, and
// the ops of a Llama-family forward pass.
//
// Alloc, Free, LoadWeight and FreeWeight are safe for concurrent use. The
// ops, Upload, UploadInt32, Download and Sync form one ordered stream and must
// be called from one goroutine at a time. Ops record their first error and
// skip later work until Sync (see the package documentation).
//
// Shapes below use T for rows (tokens), K for input and N for output widths.
// Elementwise ops allow dst to be the same tensor as an input; Linear,
// LinearGroup, Rows and Embedding do not.
type Backend interface {
	// Name names the backend and its configuration for logs ("cpu (2 threads)").
	Name() string

	// Alloc returns a new tensor of the given type and shape. Its contents are
	// unspecified. Every dimension must be positive.
	Alloc(dtype DType, shape ...int) (Tensor, error)
	// Free releases t; t must not be used afterwards. Free of nil does nothing.
	Free(t Tensor)
	// Upload copies src into the F32, F16 or BF16 tensor dst (rounding to
	// nearest even for the 16-bit types); len(src) must equal its size.
	Upload(dst Tensor, src []float32) error
	// UploadInt32 copies src into the I32 tensor dst.
	UploadInt32(dst Tensor, src []int32) error
	// Download waits for the ops issued so far and copies the F32, F16 or
	// BF16 tensor src into dst (len(dst) must equal its size). It returns the
	// pending op error, if any, without clearing it.
	Download(dst []float32, src Tensor) error

	// LoadWeight makes a weight of the given logical shape from host data of
	// type dtype (F32, F16 or BF16, little-endian, row-major). The backend
	// does not keep data after LoadWeight returns, so data may be a view of a
	// memory-mapped file. name is kept for error messages.
	LoadWeight(name string, dtype DType, shape []int, data []byte) (Weight, error)
	// FreeWeight releases w. FreeWeight of nil does nothing.
	FreeWeight(w Weight)

	// Embedding gathers rows of table: dst[t,:] = table[ids[t],:].
	// dst [T, K] F32, table [V, K], ids [T] I32 with 0 <= ids[t] < V.
	Embedding(dst Tensor, table Weight, ids Tensor)
	// Rows gathers rows of a tensor: dst[i,:] = src[idx[i],:].
	// dst [R, K], src [T, K], idx [R] I32 with 0 <= idx[i] < T.
	Rows(dst, src Tensor, idx Tensor)
	// Linear computes dst = x·wᵀ + bias, a fully connected layer.
	// dst [T, N], x [T, K], w [N, K], bias [N] or nil.
	Linear(dst, x Tensor, w Weight, bias Weight)
	// LinearGroup computes dsts[i] = x·ws[i]ᵀ + biases[i] for layers that
	// share their input (q, k, v; gate, up): the results of len(ws) Linear
	// calls, each written to its own tensor, in one launch where the
	// backend can (the CUDA backend, for fp16 weights). biases is nil or
	// holds one entry per weight, nil for no bias. The outputs must be
	// distinct from x and from each other.
	LinearGroup(dsts []Tensor, x Tensor, ws []Weight, biases []Weight)
	// RMSNorm normalizes each group of G = len(w) consecutive elements of a
	// row: dst = w ⊙ x / sqrt(mean(x²) + eps), HF's LlamaRMSNorm. With
	// G = cols it is the usual norm over the hidden size; with G = D it is
	// Qwen3's per-head q/k norm. dst and x [T, C] with C a multiple of G.
	RMSNorm(dst, x Tensor, w Weight, eps float32)
	// RoPE rotates x in place by the rotary position embedding of HF Llama
	// ("rotate_half" layout): with D = 2·len(invFreq) and, for each head and
	// i < D/2, angle θ = float32(pos[t])·invFreq[i] (float32 product),
	//   x'[i]     = x[i]·cos θ − x[i+D/2]·sin θ
	//   x'[i+D/2] = x[i+D/2]·cos θ + x[i]·sin θ.
	// x [T, H·D] F32, pos [T] I32, invFreq [D/2] (a weight of float32 data).
	RoPE(x Tensor, pos Tensor, invFreq Weight)
	// SwiGLU computes dst = silu(gate) ⊙ up with silu(g) = g/(1+e^−g).
	// All three [T, N].
	SwiGLU(dst, gate, up Tensor)
	// GeGLU computes dst = gelu_tanh(gate) ⊙ up (Gemma's MLP), with
	// transformers' gelu_pytorch_tanh
	//   gelu_tanh(g) = g/2·(1 + tanh(√(2/π)·(g + 0.044715·g³)))
	//                = g/(1 + e^−z), z = 2√(2/π)·(g + 0.044715·g³)
	// (the second form is what backends compute). All three [T, N].
	GeGLU(dst, gate, up Tensor)
	// Scale computes dst = s·x elementwise (float32 products): Gemma's
	// embedding scale, LongRoPE's attention factor. dst and x have the
	// same size.
	Scale(dst, x Tensor, s float32)
	// Add computes dst = a + b elementwise. All three have the same size.
	Add(dst, a, b Tensor)
	// AddRMSNorm is Add followed by RMSNorm, the residual update of a
	// decoder layer and the next norm in one pass: h = h + delta, then
	// x = RMSNorm(h) with weight w over groups of G = len(w) as RMSNorm
	// does. The results are those of Add(h, h, delta) then
	// RMSNorm(x, h, w, eps): h bitwise; x bitwise, or, where a backend
	// sums a row's squares in another order than its RMSNorm (the CUDA
	// backend's rows over a cluster of CTAs), within the ulp of r by which
	// the mean's rounding may then differ. h and x [T, C] with C a
	// multiple of G, delta as many elements as h; x may be delta, h must
	// be neither.
	AddRMSNorm(h, x, delta Tensor, w Weight, eps float32)
	// RoPEQK rotates q and k in place at the same positions, as RoPE(q)
	// then RoPE(k), first normalizing each head of q by qNorm and each
	// head of k by kNorm (Qwen3's q/k norm: RMSNorm with G = D) where
	// those are non-nil. The results are bitwise those of the separate
	// ops. q [T, Hq·D], k [T, Hk·D], pos [T] I32, invFreq [D/2]; qNorm and
	// kNorm [D], both nil or both set.
	RoPEQK(q, k Tensor, pos Tensor, invFreq Weight, qNorm, kNorm Weight, eps float32)

	// Err returns the first error recorded by an op since the last Sync,
	// without waiting for queued work.
	Err() error
	// Sync waits for all queued work and returns the first op error since the
	// last Sync, clearing it so the backend can run the next request.
	Sync() error
	// Close releases everything the backend holds. Tensors and weights must
	// not be used afterwards.
	Close() error
}

// RowRun is a run of rows of a step's tensors: rows [Start, Start+Len).
type RowRun struct{ Start, Len int }

// ChunkRows is implemented by backends whose batch-invariant mode can give
// a prefill chunk's rows a faster path of their own (the CUDA backend):
// SetChunkRows names, for the ops over T rows queued until the next call,
// the runs of rows that are each one sequence's prefill chunk (T 0 or no
// runs: none). In that mode a row's result may then depend on its chunk
// (its length and contents) but still never on the rows beside it; ops over
// other row counts, and backends without the mode, ignore it. The model's
// Forward sets it for its batch and clears it when done.
type ChunkRows interface {
	SetChunkRows(T int, runs []RowRun)
}

// RandomLoader is implemented by backends that can make random weights
// without host data (benchmark models of realistic size). Callers fall back
// to LoadWeight with host-generated data where it is missing.
type RandomLoader interface {
	// LoadRandom returns a [N, K] matrix weight of pseudo-random values with
	// mean 0 and standard deviation std, the same for the same seed.
	LoadRandom(name string, shape []int, std float32, seed uint64) (Weight, error)
}

// Argmaxer is implemented by backends that pick greedy decoding's next
// token where the logits are (the CUDA backend): a decode step then copies
// R token ids to the host instead of R x Vocab logits (28 MB at 55 rows of
// Llama-3's 128256; docs/perf/decode-step.md v23). model's Forward falls
// back to downloading the logits and picking on the host where it is
// missing (backend/cpu, backend/tp), with the same result.
type Argmaxer interface {
	// ArgmaxRows writes to dst [R] I32 the index of the largest value of
	// each row of src [R, V] F32, exactly as model.Argmax picks it: the
	// first of equal values (-0 equals +0); a NaN is never larger than
	// anything, so it never wins, but a NaN at index 0 gives 0. It is an
	// op: queued in order with the others, its error recorded.
	ArgmaxRows(dst, src Tensor)
	// DownloadInt32 waits for the ops issued so far and copies the I32
	// tensor src into dst (len(dst) must equal its size). It returns the
	// pending op error, if any, without clearing it, as Download does.
	DownloadInt32(dst []int32, src Tensor) error
}

// Softcapper is implemented by backends that soft-cap a tensor in place
// where it is (the CUDA backend): x -> c·tanh(x/c), Gemma 2's final logit
// soft-cap (model.Config.FinalSoftcap). model's Forward applies it to the
// logits before an Argmaxer's pick and before any row is downloaded, so the
// device's greedy token is picked from the capped logits as the host's is;
// where it is missing, Forward caps the downloaded rows on the host
// (c·tanh(x/c) in float64, rounded once).
type Softcapper interface {
	// Softcap replaces each value v of the F32 tensor x by c·tanh(v/c)
	// (c a finite cap > 0). It is an op: queued in order with the others,
	// its error recorded.
	Softcap(x Tensor, c float32)
}

// HeadDimPadder is implemented by backends whose attention kernels take only
// some head dimensions (the CUDA backend: 64, 128 and 256). The model
// loader asks it for each model's head dim D and, where the answer Dp is
// larger, pads every head to Dp at load (zero rows and columns, zero RoPE
// frequencies, the attention scale and the per-head norms kept exact:
// model.Config.PadHeads), so that the model runs on the backend's kernels
// with the same logits; its KV cache and attention then cost Dp/D of an
// unpadded one. Backends without it take every head dim the model does.
type HeadDimPadder interface {
	// PadHeadDim returns the head dim the backend runs a model of head dim
	// d at: d itself where its kernels take d, else the smallest larger
	// one they take; ok is false where none is larger (the caller keeps d,
	// and the backend's caches refuse it by name).
	PadHeadDim(d int) (dp int, ok bool)
}

// WeightJoiner is implemented by backends that can compute a LinearGroup
// as one matrix product when its weights lie in one allocation (the CUDA
// backend: one cuBLASLt GEMM over q|k|v or gate|up at large batches). The
// model loader calls it once per group after loading, before any op.
type WeightJoiner interface {
	// JoinWeights places the matrix weights ws, of equal input width, one
	// after another in one allocation, in this order (LinearGroup's
	// order); their names, shapes and values are unchanged. Where the
	// backend cannot join them it does nothing and returns nil; an error
	// is a device failure.
	JoinWeights(ws ...Weight) error
}

// RandomQuantLoader is implemented by backends that can make random packed
// low-bit linear weights on the device (benchmarks of weight formats at the
// size of real models, where quantizing billions of host values would take
// minutes). The codes are pseudo-random bits, every group's (scale, zero)
// the same realistic pair: the layout and the bytes a GEMV reads are those of
// a real quantized matrix, the values only plausible.
type RandomQuantLoader interface {
	// LoadRandomQuant returns a [N, K] linear weight in format e (an integer
	// wq.Elem) with groups of G input channels. With dec.KChunk > 0 it also
	// gets DEC with a random int4 residual of realistic scale (dec.R is
	// ignored): the bytes and kernels of a real one.
	LoadRandomQuant(name string, shape []int, e wq.Elem, G int, seed uint64, dec wq.DEC) (Weight, error)
}

// QuantWeightLoader is implemented by backends that run linear layers on
// packed low-bit weights (package wq) without widening them. The model
// loader quantizes a linear layer's weight and hands it over here; a backend
// without this interface gets the dequantized values through LoadWeight
// instead (the loader says so in one line), which keeps the accuracy of the
// format but not its memory or speed, and cannot do DEC.
type QuantWeightLoader interface {
	// LoadQuantWeight makes a linear weight [m.N, m.K] from a packed matrix
	// (valid per m.Validate). With dec non-nil, Linear adds dynamic error
	// compensation for every row of x: its own approximate top-k of |x| per
	// chunk of wq.ChunkChannels inputs (wq.SelectApprox with dec.KChunk),
	// then wq.Compensate's sum over the residual rows of those channels,
	// added after the bias: dst = (x·Ŵᵀ + bias) + dec. dec.R is [K, N]; a
	// device backend keeps it in host memory mapped into the device. The
	// backend does not keep m or dec beyond the weight's life and does not
	// modify them.
	LoadQuantWeight(name string, m *wq.Matrix, dec *wq.DEC) (Weight, error)
}

// QuantEmbedder is implemented by backends whose Embedding also gathers the
// rows of a weight their LoadQuantWeight made: each row's dequantized values
// ŵ (wq.Matrix.DequantRow). The loader then lets a tied LM head's quantized
// copy serve the token lookup too, and keeps no 16-bit embedding beside it.
type QuantEmbedder interface {
	QuantWeightLoader
	// EmbedsQuantized marks the capability; it does nothing.
	EmbedsQuantized()
}

// NumElements returns the number of elements of a tensor of the given shape:
// the product of its dimensions. It returns -1 if a dimension is not
// positive or the product overflows an int (or exceeds 2^53, beyond which no
// backend can address elements).
func NumElements(shape []int) int {
	if len(shape) == 0 {
		return -1
	}
	n := 1
	for _, d := range shape {
		if d <= 0 || n > maxElements/d {
			return -1
		}
		n *= d
	}
	return n
}

// maxElements bounds the element count of any tensor: 2^53 (or the largest
// int on 32-bit platforms), which keeps every byte offset exact in int64 and
// float64 arithmetic.
const maxElements = min(math.MaxInt, 1<<53)

// Matrix returns the row-major matrix view of shape that every op uses: rows
// is the product of all dimensions but the last, cols the last dimension.
func Matrix(shape []int) (rows, cols int) {
	if len(shape) == 0 {
		return 0, 0
	}
	cols = shape[len(shape)-1]
	rows = 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	return rows, cols
}

// ShapeError reports an op called with tensors whose shapes do not fit.
type ShapeError struct {
	Op     string // the op, e.g. "Linear"
	Detail string // what did not fit, with the shapes
}

// Error implements error.
func (e *ShapeError) Error() string { return "backend: " + e.Op + ": " + e.Detail }

// ExpertMixer is implemented by backends that run a mixture of experts
// with the router's choice kept in device memory (the CUDA backend): no
// host round trip in a forward pass, so a decode step is the same launches
// whatever its tokens choose (a CUDA graph replays it). The model routes on
// the host where it is missing (backend/cpu: a download there is a copy)
// or where LoadExperts refuses a layer's weights.
type ExpertMixer interface {
	// LoadExperts prepares one layer's E experts for MixExperts, of
	// which each token chooses k: gate[e] and up[e] [IE, H], down[e]
	// [H, IE], weights of this backend that stay loaded (and in place)
	// while the handle lives. It returns an error where the backend
	// cannot mix them (a weight format its kernels lack, too large a k);
	// the caller then routes that layer on the host.
	LoadExperts(gate, up, down []Weight, k int) (Experts, error)
	// FreeExperts releases a handle of LoadExperts (not its weights).
	FreeExperts(ex Experts)
	// RouteExperts computes each token's k experts from the router's
	// logits [T, E] F32, as model.RouteTokens does: p = softmax of the
	// row in float32, the k largest (equal values: the lower index
	// first), divided by their sum where norm. It writes them to idx
	// [T, k] I32 and w [T, k] F32, each row's k slots sorted by expert
	// index (the order in which MixExperts sums them). It is an op.
	RouteExperts(idx, w, logits Tensor, norm bool)
	// MixExperts computes out [T, H] = Σ_j w[t,j]·expert_{idx[t,j]}(x[t])
	// for x [T, H], each expert a SwiGLU MLP, down(silu(gate·x) ⊙ up·x),
	// the products w·y rounded to float32 and summed from 0 in slot
	// order; act [T·k, IE] F32 is scratch. Where shared is not nil
	// (Qwen2-MoE's shared expert: shared [T, H], sharedGate [T, 1] its
	// gate's logit) it then adds sigmoid(sharedGate[t])·shared[t]. It is
	// an op; out must be distinct from the inputs.
	MixExperts(out, x Tensor, ex Experts, idx, w, act, shared, sharedGate Tensor)
}

// Experts is a handle of ExpertMixer.LoadExperts: one layer's experts.
type Experts interface {
	// Len returns the number of experts.
	Len() int
}

// ExpertRows is implemented by an Experts handle whose MixExperts takes at
// most MaxRows tokens (the CUDA backend's packed low-bit experts: one GEMV
// per (token, slot)); the model routes a larger batch of that layer on the
// host.
type ExpertRows interface {
	MaxRows() int
}

package kvcache

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/tp"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// Cache is a KV cache as the engine drives it: the model's Attention (with
// Begin, which checks a batch and reserves the blocks its new tokens fill,
// for all sequences or none) plus the bookkeeping of its sequences and its
// block pool. Every cache of this package and of kvcache/gpukv implements
// it; the engine sees nothing else.
//
// Sequence ids are chosen by the caller and stay valid until Remove. A
// sequence is opened by Open (the scheduler: it may reuse cached prefix
// blocks) or by the first batch that starts it at position 0.
//
// Block accounting is in the cache's own blocks of BlockTokens() tokens; the
// scheduler only compares counts. An unbounded cache (run, eval: its blocks
// are allocated as sequences grow) has TotalBlocks() == 0 and MaxSeqs() == 0.
// A Cache is not safe for concurrent use: one goroutine drives it.
type Cache interface {
	model.Attention
	model.BatchStarter

	// Format returns the cache's resolved KV format.
	Format() kv.Format

	// Open starts sequence id for a prompt and reuses, without copying, the
	// cached blocks of the longest prefix of whole blocks it shares with
	// earlier prompts (never the prompt's last token, whose logits are
	// needed). It returns how many prompt tokens are already cached: the
	// first batch of the sequence starts at that position. It fails with
	// ErrNoSlot when MaxSeqs sequences are open.
	Open(id int, prompt []int) (cached int, err error)
	// Remove frees sequence id's blocks and residual slot at once. Removing
	// an unknown id does nothing.
	Remove(id int)
	// Truncate keeps the first n tokens of sequence id. Packed blocks cannot
	// be reopened: a cache may refuse an n inside them.
	Truncate(id, n int) error
	// Len returns the number of tokens cached for sequence id.
	Len(id int) int
	// BlocksNeeded returns how many free blocks Begin would take to add n
	// tokens to sequence id.
	BlocksNeeded(id, n int) int

	// BlockTokens is the number of tokens in one block (the format's Nr).
	BlockTokens() int
	// FreeBlocks and TotalBlocks count the block pool (0 when unbounded).
	FreeBlocks() int
	TotalBlocks() int
	// MaxSeqs is the number of sequences the cache holds at once (0: any).
	MaxSeqs() int
	// BlockBytes is the memory of one block across all layers and KV heads;
	// ResidualBytes that of one sequence's 16-bit residual blocks (0 for
	// formats without one).
	BlockBytes() int64
	ResidualBytes() int64
	// Bytes returns the memory sequence id takes (all layers and KV heads,
	// by the format's accounting) and what the same tokens take in fp16.
	Bytes(id int) (bytes, fp16Bytes int64)
	// BytesAt returns the memory a sequence of l tokens takes, and in fp16.
	BytesAt(l int) (bytes, fp16Bytes int64)

	// SetTierPolicy gives open sequence id the policy fields of p (tier
	// shares, window, sinks, period) over the stored bit planes; how they
	// are stored stays the cache's. Caches without precision tiers (every
	// format but bw) return an error wrapping ErrNoTiers.
	SetTierPolicy(id int, p kv.PlaneSpec) error
	// TierStats returns what decode has read and the tier mix held now; ok
	// is false for caches without tiers.
	TierStats() (st TierStats, ok bool)

	// Close frees the cache's memory (device memory, for a GPU cache).
	Close() error
}

var (
	// ErrOutOfBlocks is returned (wrapped) when the cache has too few free
	// blocks for a batch. It is a normal condition under load: the scheduler
	// queues or preempts, the server answers 503.
	ErrOutOfBlocks = errors.New("kvcache: out of KV cache blocks")
	// ErrNoSlot is returned (wrapped) by Open when the cache already holds
	// MaxSeqs sequences.
	ErrNoSlot = errors.New("kvcache: no free sequence slot in the KV cache")
	// ErrNoTiers is the reason SetTierPolicy fails on a cache without
	// precision tiers.
	ErrNoTiers = errors.New("the KV cache has no precision tiers (only the bw format has)")
)

// Options size a cache. Zero values pick the defaults.
type Options struct {
	// MaxSeqs is the number of sequences held at once; each holds a 16-bit
	// residual block per layer (reserved up front). 0: on the CPU, any
	// number (an unbounded cache, as run and eval use); on the GPU, 8.
	MaxSeqs int
	// Blocks is the number of packed blocks in the pool (each holds
	// BlockTokens tokens of every layer and KV head). 0: what MemoryBytes
	// leaves after the residual blocks; without MemoryBytes, on the CPU an
	// unbounded pool, on the GPU MaxSeqs·MaxLen/Nr (every sequence at full
	// length).
	Blocks int
	// MemoryBytes is the cache's memory (residual blocks plus pool) when
	// Blocks is 0.
	MemoryBytes int64
	// MaxLen is the longest sequence in tokens (GPU caches size their block
	// tables by it). Default: the model's max_position_embeddings.
	MaxLen int
	// MaxChunk is the most new tokens one sequence may bring in one batch
	// (the prefill chunk; GPU caches plan their prefill launch for it).
	// Default 512.
	MaxChunk int
	// BatchInvariant makes a GPU cache split a sequence's decode by that
	// sequence's own length only (the paged cache: 512 tokens, doubling
	// with the length up to 4096), so that its attention does not depend on
	// the batch it runs in. Off, each batch size gets splits sized to fill
	// the GPU (faster at large batch). CPU caches are always
	// batch-invariant.
	BatchInvariant bool
	// Log receives the one line a tensor-parallel cache writes when it
	// replicates KV heads (fewer KV heads than ranks); nil: quiet.
	Log io.Writer
}

// Provider makes the KV caches of a backend that keeps tensors in its own
// memory (kvcache/gpukv for the CUDA backend, backend/gpu). Providers
// register themselves with Register when their package is linked in.
type Provider interface {
	// Serves reports whether the provider makes the caches of backend be.
	Serves(be backend.Backend) bool
	// New returns an empty cache of format spec for model config cfg on be.
	New(be backend.Backend, cfg *model.Config, spec kv.Spec, o Options) (Cache, error)
}

var (
	providersMu sync.Mutex
	providers   []Provider
)

// Register adds a provider; New asks the providers in the order they were
// registered.
func Register(p Provider) {
	providersMu.Lock()
	defer providersMu.Unlock()
	providers = append(providers, p)
}

// New returns an empty cache of format spec for model config cfg on backend
// be, sized by o: the cache a registered provider offers for be (the GPU
// caches on the CUDA backend), else a CPU cache: Planes for a bit-plane
// (bw) spec, Paged for the others. The CPU caches work with any backend
// (they copy each layer's q, k and v to the host), so a program that links
// a device backend without its provider gets correct but slow caches; the
// bitdecode command links kvcache/gpukv. A format the provider's kernels do
// not read is an error that says so, never a silent CPU path. On a
// tensor-parallel backend (backend/tp) it returns a TPCache: one cache per
// rank, made as above for the rank's backend, over the rank's heads, each
// sized by o.
func New(be backend.Backend, cfg *model.Config, spec kv.Spec, o Options) (Cache, error) {
	if tb, ok := be.(*tp.Backend); ok {
		return AsCache(newTP(tb, cfg, spec, o))
	}
	providersMu.Lock()
	ps := providers
	providersMu.Unlock()
	for _, p := range ps {
		if p.Serves(be) {
			return AsCache(p.New(be, cfg, spec, o))
		}
	}
	if spec.Planes.On {
		return AsCache(NewPlanes(be, cfg, spec, o))
	}
	return AsCache(NewPaged(be, cfg, spec, o))
}

// AsCache returns c, or a nil Cache where err is set: never a nil pointer
// inside the interface, which a caller's c != nil check would take for a
// cache to close. Constructors of concrete caches pass their results
// through it (AsCache(NewPaged(...))).
func AsCache(c Cache, err error) (Cache, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ShapeOf returns the attention shape of model config cfg, checked.
func ShapeOf(cfg *model.Config) (attn.Shape, error) {
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return sh, fmt.Errorf("kvcache: model %s: %w", cfg.Architecture, err)
	}
	return sh, nil
}

// SequenceBytes is the memory l tokens of one sequence take in the layers'
// formats fs (one per layer) across all KV heads (each format's accounting:
// packed blocks plus the residual block), and what they take in the default
// fp16 format by the same accounting (the baseline every comparison uses).
func SequenceBytes(fs []kv.Format, sh attn.Shape, l int) (bytes, fp16Bytes int64) {
	fp16 := int64(len(fs)) * int64(l) * int64(2*sh.D*2)
	if base, err := fp16Spec.Resolve(sh.D); err == nil {
		fp16 = int64(len(fs)) * base.SequenceBytes(l)
	}
	for _, f := range fs {
		bytes += f.SequenceBytes(l)
	}
	return int64(sh.Hkv) * bytes, int64(sh.Hkv) * fp16
}

// LayerFormats resolves spec for every layer of model config cfg: each
// layer's own format where the spec gives per-layer formats, else the
// spec's. The first return is the base format (Format of a cache).
func LayerFormats(cfg *model.Config, spec kv.Spec) (kv.Format, []kv.Format, error) {
	base, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return base, nil, err
	}
	if err := spec.CheckLayers(cfg.Layers); err != nil {
		return base, nil, err
	}
	fs := make([]kv.Format, cfg.Layers)
	for l := range fs {
		if fs[l], err = spec.ForLayer(l, cfg.Layers).Resolve(cfg.HeadDim); err != nil {
			return base, nil, err
		}
	}
	return base, fs, nil
}

// BlockBytesOf is the memory of one block of every layer, Hkv heads each,
// in the layers' formats fs.
func BlockBytesOf(fs []kv.Format, hkv int) int64 { return sumBytes(fs, hkv, kv.Format.BlockBytes) }

// sumBytes returns Hkv times the sum over the layers' formats of per(f).
func sumBytes(fs []kv.Format, hkv int, per func(kv.Format) int) int64 {
	var n int64
	for _, f := range fs {
		n += int64(per(f))
	}
	return int64(hkv) * n
}

// fp16Spec is the baseline format of SequenceBytes.
var fp16Spec = kv.MustParseSpec("fp16")

// layerWindows returns each layer's sliding window (0: full attention),
// the model's LayerWindows padded with zeros to its layers.
func layerWindows(cfg *model.Config) []int {
	ws := make([]int, cfg.Layers)
	copy(ws, cfg.LayerWindows)
	return ws
}

// WindowLimit is the smallest sliding window of cfg's layers (0: none).
// The paged caches (Paged, gpukv.Paged) apply each layer's window; a cache
// that attends over the whole sequence (the bit-plane caches) holds a sequence only
// while it is no longer than this window, where a sliding window changes
// nothing (Mistral v0.1's 4096 tokens, say), and refuses longer ones with
// CheckWindow's error instead of attending wrongly.
func WindowLimit(cfg *model.Config) int {
	limit := 0
	for _, w := range cfg.LayerWindows {
		if w > 0 && (limit == 0 || w < limit) {
			limit = w
		}
	}
	return limit
}

// CheckWindow returns an error if a sequence of b would grow beyond limit
// tokens (0: no limit).
func CheckWindow(limit int, b *model.Batch) error {
	if limit <= 0 {
		return nil
	}
	for _, s := range b.Seqs {
		if s.Pos+s.Len > limit {
			return fmt.Errorf("kvcache: sequence %d would hold %d tokens, beyond the model's sliding window of %d, which this KV cache does not implement (use a shorter context, or --device cpu, whose KV cache applies it)", s.ID, s.Pos+s.Len, limit)
		}
	}
	return nil
}

// CheckLayer returns an error if layer is outside [0, layers).
func CheckLayer(layer, layers int) error {
	if layer < 0 || layer >= layers {
		return fmt.Errorf("kvcache: layer %d out of range [0, %d)", layer, layers)
	}
	return nil
}

// LayerCopies returns n copies of f: the layers' formats of a cache
// without per-layer formats.
func LayerCopies(f kv.Format, n int) []kv.Format {
	fs := make([]kv.Format, n)
	for i := range fs {
		fs[i] = f
	}
	return fs
}

// Stager is a Cache that keeps memory beside its pool and its residual
// blocks for staging a batch's keys and values (the GPU cache's staging
// slots: kvcache/gpukv's rounds.go); Options.MemoryBytes includes it.
type Stager interface {
	// StagingBytes is that memory, all layers and KV heads.
	StagingBytes() int64
}

// StagingBytes returns c's staging memory (Stager), 0 for a cache without.
func StagingBytes(c Cache) int64 {
	if s, ok := c.(Stager); ok {
		return s.StagingBytes()
	}
	return 0
}

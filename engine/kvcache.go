package engine

import (
	"fmt"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// Cache is a KV cache the engine drives: the model's Attention plus the
// bookkeeping of its sequences. KVCache (CPU) and GPUCache implement it.
type Cache interface {
	model.Attention
	// Format returns the cache's resolved KV format.
	Format() kv.Format
	// Len returns the number of tokens cached for sequence id.
	Len(id int) int
	// Bytes returns the memory sequence id takes, and what the same tokens
	// would take in fp16.
	Bytes(id int) (bytes, fp16Bytes int64)
	// BytesAt returns the memory a sequence of l tokens takes, and in fp16.
	BytesAt(l int) (bytes, fp16Bytes int64)
	// Remove frees sequence id.
	Remove(id int)
}

var (
	_ Cache = (*KVCache)(nil)
	_ Cache = (*GPUCache)(nil)
)

// KVCache is a low-bit KV cache for a model: one attn.Cache per (sequence,
// layer) in a kv.Format. It implements model.Attention on the CPU: the new
// tokens' K and V are appended (rounded to fp16 into the residual block,
// packed when it fills), then the new queries attend to everything the
// sequence holds, causally (attn.Decode with Tq = the new tokens). A prompt
// therefore attends to its own earlier tokens as stored: packed blocks
// quantized, the newest Nr-1 in fp16.
type KVCache struct {
	be     backend.Backend
	format kv.Format
	shape  attn.Shape
	layers int
	seqs   map[int][]*attn.Cache
	window int // windowLimit of the model
	q, k   []float32
	v, out []float32
}

// NewKVCache returns an empty cache of the given format for model config cfg.
func NewKVCache(be backend.Backend, cfg *model.Config, spec kv.Spec) (*KVCache, error) {
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return nil, fmt.Errorf("engine: model %s: %w", cfg.Architecture, err)
	}
	if spec.Planes.On {
		return nil, fmt.Errorf("engine: format %s is a bit-plane (bw) format; use NewPlaneCache or NewCPUCache", spec.String())
	}
	f, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return nil, err
	}
	return &KVCache{be: be, format: f, shape: sh, layers: cfg.Layers, seqs: map[int][]*attn.Cache{}, window: windowLimit(cfg)}, nil
}

// Format returns the cache's resolved KV format.
func (c *KVCache) Format() kv.Format { return c.format }

// Len returns the number of tokens cached for sequence id.
func (c *KVCache) Len(id int) int {
	if s := c.seqs[id]; s != nil {
		return s[0].Len(c.format.Residual)
	}
	return 0
}

// Bytes returns the memory the cache of sequence id takes (all layers and
// KV heads; packed blocks plus the fp16 residual blocks), and what the same
// tokens would take in fp16.
func (c *KVCache) Bytes(id int) (bytes, fp16Bytes int64) {
	return c.BytesAt(c.Len(id))
}

// BytesAt returns the memory a sequence of l tokens takes in this cache's
// format (all layers and KV heads; packed blocks plus the fp16 residual
// block), and what the same tokens take in an fp16 cache.
func (c *KVCache) BytesAt(l int) (bytes, fp16Bytes int64) {
	return sequenceBytes(c.format, c.layers, c.shape, l)
}

// Remove frees sequence id's cache.
func (c *KVCache) Remove(id int) { delete(c.seqs, id) }

// Attend implements model.Attention.
func (c *KVCache) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("engine: layer %d out of range [0, %d)", layer, c.layers)
	}
	if err := checkWindow(c.window, b); err != nil {
		return err
	}
	T := len(b.Tokens)
	qw, kvw := c.shape.Hq*c.shape.D, c.shape.Hkv*c.shape.D
	c.q, c.k, c.v, c.out = grow(c.q, T*qw), grow(c.k, T*kvw), grow(c.v, T*kvw), grow(c.out, T*qw)
	for _, t := range []struct {
		dst []float32
		src backend.Tensor
	}{{c.q, q}, {c.k, k}, {c.v, v}} {
		if err := c.be.Download(t.dst, t.src); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
	}
	for _, s := range b.Seqs {
		caches := c.seqs[s.ID]
		if caches == nil {
			caches = make([]*attn.Cache, c.layers)
			for i := range caches {
				var err error
				if caches[i], err = attn.NewCache(c.format, c.shape); err != nil {
					return err
				}
			}
			c.seqs[s.ID] = caches
		}
		cache := caches[layer]
		if have := cache.Len(c.format.Residual); have != s.Pos {
			return fmt.Errorf("engine: layer %d: sequence %d continues at position %d, but its cache holds %d tokens", layer, s.ID, s.Pos, have)
		}
		if err := cache.Append(c.k[s.Start*kvw:(s.Start+s.Len)*kvw], c.v[s.Start*kvw:(s.Start+s.Len)*kvw]); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
		p := attn.Params{Format: c.format, Shape: c.shape, Tq: s.Len}
		if err := attn.Decode(c.out[s.Start*qw:(s.Start+s.Len)*qw], c.q[s.Start*qw:(s.Start+s.Len)*qw], []*attn.Seq{&cache.Seq}, p); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
	}
	return c.be.Upload(out, c.out)
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// sequenceBytes is the memory l tokens of one sequence take in format f
// across all layers and KV heads (the format's accounting: packed blocks
// plus the residual block), and what they take in an fp16 cache.
func sequenceBytes(f kv.Format, layers int, sh attn.Shape, l int) (bytes, fp16Bytes int64) {
	per := int64(layers * sh.Hkv)
	return per * f.SequenceBytes(l), per * int64(l) * int64(2*sh.D*2)
}

// windowLimit is the smallest sliding window of cfg's layers (0: none).
// The low-bit caches attend over the whole sequence; they hold a sequence
// only while it is no longer than this window, where a sliding window
// changes nothing (Mistral v0.1's 4096 tokens, say), and refuse longer ones
// with checkWindow's error instead of attending wrongly.
func windowLimit(cfg *model.Config) int {
	limit := 0
	for _, w := range cfg.LayerWindows {
		if w > 0 && (limit == 0 || w < limit) {
			limit = w
		}
	}
	return limit
}

// checkWindow returns an error if a sequence of b would grow beyond limit
// tokens (0: no limit).
func checkWindow(limit int, b *model.Batch) error {
	if limit <= 0 {
		return nil
	}
	for _, s := range b.Seqs {
		if s.Pos+s.Len > limit {
			return fmt.Errorf("engine: sequence %d would hold %d tokens, beyond the model's sliding window of %d, which the low-bit KV caches do not implement yet (use a shorter context)", s.ID, s.Pos+s.Len, limit)
		}
	}
	return nil
}

// NewCacheFor returns the KV cache that suits backend be: on the CUDA
// backend a GPUCache (sized by o), or a GPUPlaneCache for bit-plane (bw)
// specs; the CPU caches otherwise. A format the GPU kernels do not read is
// an error that says so, never a silent CPU path.
func NewCacheFor(be backend.Backend, cfg *model.Config, spec kv.Spec, o GPUCacheOptions) (Cache, error) {
	if gb, ok := be.(*gpu.Backend); ok {
		if spec.Planes.On {
			return NewGPUPlaneCache(gb, cfg, spec, o)
		}
		return NewGPUCache(gb, cfg, spec, o)
	}
	return NewCPUCache(be, cfg, spec)
}

// CloseCache releases c's device memory when it holds any (a GPUCache or
// GPUPlaneCache).
func CloseCache(c Cache) error {
	if cl, ok := c.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

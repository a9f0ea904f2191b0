package engine

import (
	"fmt"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// PlaneCache is the CPU KV cache of the bit-plane format (kv "bw", read-time
// precision tiers): one attn.PlaneCache per (sequence, layer), a tier map
// and an attention-mass vector per (sequence, layer, KV head), and the
// TierPolicy that rewrites the tier maps every Period tokens. It implements
// model.Attention: new tokens are split into the planes (High, or the
// only tier of a uniform spec: TierPolicy.NewTier), the new
// queries attend with attn.DecodePlanes reading each token at its tier and
// adding its attention probability to the mass, and once Period tokens
// have been decoded since the last re-tier the policy re-tiers that layer.
//
// Re-tiering happens between calls only: feeding a sequence R tokens per
// call (a chunk of R) re-tiers at the same points as R single-token steps,
// on masses equal up to float32 rounding, which is how `bitdecode eval ppl
// --chunk R` reproduces token-by-token decoding under the policy.
type PlaneCache struct {
	be     backend.Backend
	format kv.Format
	shape  attn.Shape
	layers int
	seqs   map[int]*planeSeq
	policy TierPolicy
	stats  ReadStats
	q, k   []float32
	v, out []float32
}

// planeSeq is one sequence's state.
type planeSeq struct {
	caches []*attn.PlaneCache
	mass   [][][]float32 // [layer][Hkv][L]
	since  []int         // tokens decoded per layer since its last re-tier
}

// ReadStats count what decode calls read from a bw cache, summed over
// calls, layers and KV heads.
type ReadStats struct {
	// PlaneBytes are the plane bytes read; IndexBytes the tier-index entries.
	PlaneBytes, IndexBytes int64
	// FP16Bytes is what an fp16 cache reads for the same calls (L·4·D per
	// layer and KV head).
	FP16Bytes int64
	// Tokens counts the tokens per tier over the same calls.
	Tokens [kv.NumTiers]int64
}

// Traffic returns PlaneBytes/FP16Bytes (0 before any call).
func (r ReadStats) Traffic() float64 {
	if r.FP16Bytes == 0 {
		return 0
	}
	return float64(r.PlaneBytes) / float64(r.FP16Bytes)
}

// Add returns the sum of r and o.
func (r ReadStats) Add(o ReadStats) ReadStats {
	r.PlaneBytes += o.PlaneBytes
	r.IndexBytes += o.IndexBytes
	r.FP16Bytes += o.FP16Bytes
	for i := range r.Tokens {
		r.Tokens[i] += o.Tokens[i]
	}
	return r
}

var _ Cache = (*PlaneCache)(nil)

// NewPlaneCache returns an empty bw cache for model config cfg.
func NewPlaneCache(be backend.Backend, cfg *model.Config, spec kv.Spec) (*PlaneCache, error) {
	if !spec.Planes.On {
		return nil, fmt.Errorf("engine: format %s is not a bit-plane (bw) format", spec.String())
	}
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return nil, fmt.Errorf("engine: model %s: %w", cfg.Architecture, err)
	}
	for l, w := range cfg.LayerWindows {
		if w > 0 {
			return nil, fmt.Errorf("engine: the bw cache does not support sliding-window attention (layer %d has a window of %d tokens)", l, w)
		}
	}
	f, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &PlaneCache{be: be, format: f, shape: sh, layers: cfg.Layers, seqs: map[int]*planeSeq{},
		policy: TierPolicy{Spec: spec.Planes}}, nil
}

// Format returns the cache's resolved KV format.
func (c *PlaneCache) Format() kv.Format { return c.format }

// Len returns the number of tokens cached for sequence id.
func (c *PlaneCache) Len(id int) int {
	if s := c.seqs[id]; s != nil {
		return s.caches[0].Len
	}
	return 0
}

// Bytes returns the memory sequence id takes (all layers and KV heads,
// planes only; tier maps, mass and index add 9 bytes per token and head),
// and what the same tokens take in fp16.
func (c *PlaneCache) Bytes(id int) (bytes, fp16Bytes int64) { return c.BytesAt(c.Len(id)) }

// BytesAt returns the memory a sequence of l tokens takes, and in fp16.
func (c *PlaneCache) BytesAt(l int) (bytes, fp16Bytes int64) {
	return sequenceBytes(c.format, c.layers, c.shape, l)
}

// Remove frees sequence id's cache.
func (c *PlaneCache) Remove(id int) { delete(c.seqs, id) }

// ReadStats returns what decode calls have read so far.
func (c *PlaneCache) ReadStats() ReadStats { return c.stats }

// Tiers returns sequence id's tier map of one layer and KV head (nil if
// absent); the slice is the cache's own.
func (c *PlaneCache) Tiers(id, layer, h int) []kv.Tier {
	s := c.seqs[id]
	if s == nil || layer < 0 || layer >= c.layers || h < 0 || h >= c.shape.Hkv {
		return nil
	}
	return s.caches[layer].Tiers[h][:s.caches[layer].Len]
}

// Attend implements model.Attention.
func (c *PlaneCache) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("engine: layer %d out of range [0, %d)", layer, c.layers)
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
	lay := c.format.PlaneLayout()
	for _, s := range b.Seqs {
		ps := c.seqs[s.ID]
		if ps == nil {
			ps = &planeSeq{caches: make([]*attn.PlaneCache, c.layers), mass: make([][][]float32, c.layers), since: make([]int, c.layers)}
			for i := range ps.caches {
				var err error
				if ps.caches[i], err = attn.NewPlaneCache(c.format, c.shape); err != nil {
					return err
				}
				ps.mass[i] = make([][]float32, c.shape.Hkv)
			}
			c.seqs[s.ID] = ps
		}
		cache := ps.caches[layer]
		if cache.Len != s.Pos {
			return fmt.Errorf("engine: layer %d: sequence %d continues at position %d, but its cache holds %d tokens", layer, s.ID, s.Pos, cache.Len)
		}
		if err := cache.Append(c.k[s.Start*kvw:(s.Start+s.Len)*kvw], c.v[s.Start*kvw:(s.Start+s.Len)*kvw]); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
		if nt := c.policy.NewTier(); nt != kv.High {
			for h := range cache.Tiers {
				for t := s.Pos; t < cache.Len; t++ {
					cache.Tiers[h][t] = nt
				}
			}
		}
		mass := ps.mass[layer]
		for h := range mass {
			for len(mass[h]) < cache.Len {
				mass[h] = append(mass[h], 0)
			}
		}
		p := attn.Params{Format: c.format, Shape: c.shape, Tq: s.Len}
		if err := attn.DecodePlanes(c.out[s.Start*qw:(s.Start+s.Len)*qw], c.q[s.Start*qw:(s.Start+s.Len)*qw],
			[]*attn.PlaneSeq{&cache.PlaneSeq}, p, [][][]float32{mass}); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
		for h := 0; h < c.shape.Hkv; h++ {
			_, counts := attn.TierIndex(cache.Tiers[h][:cache.Len], nil)
			read := counts[kv.High] + counts[kv.Medium] + counts[kv.Low]
			c.stats.PlaneBytes += lay.PlaneReadBytes(counts) - int64(read*kv.IndexBytes)
			c.stats.IndexBytes += int64(read * kv.IndexBytes)
			c.stats.FP16Bytes += int64(cache.Len) * int64(lay.TierBytes(kv.High))
			for i, n := range counts {
				c.stats.Tokens[i] += int64(n)
			}
		}
		ps.since[layer] += s.Len
		if ps.since[layer] >= c.policy.Spec.Period {
			ps.since[layer] = 0
			for h := 0; h < c.shape.Hkv; h++ {
				c.policy.Retier(cache.Tiers[h], mass[h], cache.Len)
			}
		}
	}
	return c.be.Upload(out, c.out)
}

// NewCPUCache returns the CPU cache for a format: a PlaneCache for bw, the
// KVCache otherwise.
func NewCPUCache(be backend.Backend, cfg *model.Config, spec kv.Spec) (Cache, error) {
	if spec.Planes.On {
		return NewPlaneCache(be, cfg, spec)
	}
	return NewKVCache(be, cfg, spec)
}

package kvcache

// The KV cache of a tensor-parallel backend (backend/tp), sharded by KV
// head: one cache per rank, made by New for the rank's own backend (so on
// GPUs kvcache/gpukv answers and runs the same decode kernels on the rank's
// heads), for a model config with the rank's Hq/ranks query heads and
// Hkv/ranks KV heads (one, replicated, where there are fewer KV heads than
// ranks). Every rank sees the same batches and so makes the same block
// decisions; the scheduler reads rank 0's books.

import (
	"errors"
	"fmt"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/tp"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// TPCache is the cache New returns for a *tp.Backend: a Cache over the
// ranks' caches. Options size each rank's cache (MemoryBytes and Blocks are
// per rank); BlockBytes, ResidualBytes, Bytes and BytesAt sum the ranks.
type TPCache struct {
	be    *tp.Backend
	ranks []Cache
	shape RankShape
}

var _ Cache = (*TPCache)(nil)

// RankShape is the attention heads one rank of a tensor-parallel group
// holds.
type RankShape struct {
	Ranks      int // the group's ranks
	Heads      int // query heads per rank (Hq/ranks)
	KVHeads    int // KV heads per rank (Hkv/ranks, or 1 when replicated)
	Replicated int // ranks holding each KV head (1: none replicated)
}

// Note returns the one line that says KV heads are replicated ("" when
// they are not).
func (s RankShape) Note(cfg *model.Config) string {
	if s.Replicated <= 1 {
		return ""
	}
	return fmt.Sprintf("kvcache: %d KV heads over %d tensor-parallel ranks: each KV head is replicated on %d ranks (rank r holds KV head r·%d/%d)",
		cfg.KVHeads, s.Ranks, s.Replicated, cfg.KVHeads, s.Ranks)
}

// RankShapeOf returns how model config cfg's heads split over ranks, or an
// error naming the numbers where they do not (query heads not a multiple
// of the ranks; KV heads neither a multiple nor a divisor of them).
func RankShapeOf(cfg *model.Config, ranks int) (RankShape, error) {
	s := RankShape{Ranks: ranks, Replicated: 1}
	if ranks < 1 {
		return s, fmt.Errorf("kvcache: %d tensor-parallel ranks", ranks)
	}
	if cfg.Heads%ranks != 0 {
		return s, fmt.Errorf("kvcache: %d query heads over %d tensor-parallel ranks: want a multiple of %d", cfg.Heads, ranks, ranks)
	}
	s.Heads = cfg.Heads / ranks
	switch {
	case cfg.KVHeads%ranks == 0:
		s.KVHeads = cfg.KVHeads / ranks
	case ranks%cfg.KVHeads == 0:
		s.KVHeads, s.Replicated = 1, ranks/cfg.KVHeads
	default:
		return s, fmt.Errorf("kvcache: %d KV heads over %d tensor-parallel ranks: want a multiple of %d, or a divisor of %d", cfg.KVHeads, ranks, ranks, ranks)
	}
	return s, nil
}

// newTP returns the sharded cache of format spec on be.
func newTP(be *tp.Backend, cfg *model.Config, spec kv.Spec, o Options) (*TPCache, error) {
	rb := be.Ranks()
	s, err := RankShapeOf(cfg, len(rb))
	if err != nil {
		return nil, err
	}
	if spec.Planes.On && len(rb) > 1 {
		return nil, fmt.Errorf("kvcache: the bw format is not supported with tensor parallelism (%d ranks): its tiers are chosen over all heads", len(rb))
	}
	rcfg := *cfg
	rcfg.Heads, rcfg.KVHeads = s.Heads, s.KVHeads
	c := &TPCache{be: be, shape: s}
	for r, rbe := range rb {
		rc, err := New(rbe, &rcfg, spec, o)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
		}
		c.ranks = append(c.ranks, rc)
	}
	if note := s.Note(cfg); note != "" && o.Log != nil {
		fmt.Fprintln(o.Log, note)
	}
	return c, nil
}

// Shape returns the heads each rank holds.
func (c *TPCache) Shape() RankShape { return c.shape }

// Ranks returns the ranks' caches, rank 0 first.
func (c *TPCache) Ranks() []Cache { return c.ranks }

// Attend implements model.Attention: each rank attends on its parts of q,
// k and v (its heads) and writes its heads' columns of out.
func (c *TPCache) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	qp, qr, err := c.be.Parts(q)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d: q: %w", layer, err)
	}
	kp, kr, err := c.be.Parts(k)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d: k: %w", layer, err)
	}
	vp, vr, err := c.be.Parts(v)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d: v: %w", layer, err)
	}
	D := c.ranks[0].Format().D
	for r := range c.ranks {
		if qr == nil || kr == nil || vr == nil || qr[r].N != c.shape.Heads*D || kr[r] != vr[r] || kr[r].N != c.shape.KVHeads*D {
			return fmt.Errorf("kvcache: layer %d: q, k and v are not split by head over the ranks (%d query and %d KV heads of %d each)", layer, c.shape.Heads, c.shape.KVHeads, D)
		}
	}
	if err := c.be.ShardLike(out, q); err != nil {
		return fmt.Errorf("kvcache: layer %d: out: %w", layer, err)
	}
	op, _, err := c.be.Parts(out)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d: out: %w", layer, err)
	}
	for r, rc := range c.ranks {
		if err := rc.Attend(layer, b, qp[r], kp[r], vp[r], op[r]); err != nil {
			return fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
		}
	}
	return nil
}

// Begin implements model.BatchStarter on every rank. The ranks decide
// alike (the same books, the same batches): rank 0's refusal (out of
// blocks, say) is the cache's. Should a later rank refuse a batch that rank
// 0 took, the ranks are out of step: the batch's sequences are removed from
// every rank, so that the ranks agree again, and the error says so (it
// wraps no ErrOutOfBlocks: this is no normal condition to wait out).
func (c *TPCache) Begin(b *model.Batch) error {
	for r, rc := range c.ranks {
		err := rc.Begin(b)
		if err == nil {
			continue
		}
		if r == 0 {
			return err
		}
		for _, s := range b.Seqs {
			c.Remove(s.ID)
		}
		return fmt.Errorf("kvcache: tensor-parallel ranks out of step: rank %d refused a batch rank 0 took (%v); its sequences were removed", r, err)
	}
	return nil
}

// Format implements Cache.
func (c *TPCache) Format() kv.Format { return c.ranks[0].Format() }

// Open implements Cache on every rank; their cached counts must agree.
func (c *TPCache) Open(id int, prompt []int) (int, error) {
	cached := 0
	for r, rc := range c.ranks {
		n, err := rc.Open(id, prompt)
		if err == nil && r > 0 && n != cached {
			err = fmt.Errorf("kvcache: tensor-parallel ranks out of step: rank %d has %d tokens of sequence %d cached, rank 0 %d", r, n, id, cached)
			rc.Remove(id)
		}
		if err != nil {
			for _, done := range c.ranks[:r] {
				done.Remove(id)
			}
			if r > 0 && !errors.Is(err, ErrNoSlot) {
				err = fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
			}
			return 0, err
		}
		cached = n
	}
	return cached, nil
}

// Remove implements Cache on every rank.
func (c *TPCache) Remove(id int) {
	for _, rc := range c.ranks {
		rc.Remove(id)
	}
}

// Truncate implements Cache on every rank.
func (c *TPCache) Truncate(id, n int) error {
	var first error
	for r, rc := range c.ranks {
		if err := rc.Truncate(id, n); err != nil && first == nil {
			first = err
			if r > 0 {
				first = fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
			}
		}
	}
	return first
}

// Len implements Cache (rank 0's).
func (c *TPCache) Len(id int) int { return c.ranks[0].Len(id) }

// BlocksNeeded implements Cache (rank 0's: every rank's is the same).
func (c *TPCache) BlocksNeeded(id, n int) int { return c.ranks[0].BlocksNeeded(id, n) }

// BlockTokens implements Cache.
func (c *TPCache) BlockTokens() int { return c.ranks[0].BlockTokens() }

// FreeBlocks implements Cache: the blocks of each rank's pool (the pools
// move together).
func (c *TPCache) FreeBlocks() int { return c.ranks[0].FreeBlocks() }

// TotalBlocks implements Cache: the blocks of each rank's pool.
func (c *TPCache) TotalBlocks() int { return c.ranks[0].TotalBlocks() }

// MaxSeqs implements Cache.
func (c *TPCache) MaxSeqs() int { return c.ranks[0].MaxSeqs() }

// sum adds f over the ranks.
func (c *TPCache) sum(f func(Cache) int64) int64 {
	var n int64
	for _, rc := range c.ranks {
		n += f(rc)
	}
	return n
}

// BlockBytes implements Cache: one block on every rank (replicated KV heads
// counted on each rank that holds them).
func (c *TPCache) BlockBytes() int64 { return c.sum(Cache.BlockBytes) }

// ResidualBytes implements Cache, summed over the ranks.
func (c *TPCache) ResidualBytes() int64 { return c.sum(Cache.ResidualBytes) }

// StagingBytes implements Stager, summed over the ranks.
func (c *TPCache) StagingBytes() int64 { return c.sum(StagingBytes) }

// Bytes implements Cache, summed over the ranks.
func (c *TPCache) Bytes(id int) (bytes, fp16Bytes int64) {
	for _, rc := range c.ranks {
		b, f := rc.Bytes(id)
		bytes, fp16Bytes = bytes+b, fp16Bytes+f
	}
	return bytes, fp16Bytes
}

// BytesAt implements Cache, summed over the ranks.
func (c *TPCache) BytesAt(l int) (bytes, fp16Bytes int64) {
	for _, rc := range c.ranks {
		b, f := rc.BytesAt(l)
		bytes, fp16Bytes = bytes+b, fp16Bytes+f
	}
	return bytes, fp16Bytes
}

// SetTierPolicy implements Cache on every rank.
func (c *TPCache) SetTierPolicy(id int, p kv.PlaneSpec) error {
	for r, rc := range c.ranks {
		if err := rc.SetTierPolicy(id, p); err != nil {
			if r > 0 {
				return fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
			}
			return err
		}
	}
	return nil
}

// TierStats implements Cache (rank 0's: tiers need one rank).
func (c *TPCache) TierStats() (TierStats, bool) { return c.ranks[0].TierStats() }

// Close implements Cache: it closes every rank's cache.
func (c *TPCache) Close() error {
	var first error
	for r, rc := range c.ranks {
		if err := rc.Close(); err != nil && first == nil {
			first = fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
		}
	}
	return first
}

// randomFiller is a rank cache that fills a sequence with random tokens
// (kvcache/gpukv's caches, for benchmarks at long context).
type randomFiller interface {
	FillRandom(id, n int, seed uint32) error
}

// FillRandom fills sequence id with n random tokens on every rank (rank r
// with seed+r: other heads, other values), as the GPU caches' FillRandom
// does for one GPU; an error where a rank's cache cannot.
func (c *TPCache) FillRandom(id, n int, seed uint32) error {
	for r, rc := range c.ranks {
		f, ok := rc.(randomFiller)
		if !ok {
			return fmt.Errorf("kvcache: tensor-parallel rank %d: its cache (%T) cannot fill random tokens", r, rc)
		}
		if err := f.FillRandom(id, n, seed+uint32(r)); err != nil {
			return fmt.Errorf("kvcache: tensor-parallel rank %d: %w", r, err)
		}
	}
	return nil
}

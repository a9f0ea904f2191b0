package attn

import (
	"fmt"

	"github.com/bitdecode/bitdecode/internal/hugepage"
	"github.com/bitdecode/bitdecode/kv"
)

// Shape is the head configuration of one attention layer.
type Shape struct {
	Hq, Hkv, D int
}

// Group returns Hq/Hkv, the number of query heads per KV head.
func (s Shape) Group() int { return s.Hq / s.Hkv }

// Validate checks that the shape is one the implementations support.
func (s Shape) Validate() error {
	if s.Hkv <= 0 || s.Hq <= 0 || s.Hq%s.Hkv != 0 {
		return fmt.Errorf("attn: Hq=%d must be a positive multiple of Hkv=%d", s.Hq, s.Hkv)
	}
	if !kv.HeadDimOK(s.D) {
		return fmt.Errorf("attn: head dim %d is not supported (want %s)", s.D, kv.HeadDimRule)
	}
	return nil
}

// Seq is a view of one sequence's cache for one layer.
type Seq struct {
	// Blocks are the packed blocks in token order; block i holds tokens
	// [i*Nr, (i+1)*Nr). Each is [Hkv][Format.BlockBytes()] bytes: for
	// every KV head, its K layout followed by its V layout.
	Blocks [][]byte
	// ResK and ResV hold the residual tokens as fp16 bits, [Hkv][Nr][D].
	ResK, ResV []uint16
	// ResLen is the number of tokens in the residual block (< Nr).
	ResLen int
}

// Len returns the number of cached tokens given the block size nr.
func (s *Seq) Len(nr int) int { return len(s.Blocks)*nr + s.ResLen }

// Cache is a sequence's cache for one layer that owns its memory: it appends
// new tokens (rotating and rounding them to fp16 into the residual block) and
// packs the residual block when it fills. The engine's paged cache manager
// does the same with blocks from a shared pool; NewBlock is the seam.
type Cache struct {
	Seq
	Format kv.Format
	Shape  Shape
	// NewBlock returns zeroed memory for one packed block of
	// Hkv*Format.BlockBytes() bytes; nil allocates with make.
	NewBlock func() ([]byte, error)
	scratch  []uint16
	rot      []float32
	// arena holds the pieces of the current chunk not yet carved into
	// blocks, the one in whole huge pages first (the default allocation,
	// NewBlock nil, once the cache holds arenaMinBytes of blocks); own
	// counts the bytes of blocks it allocated.
	arena [][]byte
	own   int
}

// A cache that allocates its own blocks takes them from chunks of
// arenaChunkBytes (plus one huge page of slack, so that at least
// arenaChunkBytes of each lies in whole 2 MiB pages) once it holds
// arenaMinBytes of blocks; smaller caches (tests, short prompts) allocate
// block by block. The chunk's 2 MiB pages are advised and collapsed into
// transparent huge pages (adviseHuge): the decode reads a 4 KiB page in
// ~64-128 tokens of int4 or int2 blocks, and a TLB miss on each from DRAM
// cost ~8 cycles per (token, KV head) at (8, 8K) (docs/perf/cpu-attention.md
// v44). The layout of every block is unchanged; only where it lives.
const (
	arenaMinBytes   = 1 << 20
	arenaChunkBytes = 8 << 20
)

// allocBlock returns n zeroed bytes for a new block: from make while the
// cache is small, else from the current chunk, its huge pages first and
// then its unaligned head and tail (v46); the first chunk takes the blocks
// from make in too (v61).
func (c *Cache) allocBlock(n int) []byte {
	if c.own < arenaMinBytes || 4*n > arenaChunkBytes {
		c.own += n
		return make([]byte, n)
	}
	for len(c.arena) > 0 && len(c.arena[0]) < n {
		c.arena = c.arena[1:]
	}
	if len(c.arena) == 0 {
		first := c.arena == nil
		chunk := make([]byte, arenaChunkBytes+hugepage.Size)
		lo, hi := hugepage.Range(chunk)
		adviseHuge(chunk[lo:hi])
		c.arena = append(c.arena[:0], chunk[lo:hi], chunk[:lo], chunk[hi:])
		if first {
			c.moveOwnBlocks(n)
		}
	}
	b := c.arena[0][:n:n]
	c.arena[0] = c.arena[0][n:]
	c.own += n
	return b
}

// moveOwnBlocks copies the blocks of n bytes the cache took from make
// before its first chunk into the chunk (its huge pages first) and points
// Blocks at the copies: a cache that grows past arenaMinBytes then has every
// block in huge pages but the chunks' unaligned ends, the first MiB too
// (docs/perf/cpu-attention.md v61). The same bytes, so the same bits. It
// does nothing unless every block is one of the cache's own from make
// (NewBlock unset all along), and leaves room for the block being
// allocated.
func (c *Cache) moveOwnBlocks(n int) {
	if len(c.Blocks) == 0 || c.own != len(c.Blocks)*n || len(c.arena[0]) < c.own+n {
		return
	}
	for i, b := range c.Blocks {
		if len(b) != n {
			return
		}
		nb := c.arena[0][:n:n]
		c.arena[0] = c.arena[0][n:]
		copy(nb, b)
		c.Blocks[i] = nb
	}
}

// AdviseHugePages asks the kernel to back the whole 2 MiB pages of b with
// transparent huge pages when they are first touched, and reports whether
// it took the advice (Linux with transparent huge pages on; elsewhere, or
// refused, b keeps small pages and only the speed differs). For a large
// block pool allocated once and filled later, such as a sized paged
// cache's: the decode's streaming reads would take a TLB miss per 4 KiB of
// it otherwise, as a Cache's own chunks would (v44).
func AdviseHugePages(b []byte) bool {
	lo, hi := hugepage.Range(b)
	return hugepage.Advise(b[lo:hi])
}

// adviseHuge asks the kernel to back b, whole 2 MiB pages (hugepage.Range),
// with huge pages now, and reports whether it did. The contents stay as
// they are. The chunk may reuse memory the heap already touched in small
// pages: the advice alone applies to future faults, the collapse to these.
func adviseHuge(b []byte) bool { return hugepage.Advise(b) && hugepage.Collapse(b) }

// NewCache returns an empty cache of format f for shape s.
func NewCache(f kv.Format, s Shape) (*Cache, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if f.D != s.D {
		return nil, fmt.Errorf("attn: format resolved for head dim %d, shape has %d", f.D, s.D)
	}
	c := &Cache{Format: f, Shape: s}
	c.ResK = make([]uint16, s.Hkv*f.Residual*s.D)
	c.ResV = make([]uint16, s.Hkv*f.Residual*s.D)
	return c, nil
}

// Append adds T new tokens, k and v laid out [T][Hkv][D] float32. With a
// rotating format they are rotated first; they are rounded to fp16 into the
// residual block, which is packed whenever it fills.
func (c *Cache) Append(k, v []float32) error {
	hkv, d, nr := c.Shape.Hkv, c.Shape.D, c.Format.Residual
	if len(k) != len(v) || len(k)%(hkv*d) != 0 {
		return fmt.Errorf("attn: Append: k has %d and v %d values; want equal multiples of Hkv*D=%d", len(k), len(v), hkv*d)
	}
	if c.Format.Rotate && c.rot == nil {
		c.rot = make([]float32, d)
	}
	for t := 0; t < len(k)/(hkv*d); t++ {
		for h := 0; h < hkv; h++ {
			src := (t*hkv + h) * d
			dst := (h*nr + c.ResLen) * d
			c.put(c.ResK[dst:dst+d], k[src:src+d])
			c.put(c.ResV[dst:dst+d], v[src:src+d])
		}
		c.ResLen++
		if c.ResLen == nr {
			if err := c.packResidual(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cache) put(dst []uint16, src []float32) {
	k := activeKernels()
	if c.Format.Rotate {
		copy(c.rot, src)
		k.rotate(c.rot) // kv.Rotate's bits
		src = c.rot
	}
	k.toHalf(dst, src) // half.FromFloat32's bits
}

// packResidual quantizes the full residual block into a new packed block.
func (c *Cache) packResidual() error {
	f := c.Format
	var blk []byte
	var err error
	if c.NewBlock != nil {
		blk, err = c.NewBlock()
		if err != nil {
			return fmt.Errorf("attn: allocating a KV block: %w", err)
		}
	} else {
		blk = c.allocBlock(c.Shape.Hkv * f.BlockBytes())
	}
	PackResidual(blk, f, c.Shape.Hkv, c.ResK, c.ResV)
	c.Blocks = append(c.Blocks, blk)
	c.ResLen = 0
	return nil
}

// PackResidual packs a full residual block (resK, resV: [Hkv][Nr][D] fp16)
// into blk ([Hkv][BlockBytes]), with the bytes of kv.TensorLayout.Pack
// (integer layouts through packLayout's faster path).
func PackResidual(blk []byte, f kv.Format, hkv int, resK, resV []uint16) {
	n := f.Residual * f.D
	k := activeKernels()
	for h := 0; h < hkv; h++ {
		base := blk[h*f.BlockBytes():]
		packLayout(base[:f.K.Bytes], f.K, resK[h*n:(h+1)*n], k)
		packLayout(base[f.K.Bytes:f.K.Bytes+f.V.Bytes], f.V, resV[h*n:(h+1)*n], k)
	}
}

package gpukv

import (
	"fmt"

	"github.com/bitdecode/bitdecode/kvcache"
)

// seqBlocks is one sequence's share of a GPU cache: its slot (a residual
// block in Paged, a row of the attention mass in Planes), the pool blocks
// holding its tokens in order (the same block ids in every layer), and its
// length.
type seqBlocks struct {
	slot   int
	blocks []int32
	n      int
}

// blockPool is the host-side bookkeeping of a GPU cache's fixed memory, which
// both caches share: the free pool blocks and the free sequence slots.
type blockPool struct {
	freeBlocks    []int32
	freeSlots     []int
	blocks, slots int // totals
}

// newBlockPool returns a pool with every block and slot free; blocks and slots
// are handed out lowest first.
func newBlockPool(blocks, slots int) blockPool {
	p := blockPool{blocks: blocks, slots: slots}
	for i := blocks - 1; i >= 0; i-- {
		p.freeBlocks = append(p.freeBlocks, int32(i))
	}
	for i := slots - 1; i >= 0; i-- {
		p.freeSlots = append(p.freeSlots, i)
	}
	return p
}

// fits returns an error wrapping kvcache.ErrOutOfBlocks unless blocks pool
// blocks and slots sequence slots are free; what names the cache.
func (p *blockPool) fits(what string, blocks, slots int) error {
	if blocks > len(p.freeBlocks) || slots > len(p.freeSlots) {
		return fmt.Errorf("gpukv: %s: the batch needs %d blocks and %d sequence slots, %d and %d are free: %w",
			what, blocks, slots, len(p.freeBlocks), len(p.freeSlots), kvcache.ErrOutOfBlocks)
	}
	return nil
}

// open returns a new sequence with a slot; the caller checked one is free.
func (p *blockPool) open() *seqBlocks {
	s := &seqBlocks{slot: p.freeSlots[len(p.freeSlots)-1]}
	p.freeSlots = p.freeSlots[:len(p.freeSlots)-1]
	return s
}

// grow appends n free blocks to s's block table; the caller checked they
// are free.
func (p *blockPool) grow(s *seqBlocks, n int) {
	for range n {
		s.blocks = append(s.blocks, p.freeBlocks[len(p.freeBlocks)-1])
		p.freeBlocks = p.freeBlocks[:len(p.freeBlocks)-1]
	}
}

// empty frees s's blocks and makes it hold no tokens; it keeps its slot.
func (p *blockPool) empty(s *seqBlocks) {
	p.freeBlocks = append(p.freeBlocks, s.blocks...)
	s.blocks, s.n = nil, 0
}

// release frees s's blocks and its slot.
func (p *blockPool) release(s *seqBlocks) {
	p.empty(s)
	p.freeSlots = append(p.freeSlots, s.slot)
}

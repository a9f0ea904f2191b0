package kvcache

import (
	"fmt"

	"github.com/bitdecode/bitdecode/model"
)

// batchSeqs are a block cache's per-sequence operations reserveBatch needs.
type batchSeqs struct {
	open         func(id int) error // open sequence id, not open, starting at position 0
	has          func(id int) bool
	length       func(id int) int
	remove       func(id int)
	blocksNeeded func(id, n int) int
}

// reserveBatch is the all-or-nothing check of a block cache's Begin: it
// opens the sequences of b that start at position 0 and are not open, checks
// that every sequence continues where its cache ends, and, with an
// allocator, that the free blocks cover the batch. On error the sequences it
// opened are removed and nothing else has changed; the caller allocates the
// blocks after it returns nil. what names the cache in errors.
func reserveBatch(b *model.Batch, what string, alloc *BlockAllocator, s batchSeqs) error {
	need := 0
	var opened []int
	undo := func() {
		for _, id := range opened {
			s.remove(id)
		}
	}
	for _, sq := range b.Seqs {
		if !s.has(sq.ID) && sq.Pos == 0 {
			if err := s.open(sq.ID); err != nil {
				undo()
				return err
			}
			opened = append(opened, sq.ID)
		}
		if have := s.length(sq.ID); !s.has(sq.ID) || have != sq.Pos {
			undo()
			return fmt.Errorf("kvcache: %s: sequence %d continues at position %d, but the cache holds %d tokens", what, sq.ID, sq.Pos, have)
		}
		need += s.blocksNeeded(sq.ID, sq.Len)
	}
	if alloc != nil && need > alloc.Free() {
		undo()
		return fmt.Errorf("%w: the batch of %d tokens needs %d blocks, %d of %d free", ErrOutOfBlocks, len(b.Tokens), need, alloc.Free(), alloc.Total())
	}
	return nil
}

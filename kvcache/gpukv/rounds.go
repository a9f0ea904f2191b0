package gpukv

// Write rounds: where a batch's new keys and values go before they are
// packed.
//
// A sequence owns one residual slot of Nr tokens (its 16-bit residual
// block). A block of a sequence fills when its Nr-th token arrives; the
// pack kernel then quantizes the slot holding the block's tokens into the
// block's pool block. Until session 31 every token went to its sequence's
// own slot, so a chunk that filled k blocks took k write rounds, each an
// append launch and a pack launch, one after the other: 16 of each per
// layer for a 2048-token chunk of a 128-token residual, two per layer at
// serve's 256-token chunks, where one round would also have let the append
// apply RoPE itself (kernels.KVWriter.AppendRoPE: one launch fewer).
//
// Now a cache keeps a few staging slots per layer after the sequences'
// (Paged.stage, slots MaxSeqs..MaxSeqs+stage-1): a block that fills in a
// batch and holds none of the sequence's earlier tokens is written to a
// staging slot and packed from there, so every such block of a batch packs
// in one launch of the first round. Only two cases need another round:
//   - the block that holds a sequence's earlier tokens (a chunk starting
//     inside a block, or a decode token closing one) packs from the
//     sequence's own slot in round 0, so the same sequence's tokens after
//     that block (its new tail) are written in round 1, after the pack has
//     read the slot;
//   - more blocks than staging slots: the next round reuses them.
// A decode step (one token a sequence) is one round, as before; an aligned
// prefill chunk (engine.Scheduler's chunks are whole blocks) is one round
// whatever its length if the staging slots hold its blocks.
//
// The bits: a slot's bytes are the fp16 of the token's key or value
// whatever slot holds them, and the pack's output depends only on those
// bytes (and a launch's work split never on the result), so the packed
// blocks, the residual tail and every attention output are those of the
// one-slot rounds (TestPlanRounds checks the plan by simulating the slots;
// the GPU cache tests compare the outputs with the reference).

// roundSeq is one sequence of a batch as planRounds sees it.
type roundSeq struct {
	start, pos, n int     // its first token in the batch, its first new position, its new tokens
	slot          int     // its own residual slot
	blocks        []int32 // its block table (a pool block per Nr positions)
}

// roundPlan is one write round: the slot and row of each of the batch's T
// tokens written in it (-1: not in this round), then a pack of the slots
// src into the pool blocks dst.
type roundPlan struct {
	slot, row []int32
	src, dst  []int32
}

// planRounds plans the write rounds of a batch of T new tokens for a
// residual of nr tokens, with stage staging slots numbered from stageBase
// (see above); with none, every block packs from its sequence's own slot,
// one round per block, as before session 31. A batch without new tokens
// has no round.
func planRounds(seqs []roundSeq, T, nr, stageBase, stage int) []roundPlan {
	var rounds []roundPlan
	round := func(r int) *roundPlan {
		for len(rounds) <= r {
			p := roundPlan{slot: make([]int32, T), row: make([]int32, T)}
			for i := range p.slot {
				p.slot[i] = -1
			}
			rounds = append(rounds, p)
		}
		return &rounds[r]
	}
	write := func(r int, s roundSeq, lo, hi, slot int) {
		p := round(r)
		for pos := lo; pos < hi; pos++ {
			p.slot[s.start+pos-s.pos], p.row[s.start+pos-s.pos] = int32(slot), int32(pos%nr)
		}
	}
	staged, stageRound := 0, 0 // staging slots taken in round stageRound
	for _, s := range seqs {
		if s.n == 0 {
			continue
		}
		end := s.pos + s.n
		// open: the own slot holds earlier tokens of block pos/nr; own: the
		// first round in which the own slot is free to write.
		open, own := s.pos%nr != 0, 0
		for b := s.pos / nr; (b+1)*nr <= end; b++ { // the blocks this batch fills
			r, slot := own, s.slot
			if (b == s.pos/nr && open) || stage == 0 {
				own++ // packed from the own slot: its next writes wait a round
			} else {
				if staged == stage {
					staged, stageRound = 0, stageRound+1
				}
				r, slot = stageRound, stageBase+staged
				staged++
			}
			write(r, s, max(s.pos, b*nr), (b+1)*nr, slot)
			p := round(r)
			p.src, p.dst = append(p.src, int32(slot)), append(p.dst, s.blocks[b])
		}
		if lo := end / nr * nr; lo < end { // the new tail, in the own slot
			write(own, s, max(lo, s.pos), end, s.slot)
		}
	}
	return rounds
}

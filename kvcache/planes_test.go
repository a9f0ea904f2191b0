package kvcache

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// planeServeSpec is the bw format of the serving tests: blocks of 32
// tokens, a mix of tiers, a short window and period so that re-tiering
// happens within the tiny model's requests.
const planeServeSpec = "bw:h20:m40:l40:w16:s2:r8:blk32"

// checkPlaneIdle checks that a paged bw cache holds nothing.
func checkPlaneIdle(t *testing.T, pc *Planes) {
	t.Helper()
	if err := pc.CheckIdle(); err != nil {
		t.Error(err)
	}
}

// TestPlanesSizedBlocks drives a paged bw cache through the model as
// the scheduler does and checks the block accounting: a block is taken
// when its first token is written, Begin either reserves a batch's blocks
// or fails with ErrOutOfBlocks leaving everything as it was, sequence
// slots run out with ErrNoSlot, Truncate and Remove free blocks together
// with the tier maps, and the memory budget counts planes, tier maps and
// mass.
func TestPlanesSizedBlocks(t *testing.T) {
	m, _, be := tiny(t)
	cfg := m.Config()
	spec := kv.MustParseSpec(planeServeSpec)
	const nr, blocks = 32, 6
	pc, err := NewPlanes(be, cfg, spec, Options{MaxSeqs: 2, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	if pc.BlockTokens() != nr || pc.TotalBlocks() != blocks || pc.FreeBlocks() != blocks || pc.MaxSeqs() != 2 || pc.ResidualBytes() != 0 {
		t.Fatalf("new cache: %d-token blocks, %d of %d free, %d seqs, residual %d", pc.BlockTokens(), pc.FreeBlocks(), pc.TotalBlocks(), pc.MaxSeqs(), pc.ResidualBytes())
	}
	planes := int64(cfg.Layers * cfg.KVHeads * 4 * nr * cfg.HeadDim)
	if pc.BlockBytes() != planes+int64(cfg.Layers*cfg.KVHeads*nr*5) || pc.PoolBytes() != blocks*planes {
		t.Errorf("block bytes %d (planes %d), pool %d", pc.BlockBytes(), planes, pc.PoolBytes())
	}
	r := rand.New(rand.NewPCG(5, 6))
	forward := func(id, pos, n int) error {
		var b model.Batch
		b.Add(id, pos, randTokens(r, n, tinymodel.Vocab)...)
		_, err := m.Forward(&b, pc)
		return err
	}
	if cached, err := pc.Open(1, []int{1, 2, 3}); err != nil || cached != 0 {
		t.Fatalf("Open: %d, %v", cached, err)
	}
	if _, err := pc.Open(1, nil); err == nil {
		t.Error("Open of an open sequence succeeded")
	}
	if got := pc.BlocksNeeded(1, 40); got != 2 {
		t.Errorf("BlocksNeeded(empty, 40) = %d, want 2", got)
	}
	if err := forward(1, 0, 40); err != nil {
		t.Fatal(err)
	}
	if pc.Len(1) != 40 || pc.FreeBlocks() != blocks-2 {
		t.Fatalf("after 40 tokens: len %d, %d free", pc.Len(1), pc.FreeBlocks())
	}
	for _, tc := range []struct{ n, want int }{{0, 0}, {24, 0}, {25, 1}, {56, 1}, {57, 2}} {
		if got := pc.BlocksNeeded(1, tc.n); got != tc.want {
			t.Errorf("BlocksNeeded(40 tokens, %d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got := pcTierMix(pc); got[kv.High]+got[kv.Medium]+got[kv.Low] != int64(40*cfg.Layers*cfg.KVHeads) {
		t.Errorf("tier mix %v for 40 tokens", got)
	}

	// Out of blocks: sequence 2 would need 5 blocks, 4 are free. Nothing
	// changes, the sequence Begin opened is closed again.
	st, free, stats := pc.Seqs(), pc.FreeBlocks(), pcTierStats(pc)
	if err := forward(2, 0, 150); !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("150 tokens with %d blocks free: %v", free, err)
	}
	if pc.Seqs() != st || pc.FreeBlocks() != free || pc.Len(1) != 40 || pc.Len(2) != 0 || pcTierStats(pc) != stats {
		t.Errorf("failed Begin changed the cache: %d seqs, %d free, lens %d %d", pc.Seqs(), pc.FreeBlocks(), pc.Len(1), pc.Len(2))
	}
	if err := pc.Allocator().Check(); err != nil {
		t.Error(err)
	}
	// A second sequence fits; a third finds no slot.
	if err := forward(2, 0, 100); err != nil {
		t.Fatal(err)
	}
	if pc.FreeBlocks() != 0 {
		t.Errorf("%d blocks free, want 0", pc.FreeBlocks())
	}
	if _, err := pc.Open(3, nil); !errors.Is(err, ErrNoSlot) {
		t.Errorf("Open of a third sequence with 2 slots: %v", err)
	}
	// A decode step of sequence 1 fits in its partly filled block.
	if err := forward(1, 40, 1); err != nil {
		t.Fatal(err)
	}
	// Truncate keeps whole and partial blocks, frees the rest, and the
	// sequence continues from there.
	if err := pc.Truncate(2, 65); err != nil {
		t.Fatal(err)
	}
	if pc.Len(2) != 65 || pc.FreeBlocks() != 1 || len(pc.Tiers(2, 1, 0)) != 65 {
		t.Errorf("truncate to 65: len %d, %d free, %d tiers", pc.Len(2), pc.FreeBlocks(), len(pc.Tiers(2, 1, 0)))
	}
	if err := pc.Truncate(2, 64); err != nil {
		t.Fatal(err)
	}
	if pc.FreeBlocks() != 2 {
		t.Errorf("truncate to 64: %d free, want 2", pc.FreeBlocks())
	}
	if err := pc.Truncate(2, 65); err == nil {
		t.Error("truncate beyond the length succeeded")
	}
	if err := forward(2, 64, 10); err != nil {
		t.Fatal(err)
	}
	if pc.Len(2) != 74 || pc.FreeBlocks() != 1 {
		t.Errorf("after continuing: len %d, %d free", pc.Len(2), pc.FreeBlocks())
	}
	want := int64((41 + 74) * cfg.Layers * cfg.KVHeads)
	var held int64
	for _, n := range pcTierMix(pc) {
		held += n
	}
	if held != want {
		t.Errorf("tier mix holds %d entries, want %d", held, want)
	}
	pc.Remove(1)
	pc.Remove(2)
	pc.Remove(2)
	checkPlaneIdle(t, pc)

	// Sizing from memory: the budget is in BlockBytes (planes plus tier
	// maps and mass).
	bb := pc.BlockBytes()
	sized, err := NewPlanes(be, cfg, spec, Options{MaxSeqs: 4, MemoryBytes: 10*bb + bb - 1})
	if err != nil || sized.TotalBlocks() != 10 {
		t.Errorf("memory for 10.99 blocks: %v blocks, %v", sized.TotalBlocks(), err)
	}
	if _, err := NewPlanes(be, cfg, spec, Options{MaxSeqs: 4, MemoryBytes: bb - 1}); err == nil {
		t.Error("memory for no block accepted")
	}
	if _, err := NewPlanes(be, cfg, kv.MustParseSpec("int4"), Options{MaxSeqs: 4, Blocks: 4}); err == nil {
		t.Error("int4 accepted as a bw cache")
	}
}

// pcTierMix returns the tier mix a bw cache holds now.
func pcTierMix(pc *Planes) [kv.NumTiers]int64 {
	st, _ := pc.TierStats()
	return st.Cached
}

// pcTierStats returns a bw cache's tier statistics.
func pcTierStats(pc *Planes) TierStats {
	st, _ := pc.TierStats()
	return st
}

// Tests of the cache's own block allocation: the chunks a large cache takes
// its blocks from (allocBlock) and their huge-page advice (adviseHuge).

package attn

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/hugepage"
	"github.com/bitdecode/bitdecode/kv"
)

// TestCacheArenaBlocks builds the same cache twice, with its own allocation
// (past arenaMinBytes the blocks come from chunks) and with NewBlock as
// make: every block holds the same bytes, the chunk's blocks do not
// overlap and cannot grow into each other, the first MiB's blocks were
// moved into the first chunk (v61), and the decode gives the same bits from
// both.
func TestCacheArenaBlocks(t *testing.T) {
	sh := Shape{Hq: 32, Hkv: 8, D: 128}
	f := kv.MustResolve("int4", sh.D)
	bb := sh.Hkv * f.BlockBytes()
	n := (arenaMinBytes/bb + 1 + arenaChunkBytes/bb + 3) * f.Residual // past the first chunk
	if testing.Short() {
		n = (arenaMinBytes/bb + 4) * f.Residual // into the first chunk
	}
	own, err := NewCache(f, sh)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewCache(f, sh)
	plain.NewBlock = func() ([]byte, error) { return make([]byte, bb), nil }
	r := rand.New(rand.NewPCG(5, 6))
	g := newKVGen(r, sh.Hkv, sh.D)
	for done := 0; done < n; {
		m := min(n-done, 1+r.IntN(300))
		k, v := g.tokens(m)
		if err := own.Append(k, v); err != nil {
			t.Fatal(err)
		}
		if err := plain.Append(k, v); err != nil {
			t.Fatal(err)
		}
		done += m
	}
	if len(own.Blocks) != len(plain.Blocks) || len(own.Blocks) != n/f.Residual {
		t.Fatalf("%d and %d blocks, want %d", len(own.Blocks), len(plain.Blocks), n/f.Residual)
	}
	type span struct{ lo, hi uintptr }
	var chunked []span
	for i, b := range own.Blocks {
		if len(b) != bb || cap(b) != bb {
			t.Fatalf("block %d: len %d cap %d, want %d", i, len(b), cap(b), bb)
		}
		if !bytes.Equal(b, plain.Blocks[i]) {
			t.Fatalf("block %d differs from the one packed into make's memory", i)
		}
		lo := uintptr(unsafe.Pointer(&b[0]))
		for j, s := range chunked {
			if lo < s.hi && s.lo < lo+uintptr(bb) {
				t.Fatalf("block %d overlaps block %d", i, j)
			}
		}
		chunked = append(chunked, span{lo, lo + uintptr(bb)})
	}
	if own.arena == nil {
		t.Fatalf("the cache never took blocks from a chunk (%d bytes of blocks)", own.own)
	}
	// The blocks from make before the first chunk were moved into its huge
	// pages (v61): the first chunk's whole pages hold blocks 0, 1, ... back
	// to back.
	for i := 1; i < min(len(own.Blocks), arenaChunkBytes/bb); i++ {
		if uintptr(unsafe.Pointer(&own.Blocks[i][0])) != uintptr(unsafe.Pointer(&own.Blocks[i-1][0]))+uintptr(bb) {
			t.Fatalf("block %d does not follow block %d in the first chunk", i, i-1)
		}
	}
	p := Params{Format: f, Shape: sh, Tq: 1}
	q := randQ(r, sh.Hq*sh.D)
	a, b := nanSlice(len(q)), nanSlice(len(q))
	if err := Decode(a, q, []*Seq{&own.Seq}, p); err != nil {
		t.Fatal(err)
	}
	if err := Decode(b, q, []*Seq{&plain.Seq}, p); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) || a[i] != a[i] {
			t.Fatalf("output %d: %g from the cache's chunks, %g from make's blocks", i, a[i], b[i])
		}
	}
}

// TestAdviseHugeKeepsContents advises the huge pages of a chunk with data
// in it: the bytes are the same after (whether or not this kernel gave
// huge pages), and hugepage.Range gives whole aligned pages inside the chunk.
func TestAdviseHugeKeepsContents(t *testing.T) {
	b := make([]byte, 3*hugepage.Size)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	want := bytes.Clone(b)
	lo, hi := hugepage.Range(b)
	base := uintptr(unsafe.Pointer(&b[0]))
	if lo < 0 || hi > len(b) || hi-lo < len(b)-hugepage.Size || (base+uintptr(lo))%hugepage.Size != 0 || (hi-lo)%hugepage.Size != 0 {
		t.Fatalf("hugepage.Range of %d bytes at %#x: [%d, %d)", len(b), base, lo, hi)
	}
	t.Logf("adviseHuge: %v", adviseHuge(b[lo:hi]))
	if !bytes.Equal(b, want) {
		t.Fatal("adviseHuge changed the chunk's bytes")
	}
	if lo, hi := hugepage.Range(b[:hugepage.Size-1]); lo != hi {
		t.Fatalf("hugepage.Range of less than a page: [%d, %d)", lo, hi)
	}
}

// TestAdviseHugePagesPool advises a fresh pool as a sized paged cache does,
// then fills it: it reads back zero before and its data after, advised or
// not (the advice changes where the bytes live, never what they are).
func TestAdviseHugePagesPool(t *testing.T) {
	b := make([]byte, 5*hugepage.Size+123)
	t.Logf("AdviseHugePages: %v", AdviseHugePages(b))
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d of a fresh advised pool is %d", i, v)
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	r = rand.New(rand.NewPCG(9, 10))
	for i, v := range b {
		if v != byte(r.Uint32()) {
			t.Fatalf("byte %d of the filled pool changed", i)
		}
	}
	if AdviseHugePages(nil) {
		t.Error("AdviseHugePages(nil) reports advice taken")
	}
}

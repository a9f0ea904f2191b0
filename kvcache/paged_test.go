package kvcache

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// tiny loads the random-weight tiny model (internal/tinymodel) on the CPU.
var tiny = tinymodel.Load

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestPagedSizedMatchesUnbounded feeds the same sequences through an unbounded Paged cache (one at a
// time) and a sized one (all in one batch, prefill chunks then decode
// steps): every logit row is bitwise equal, so the paged storage changes
// nothing and a sequence's rows do not depend on what it is batched with
// (the CPU matmul sums each row in a fixed order, see backend/cpu). At the
// end, removing the sequences frees every block.
func TestPagedSizedMatchesUnbounded(t *testing.T) {
	m, _, be := tiny(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, spec := range []string{"int4:kc32:v32:res32", "int2:kc32:v32:res32", "fp16:res32"} {
		sp := kv.MustParseSpec(spec)
		lens := []int{5, 70, 33, 96}
		prompts := make([][]int32, len(lens))
		for i, n := range lens {
			prompts[i] = randTokens(r, n, tinymodel.Vocab)
		}
		const chunk, steps = 32, 40
		// Reference: each sequence alone in an unbounded cache.
		want := make([][][]float32, len(prompts))
		for i, p := range prompts {
			c, err := NewPaged(be, m.Config(), sp, Options{})
			if err != nil {
				t.Fatal(err)
			}
			pos := 0
			var lg *model.Logits
			for pos < len(p) {
				end := min(len(p), pos+chunk)
				var b model.Batch
				b.Add(0, pos, p[pos:end]...)
				if lg, err = m.Forward(&b, c); err != nil {
					t.Fatal(err)
				}
				pos = end
			}
			want[i] = append(want[i], slices.Clone(lg.Row(0)))
			for s := 0; s < steps; s++ {
				var b model.Batch
				b.Add(0, pos, int32((s*7+i)%tinymodel.Vocab))
				if lg, err = m.Forward(&b, c); err != nil {
					t.Fatal(err)
				}
				pos++
				want[i] = append(want[i], slices.Clone(lg.Row(0)))
			}
		}
		pc, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 4, Blocks: 64})
		if err != nil {
			t.Fatal(err)
		}
		pos := make([]int, len(prompts))
		got := make([][][]float32, len(prompts))
		for round := 0; ; round++ {
			var b model.Batch
			var who []int
			for i, p := range prompts {
				switch {
				case pos[i] < len(p):
					end := min(len(p), pos[i]+chunk)
					b.Add(10+i, pos[i], p[pos[i]:end]...)
				case pos[i]-len(p) < steps:
					s := pos[i] - len(p)
					b.Add(10+i, pos[i], int32((s*7+i)%tinymodel.Vocab))
				default:
					continue
				}
				who = append(who, i)
			}
			if len(who) == 0 {
				break
			}
			lg, err := m.Forward(&b, pc)
			if err != nil {
				t.Fatal(err)
			}
			for row, i := range who {
				pos[i] += b.Seqs[row].Len
				if pos[i] >= len(prompts[i]) {
					got[i] = append(got[i], slices.Clone(lg.Row(row)))
				}
			}
		}
		for i := range prompts {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%s seq %d: %d rows, want %d", spec, i, len(got[i]), len(want[i]))
			}
			for s := range got[i] {
				if !sameBits(got[i][s], want[i][s]) {
					t.Fatalf("%s seq %d step %d: paged batched logits differ from the solo unbounded cache", spec, i, s)
				}
			}
		}
		if pc.FreeBlocks() == pc.TotalBlocks() {
			t.Errorf("%s: no block in use after %v tokens", spec, lens)
		}
		for i := range prompts {
			pc.Remove(10 + i)
		}
		if pc.FreeBlocks() != pc.TotalBlocks() || pc.Seqs() != 0 {
			t.Errorf("%s: %d of %d blocks free after removing all sequences", spec, pc.FreeBlocks(), pc.TotalBlocks())
		}
		if err := pc.Allocator().Check(); err != nil {
			t.Error(err)
		}
	}
}

// TestPagedPrefixSharing runs two prompts with a common prefix of three
// blocks: the second opens with the first's blocks shared (reference count
// 2, no new memory) and its logits are bitwise those of running it alone.
func TestPagedPrefixSharing(t *testing.T) {
	m, _, be := tiny(t)
	sp := kv.MustParseSpec("int4:kc32:v32:res32")
	r := rand.New(rand.NewPCG(5, 6))
	common := randTokens(r, 100, tinymodel.Vocab)
	a := append(slices.Clone(common), randTokens(r, 20, tinymodel.Vocab)...)
	bp := append(slices.Clone(common), randTokens(r, 30, tinymodel.Vocab)...)
	toInts := func(x []int32) []int {
		out := make([]int, len(x))
		for i, v := range x {
			out[i] = int(v)
		}
		return out
	}
	run := func(c *Paged, id int, p []int32, from int) []float32 {
		var lg *model.Logits
		var err error
		for pos := from; pos < len(p); pos += 64 {
			end := min(len(p), (pos/64+1)*64)
			var b model.Batch
			b.Add(id, pos, p[pos:end]...)
			if lg, err = m.Forward(&b, c); err != nil {
				t.Fatal(err)
			}
			pos = end - 64
		}
		return slices.Clone(lg.Row(0))
	}
	solo, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 2, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	want := run(solo, 1, bp, 0)

	c, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 2, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Open(1, toInts(a)); err != nil || n != 0 {
		t.Fatalf("open a: %d %v", n, err)
	}
	run(c, 1, a, 0)
	used := c.TotalBlocks() - c.FreeBlocks()
	n, err := c.Open(2, toInts(bp))
	if err != nil || n != 96 {
		t.Fatalf("open b: %d cached tokens (%v), want 96", n, err)
	}
	if u := c.TotalBlocks() - c.FreeBlocks(); u != used {
		t.Errorf("sharing took %d new blocks", u-used)
	}
	for i := 0; i < 3; i++ {
		if refs := c.Allocator().Refs(c.seqs[1].blocks[i]); refs != 2 {
			t.Errorf("shared block %d has %d references, want 2", i, refs)
		}
	}
	if got := run(c, 2, bp, n); !sameBits(got, want) {
		t.Error("logits with a shared prefix differ from the solo run")
	}
	c.Remove(1)
	c.Remove(2)
	if c.FreeBlocks() != c.TotalBlocks() || c.CachedBlocks() == 0 {
		t.Errorf("after removal: %d of %d free, %d cached", c.FreeBlocks(), c.TotalBlocks(), c.CachedBlocks())
	}
	if err := c.Allocator().Check(); err != nil {
		t.Error(err)
	}
	// A prompt that differs inside the first block shares nothing.
	d := slices.Clone(bp)
	d[5]++
	if n, _ := c.Open(3, toInts(d)); n != 0 {
		t.Errorf("prompt differing at token 5 shares %d tokens", n)
	}
}

// TestPagedOutOfBlocks checks that Begin refuses a batch that needs more
// blocks than are free with ErrOutOfBlocks, before changing anything, and
// that the accounting matches the bytes allocated.
func TestPagedOutOfBlocks(t *testing.T) {
	m, _, be := tiny(t)
	sp := kv.MustParseSpec("int4:kc32:v32:res32")
	c, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 2, Blocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := c.Format()
	wantBytes := int64(m.Config().Layers*m.Config().KVHeads) * (2*int64(f.BlockBytes()) + 2*int64(f.ResidualBytes()))
	if c.AllocatedBytes() != wantBytes {
		t.Errorf("allocated %d bytes, accounting says %d", c.AllocatedBytes(), wantBytes)
	}
	r := rand.New(rand.NewPCG(1, 1))
	var b model.Batch
	b.Add(1, 0, randTokens(r, 70, tinymodel.Vocab)...) // 2 blocks
	if _, err := m.Forward(&b, c); err != nil {
		t.Fatal(err)
	}
	var b2 model.Batch
	b2.Add(2, 0, randTokens(r, 40, tinymodel.Vocab)...) // 1 more block: none free
	_, err = m.Forward(&b2, c)
	if !errors.Is(err, ErrOutOfBlocks) {
		t.Fatalf("forward with no free block: %v", err)
	}
	if c.Len(2) != 0 || c.Seqs() != 1 || c.FreeBlocks() != 0 || c.Len(1) != 70 {
		t.Errorf("failed Begin changed the cache: len %d, seqs %d, free %d", c.Len(2), c.Seqs(), c.FreeBlocks())
	}
	// Truncate within the residual, and to a block boundary.
	if err := c.Truncate(1, 66); err != nil || c.Len(1) != 66 {
		t.Fatalf("truncate to 66: %v, len %d", err, c.Len(1))
	}
	if err := c.Truncate(1, 40); err == nil {
		t.Error("truncate into a packed block accepted")
	}
	if err := c.Truncate(1, 32); err != nil || c.Len(1) != 32 || c.FreeBlocks() != 1 {
		t.Errorf("truncate to 32: %v, len %d, free %d", err, c.Len(1), c.FreeBlocks())
	}
	if _, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 4, MemoryBytes: 1000}); err == nil {
		t.Error("a pool of 1000 bytes accepted")
	}
}

// TestPagedRandomOps drives a small PagedCache with random interleavings of
// Open (prompts drawn from a few shared prefixes), prefill chunks, decode
// steps, Truncate and Remove, through the tiny model. After every operation
// each block's reference count equals the number of block tables holding
// it, the free count is the rest, and the allocator's invariants hold;
// out-of-blocks batches fail without changing anything. At the end every
// block is free.
func TestPagedRandomOps(t *testing.T) {
	m, _, be := tiny(t)
	c, err := NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), Options{MaxSeqs: 6, Blocks: 11})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	prefixes := make([][]int, 3)
	for i := range prefixes {
		for range 64 + 32*i {
			prefixes[i] = append(prefixes[i], r.IntN(tinymodel.Vocab))
		}
	}
	type state struct{ prompt []int }
	live := map[int]*state{}
	nextID, shared, refused := 0, 0, 0
	check := func(op string) {
		t.Helper()
		if err := c.Allocator().Check(); err != nil {
			t.Fatalf("after %s: %v", op, err)
		}
		refs := map[int]int{}
		for _, s := range c.seqs {
			for _, b := range s.blocks {
				refs[b]++
			}
		}
		used := 0
		for id := 0; id < c.TotalBlocks(); id++ {
			if c.Allocator().Refs(id) != refs[id] {
				t.Fatalf("after %s: block %d has %d references, %d tables hold it", op, id, c.Allocator().Refs(id), refs[id])
			}
			if refs[id] > 0 {
				used++
			}
		}
		if c.FreeBlocks() != c.TotalBlocks()-used {
			t.Fatalf("after %s: %d free, %d used of %d", op, c.FreeBlocks(), used, c.TotalBlocks())
		}
	}
	forward := func(id int, toks []int) error {
		var b model.Batch
		ids := make([]int32, len(toks))
		for i, v := range toks {
			ids[i] = int32(v)
		}
		b.Add(id, c.Len(id), ids...)
		before := c.FreeBlocks()
		_, err := m.Forward(&b, c)
		if errors.Is(err, ErrOutOfBlocks) {
			refused++
		}
		if errors.Is(err, ErrOutOfBlocks) && c.FreeBlocks() != before {
			t.Fatalf("a refused batch changed the free count %d -> %d", before, c.FreeBlocks())
		}
		return err
	}
	pick := func() (int, bool) {
		if len(live) == 0 {
			return 0, false
		}
		ids := slices.Sorted(maps.Keys(live))
		return ids[r.IntN(len(ids))], true
	}
	for step := 0; step < 300; step++ {
		op := r.IntN(10)
		id, ok := pick()
		switch {
		case op < 2 && len(live) < c.MaxSeqs(): // open and prefill
			p := append(append([]int(nil), prefixes[r.IntN(len(prefixes))]...), r.IntN(tinymodel.Vocab), r.IntN(tinymodel.Vocab))
			nextID++
			cached, err := c.Open(nextID, p)
			if err != nil {
				t.Fatal(err)
			}
			if cached > 0 {
				shared++
			}
			live[nextID] = &state{prompt: p}
			if err := forward(nextID, p[cached:]); err != nil {
				if !errors.Is(err, ErrOutOfBlocks) {
					t.Fatal(err)
				}
				c.Remove(nextID)
				delete(live, nextID)
			}
			check("open")
		case op < 7 && ok: // a decode step or a chunk of up to 40 tokens
			toks := make([]int, 1)
			if op >= 4 {
				toks = make([]int, 1+r.IntN(40))
			}
			for i := range toks {
				toks[i] = r.IntN(tinymodel.Vocab)
			}
			if err := forward(id, toks); err != nil && !errors.Is(err, ErrOutOfBlocks) {
				t.Fatal(err)
			}
			check("decode")
		case op == 7 && ok: // truncate to a block boundary
			n := c.Len(id) / 32 * 32
			if n > 0 && r.IntN(2) == 0 {
				n -= 32
			}
			if err := c.Truncate(id, n); err != nil {
				t.Fatal(err)
			}
			check("truncate")
		case op >= 8 && ok: // remove
			c.Remove(id)
			delete(live, id)
			check("remove")
		}
	}
	for id := range live {
		c.Remove(id)
	}
	check("the end")
	t.Logf("%d opens with a shared prefix, %d batches refused for lack of blocks", shared, refused)
	if shared == 0 || refused == 0 {
		t.Errorf("the random run did not exercise sharing (%d) and running out of blocks (%d)", shared, refused)
	}
	if c.FreeBlocks() != c.TotalBlocks() || c.Seqs() != 0 {
		t.Fatalf("%d of %d blocks free at the end", c.FreeBlocks(), c.TotalBlocks())
	}
}

// TestPagedEvictsTailFirst: a finished sequence's blocks are freed last
// first, so a new allocation under pressure takes the tail of a cached
// prefix and its head stays findable.
func TestPagedEvictsTailFirst(t *testing.T) {
	m, _, be := tiny(t)
	sp := kv.MustParseSpec("int4:kc32:v32:res32")
	r := rand.New(rand.NewPCG(8, 9))
	p := randTokens(r, 100, tinymodel.Vocab) // 3 full blocks, then 4 tokens
	ids := make([]int, len(p))
	for i, v := range p {
		ids[i] = int(v)
	}
	c, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 2, Blocks: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(1, ids); err != nil {
		t.Fatal(err)
	}
	var b model.Batch
	b.Add(1, 0, p...)
	if _, err := m.Forward(&b, c); err != nil {
		t.Fatal(err)
	}
	other := randTokens(r, 40, tinymodel.Vocab)
	if _, err := c.Open(2, make([]int, len(other))); err != nil { // registers 1's blocks
		t.Fatal(err)
	}
	c.Remove(1)
	// A sequence that needs one block takes the first freed: the prefix's
	// last block.
	var b2 model.Batch
	b2.Add(2, 0, other...)
	if _, err := m.Forward(&b2, c); err != nil {
		t.Fatal(err)
	}
	c.Remove(2)
	n, err := c.Open(3, ids)
	if err != nil {
		t.Fatal(err)
	}
	if n != 64 {
		t.Errorf("after one block was reused, %d tokens of the prefix are still cached, want its first 2 blocks (64)", n)
	}
}

// TestPagedRemoveAfterLastChunk checks that a sequence removed right after
// the batch that filled its blocks (a request that ends with its prompt,
// max_tokens 1) leaves them findable, and that a batch that stopped before
// its last layer leaves nothing findable.
func TestPagedRemoveAfterLastChunk(t *testing.T) {
	m, _, be := tiny(t)
	sp := kv.MustParseSpec("int4:kc32:v32:res32")
	r := rand.New(rand.NewPCG(7, 8))
	prompt := randTokens(r, 96, tinymodel.Vocab)
	ids := make([]int, len(prompt))
	for i, v := range prompt {
		ids[i] = int(v)
	}
	c, err := NewPaged(be, m.Config(), sp, Options{MaxSeqs: 2, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	var b model.Batch
	b.Add(1, 0, prompt...)
	if _, err := m.Forward(&b, c); err != nil {
		t.Fatal(err)
	}
	c.Remove(1) // no Begin or Open in between
	if n, err := c.Open(2, append(ids, 1, 2, 3)); err != nil || n != 96 {
		t.Fatalf("open after removal: %d cached tokens (%v), want 96", n, err)
	}
	c.Remove(2)

	// A batch that fails part way: its blocks were never fully written.
	other := randTokens(r, 96, tinymodel.Vocab)
	oids := make([]int, len(other))
	for i, v := range other {
		oids[i] = int(v)
	}
	var fb model.Batch
	fb.Add(3, 0, other...)
	if _, err := m.Forward(&fb, failAt{c, 1}); err == nil {
		t.Fatal("the failing attention did not fail")
	}
	c.Remove(3)
	if n, err := c.Open(4, append(oids, 1, 2, 3)); err != nil || n != 0 {
		t.Fatalf("open after a failed batch: %d cached tokens (%v), want 0", n, err)
	}
	c.Remove(4)
	if err := c.Allocator().Check(); err != nil {
		t.Error(err)
	}
}

// failAt is a cache whose Attend fails at one layer.
type failAt struct {
	*Paged
	layer int
}

func (f failAt) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer == f.layer {
		return errors.New("attention failed on purpose")
	}
	return f.Paged.Attend(layer, b, q, k, v, out)
}

package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// PrefixKey identifies the content of one completely packed KV block: a
// SHA-256 chained over the token ids of every block from the start of the
// sequence up to and including this one. Two blocks have the same key only
// if their sequences agree on every token up to the block's end, so shared
// blocks never mix tokens of different prompts.
type PrefixKey [sha256.Size]byte

// NextPrefixKey returns the key of the block holding tokens after the block
// whose key is parent (the zero key for the first block).
func NextPrefixKey(parent PrefixKey, tokens []int) PrefixKey {
	h := sha256.New()
	h.Write(parent[:])
	var buf [4]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(buf[:], uint32(t))
		h.Write(buf[:])
	}
	var k PrefixKey
	h.Sum(k[:0])
	return k
}

// noBlock marks the end of the free list.
const noBlock = -1

// BlockAllocator hands out the fixed-size blocks of a paged KV cache by
// index and counts references to them. A block with no reference is free.
// A free block that holds a registered prefix stays findable by its key
// until it is handed out again (least recently freed first), so a prompt
// that repeats a recent prefix reuses its blocks without recomputing them.
//
// The free blocks form a doubly linked list in the order they were freed;
// Alloc takes from the front, Lookup can take a block out of the middle.
// A BlockAllocator is not safe for concurrent use.
type BlockAllocator struct {
	ref        []int32 // references per block; 0: free
	prev, next []int32 // free list links (noBlock at the ends)
	head, tail int32
	nfree      int
	key        []PrefixKey // registered key of each block
	keyed      []bool
	byKey      map[PrefixKey]int32
}

// NewBlockAllocator returns an allocator of n free blocks.
func NewBlockAllocator(n int) *BlockAllocator {
	a := &BlockAllocator{
		ref: make([]int32, n), prev: make([]int32, n), next: make([]int32, n),
		head: noBlock, tail: noBlock,
		key: make([]PrefixKey, n), keyed: make([]bool, n), byKey: map[PrefixKey]int32{},
	}
	for i := range n {
		a.pushBack(int32(i))
	}
	return a
}

// Total returns the number of blocks.
func (a *BlockAllocator) Total() int { return len(a.ref) }

// Free returns the number of blocks without references (cached prefixes
// included: they are reclaimed on demand).
func (a *BlockAllocator) Free() int { return a.nfree }

// Used returns the number of blocks with at least one reference.
func (a *BlockAllocator) Used() int { return len(a.ref) - a.nfree }

// Cached returns the number of free blocks still findable by prefix key.
func (a *BlockAllocator) Cached() int {
	n := 0
	for i := a.head; i != noBlock; i = a.next[i] {
		if a.keyed[i] {
			n++
		}
	}
	return n
}

// Refs returns the reference count of block id (0 for an invalid id).
func (a *BlockAllocator) Refs(id int) int {
	if id < 0 || id >= len(a.ref) {
		return 0
	}
	return int(a.ref[id])
}

// Alloc returns n blocks, each with one reference, or an error wrapping
// ErrOutOfBlocks and no blocks when fewer than n are free.
func (a *BlockAllocator) Alloc(n int) ([]int, error) {
	if n < 0 {
		return nil, fmt.Errorf("kvcache: alloc %d blocks", n)
	}
	if n > a.nfree {
		return nil, fmt.Errorf("%w: need %d, %d of %d free", ErrOutOfBlocks, n, a.nfree, len(a.ref))
	}
	ids := make([]int, n)
	for i := range ids {
		id := a.head
		a.unlink(id)
		a.forget(id)
		a.ref[id] = 1
		ids[i] = int(id)
	}
	return ids, nil
}

// Retain adds a reference to the used block id.
func (a *BlockAllocator) Retain(id int) error {
	if id < 0 || id >= len(a.ref) || a.ref[id] == 0 {
		return fmt.Errorf("kvcache: retain of block %d, which is not in use", id)
	}
	a.ref[id]++
	return nil
}

// Release drops a reference to block id; the last one frees it. Releasing
// a free block is an error (a double free) and changes nothing.
func (a *BlockAllocator) Release(id int) error {
	if id < 0 || id >= len(a.ref) {
		return fmt.Errorf("kvcache: release of block %d outside [0, %d)", id, len(a.ref))
	}
	if a.ref[id] == 0 {
		return fmt.Errorf("kvcache: double free of block %d", id)
	}
	a.ref[id]--
	if a.ref[id] == 0 {
		a.pushBack(int32(id))
	}
	return nil
}

// Register makes the used block id findable by key. If another block
// already holds key, the first one stays (the content is the same) and
// Register does nothing.
func (a *BlockAllocator) Register(id int, key PrefixKey) error {
	if id < 0 || id >= len(a.ref) || a.ref[id] == 0 {
		return fmt.Errorf("kvcache: register of block %d, which is not in use", id)
	}
	if _, ok := a.byKey[key]; ok || a.keyed[id] {
		return nil
	}
	a.key[id], a.keyed[id] = key, true
	a.byKey[key] = int32(id)
	return nil
}

// Lookup returns the block registered under key with a new reference
// (taking it off the free list if it had none), or false.
func (a *BlockAllocator) Lookup(key PrefixKey) (int, bool) {
	id, ok := a.byKey[key]
	if !ok {
		return 0, false
	}
	if a.ref[id] == 0 {
		a.unlink(id)
	}
	a.ref[id]++
	return int(id), true
}

// Check verifies the allocator's invariants: the free list holds exactly
// the blocks without references, once each, and the key index agrees with
// the blocks' keys. Tests call it after every operation.
func (a *BlockAllocator) Check() error {
	seen := make([]bool, len(a.ref))
	n := 0
	prev := int32(noBlock)
	for i := a.head; i != noBlock; i = a.next[i] {
		if i < 0 || int(i) >= len(a.ref) {
			return fmt.Errorf("kvcache: free list holds block %d", i)
		}
		if seen[i] {
			return fmt.Errorf("kvcache: block %d twice in the free list", i)
		}
		if a.prev[i] != prev {
			return fmt.Errorf("kvcache: block %d: prev link %d, want %d", i, a.prev[i], prev)
		}
		if a.ref[i] != 0 {
			return fmt.Errorf("kvcache: free block %d has %d references", i, a.ref[i])
		}
		seen[i], prev = true, i
		n++
	}
	if prev != a.tail || n != a.nfree {
		return fmt.Errorf("kvcache: free list of %d blocks ending at %d; counted %d ending at %d", a.nfree, a.tail, n, prev)
	}
	for i, r := range a.ref {
		if r < 0 || (r == 0) != seen[i] {
			return fmt.Errorf("kvcache: block %d has %d references but free-list membership %v", i, r, seen[i])
		}
	}
	for k, id := range a.byKey {
		if !a.keyed[id] || a.key[id] != k {
			return fmt.Errorf("kvcache: key index points to block %d, which holds another key", id)
		}
	}
	keyed := 0
	for _, k := range a.keyed {
		if k {
			keyed++
		}
	}
	if keyed != len(a.byKey) {
		return fmt.Errorf("kvcache: %d keyed blocks, %d keys indexed", keyed, len(a.byKey))
	}
	return nil
}

// forget drops block id's key, as it is about to hold other tokens.
func (a *BlockAllocator) forget(id int32) {
	if a.keyed[id] {
		delete(a.byKey, a.key[id])
		a.keyed[id] = false
	}
}

func (a *BlockAllocator) pushBack(id int32) {
	a.prev[id], a.next[id] = a.tail, noBlock
	if a.tail == noBlock {
		a.head = id
	} else {
		a.next[a.tail] = id
	}
	a.tail = id
	a.nfree++
}

func (a *BlockAllocator) unlink(id int32) {
	p, n := a.prev[id], a.next[id]
	if p == noBlock {
		a.head = n
	} else {
		a.next[p] = n
	}
	if n == noBlock {
		a.tail = p
	} else {
		a.prev[n] = p
	}
	a.prev[id], a.next[id] = noBlock, noBlock
	a.nfree--
}

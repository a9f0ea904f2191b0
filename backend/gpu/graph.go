package gpu

import (
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// CUDA graph replay of the op queue.
//
// A decode step queues the same ops with the same arguments step after
// step: only the contents of a few buffers (token ids, positions, the KV
// cache's tables) change, and those are uploaded before the step's ops run.
// Each queued op carries a key of every value its launches depend on; a
// flush whose ops and keys equal an earlier flush's launches the same
// kernels with the same arguments. The first time a sequence of keys is
// seen it runs directly; the second time it is captured into a CUDA graph
// (and run by replaying it); from then on the graph is replayed: one launch
// instead of hundreds, and no gaps between kernels on the GPU.
const (
	// graphMinOps is the shortest flush worth a graph.
	graphMinOps = 16
	// graphMaxEntries bounds the remembered key sequences; beyond it the
	// cache is emptied (a new workload).
	graphMaxEntries = 64
)

// graphCache remembers flushes by their key sequence.
type graphCache struct {
	disabled bool
	seed     maphash.Seed
	entries  map[uint64]*graphEntry
	buf      []byte // the key sequence's bytes, reused for hashing
}

// graphEntry is one key sequence: how often it ran, and its graph once
// captured.
type graphEntry struct {
	keys  []uint64
	seen  int
	graph *cuda.Graph
	bad   bool // capture failed: always run directly
}

// newGraphCache returns an empty cache; disabled runs every flush directly
// (Options.NoGraphs).
func newGraphCache(disabled bool) *graphCache {
	return &graphCache{disabled: disabled, seed: maphash.MakeSeed(), entries: map[uint64]*graphEntry{}}
}

// flatKey returns the flush's key sequence (op names hashed, each op's key
// length-prefixed), or nil if an op has no key.
func (g *graphCache) flatKey(ops []queuedOp) []uint64 {
	var flat []uint64
	for _, q := range ops {
		if q.key == nil {
			return nil
		}
		flat = append(flat, maphash.String(g.seed, q.op), uint64(len(q.key)))
		flat = append(flat, q.key...)
	}
	return flat
}

// run runs ops as a graph replay (capturing it first if this is the second
// time their keys are seen) and reports whether it did; false means the
// caller runs them directly. It runs on the owner thread.
func (g *graphCache) run(c *cuda.Ctx, s cuda.Stream, ops []queuedOp) bool {
	if g == nil || g.disabled || len(ops) < graphMinOps {
		return false
	}
	flat := g.flatKey(ops)
	if flat == nil {
		return false
	}
	g.buf = g.buf[:0]
	for _, v := range flat {
		g.buf = binary.LittleEndian.AppendUint64(g.buf, v)
	}
	sum := maphash.Bytes(g.seed, g.buf)
	e := g.entries[sum]
	if e == nil || !slices.Equal(e.keys, flat) {
		if len(g.entries) >= graphMaxEntries {
			g.reset(c)
		}
		g.entries[sum] = &graphEntry{keys: flat, seen: 1}
		return false
	}
	if e.bad {
		return false
	}
	if e.graph == nil {
		e.seen++
		if err := c.BeginCapture(s); err != nil {
			e.bad = true
			return false
		}
		var opErr error
		for _, q := range ops {
			if opErr = q.f(c); opErr != nil {
				break
			}
		}
		graph, err := c.EndCapture(s)
		if err == nil && opErr != nil {
			_ = c.DestroyGraph(graph) // a partial step: run directly to report the error
			err = opErr
		}
		if err != nil {
			// The ops did not run (capture only records them): run them
			// directly, and never try to capture this sequence again.
			e.bad = true
			return false
		}
		e.graph = graph
	}
	if err := c.LaunchGraph(e.graph, s); err != nil {
		e.bad = true
		return false
	}
	return true
}

// reset destroys every graph and forgets every key sequence.
func (g *graphCache) reset(c *cuda.Ctx) {
	for _, e := range g.entries {
		if e.graph != nil {
			_ = c.DestroyGraph(e.graph)
		}
	}
	clear(g.entries)
}

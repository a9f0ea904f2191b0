package gpu

import (
	"encoding/binary"
	"fmt"
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
// instead of hundreds, and no gaps between kernels on the GPU. A step's
// ops come in flushes of segmentOps (gpu.go), each its own key sequence and
// graph, so the GPU replays the step's first graph while the host queues
// the next.
const (
	// graphMinOps is the shortest flush worth a graph.
	graphMinOps = 16
	// graphMaxEntries bounds the remembered key sequences; beyond it the
	// cache is emptied (a new workload). An 8B model's decode step is
	// about 13 sequences (segments); serving adds one step per batch
	// bucket and cache.
	graphMaxEntries = 512
)

// graphCache remembers flushes by their key sequence.
type graphCache struct {
	disabled bool
	seed     maphash.Seed
	entries  map[uint64]*graphEntry
	flat     []uint64 // the flush's key sequence, reused
	buf      []byte   // the key sequence's bytes, reused for hashing
	stats    GraphStats
}

// GraphStats counts the op queue's flushes by how they ran.
type GraphStats struct {
	Direct   int // ran op by op (first sight, too short, an op without a key, graphs off)
	Captured int // captured into a graph (second sight) and launched
	Replayed int // replayed from an earlier capture
	// LastDirect says why the latest direct flush ran op by op ("first
	// sight", "short: 5 ops from Embedding to Argmax", "no key: OP",
	// "graphs off", "capture failed"), for benchmarks that look for a
	// step's flushes outside graphs.
	LastDirect string `json:",omitempty"`
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
// length-prefixed), or nil if an op has no key. The slice is g's, valid
// until the next call.
func (g *graphCache) flatKey(ops []queuedOp) []uint64 {
	flat := g.flat[:0]
	defer func() { g.flat = flat[:0] }()
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
	if g == nil {
		return false
	}
	ran, why := g.replay(c, s, ops)
	switch {
	case ran == graphReplayed:
		g.stats.Replayed++
	case ran == graphCaptured:
		g.stats.Captured++
	case len(ops) > 0:
		g.stats.Direct++
		g.stats.LastDirect = why
	}
	return ran != graphNone
}

// How graphCache.replay ran a flush.
const (
	graphNone     = iota // not at all: the caller runs the ops directly
	graphCaptured        // captured, then launched
	graphReplayed        // launched from an earlier capture
)

// replay is run's work: it returns graphNone when the caller must run the
// ops directly, with the reason (GraphStats.LastDirect).
func (g *graphCache) replay(c *cuda.Ctx, s cuda.Stream, ops []queuedOp) (int, string) {
	switch {
	case g.disabled:
		return graphNone, "graphs off"
	case len(ops) < graphMinOps:
		if len(ops) == 0 {
			return graphNone, ""
		}
		return graphNone, fmt.Sprintf("short: %d ops from %s to %s", len(ops), ops[0].op, ops[len(ops)-1].op)
	}
	flat := g.flatKey(ops)
	if flat == nil {
		return graphNone, "no key: " + ops[slices.IndexFunc(ops, func(q queuedOp) bool { return q.key == nil })].op
	}
	sum := g.sum(flat)
	e := g.entries[sum]
	if e == nil || !slices.Equal(e.keys, flat) {
		if len(g.entries) >= graphMaxEntries {
			g.reset(c)
		}
		g.entries[sum] = &graphEntry{keys: slices.Clone(flat), seen: 1}
		return graphNone, "first sight"
	}
	if e.bad {
		return graphNone, "capture failed"
	}
	ran := graphReplayed
	if e.graph == nil {
		e.seen++
		if err := c.BeginCapture(s); err != nil {
			e.bad = true
			return graphNone, "capture failed"
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
			return graphNone, "capture failed"
		}
		e.graph = graph
		ran = graphCaptured
	}
	if err := c.LaunchGraph(e.graph, s); err != nil {
		e.bad = true
		return graphNone, "capture failed"
	}
	return ran, ""
}

// sum hashes a key sequence (flatKey's) for the entries map.
func (g *graphCache) sum(flat []uint64) uint64 {
	g.buf = g.buf[:0]
	for _, v := range flat {
		g.buf = binary.LittleEndian.AppendUint64(g.buf, v)
	}
	return maphash.Bytes(g.seed, g.buf)
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

// GraphStats returns how the op queue's flushes have run since Open, for
// tests and benchmarks that check that decode steps replay CUDA graphs.
// Ops still queued are not counted.
func (b *Backend) GraphStats() GraphStats {
	var st GraphStats
	_ = b.dev.Do(func(*cuda.Ctx) error { st = b.graphs.stats; return nil })
	return st
}

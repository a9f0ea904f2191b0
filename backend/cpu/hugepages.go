package cpu

// Matrix weights in huge pages. A decode step streams every weight matrix
// once, and on Linux the weights of a mapped checkpoint sit in the page
// cache's 4 KiB pages: a TLB miss every 4 KiB, and the hardware prefetchers
// stop at each page's end. So a matrix that would be used in place (a view
// of a mapped checkpoint: LoadWeightView, LoadInt8WeightView's codes) is
// instead copied, byte for byte, into anonymous memory advised for 2 MiB
// transparent huge pages (chunks of internal/hugepage.Map). The kernels
// read the same bytes, so every output keeps its bits; only the speed
// differs: gocoder-23m's decode runs ~10% faster on the 2-core Zen 4 VM, an
// 8 MiB matrix's GEMV from memory ~20-35% (docs/perf/cpu-linear.md v2.16).
// The cost is the copy at load (gocoder-23m's 44 MiB in ~10 ms) and the
// resident copy beside the page cache's. EnvHugePages=off keeps the views
// in place, as do other systems and kernels without transparent huge pages
// (off in /sys/kernel/mm/transparent_hugepage/enabled, or the advice
// refused): there a copy would buy nothing.

import (
	"fmt"
	"sync"

	"github.com/bitdecode/bitdecode/internal/hugepage"
)

// EnvHugePages names the environment variable that says whether matrix
// weights are copied into huge pages: "on" (the default) or "off".
const EnvHugePages = "BITDECODE_CPU_HUGE_PAGES"

// hugePagesOn is whether weights loaded now are copied into huge pages
// (configure sets it from EnvHugePages; tests set it directly).
var hugePagesOn = true

// hugeChunkMin is the smallest chunk the arena maps: weights of a model
// share chunks, and memory never touched costs only address space.
const hugeChunkMin = 64 << 20

// hugeAlign is the alignment of each weight in a chunk: a cache line, as
// the tiles' loads expect of a row start where K allows.
const hugeAlign = 64

// parseHugePages reads EnvHugePages's value (ok: the variable is set).
func parseHugePages(v string, ok bool) (bool, error) {
	switch {
	case !ok || v == "" || v == "on":
		return true, nil
	case v == "off":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want on or off", EnvHugePages, v)
}

// hugeArena hands out weight memory from huge-page chunks, in load order.
type hugeArena struct {
	mu  sync.Mutex
	cur *hugeChunk // the chunk being filled
}

// hugeChunk is one mapping of the arena. It is unmapped once every weight
// copied into it is freed and the arena has moved on to another chunk.
type hugeChunk struct {
	arena   *hugeArena
	mapping []byte // what to unmap
	rest    []byte // the aligned part not yet handed out
	refs    int    // weights in the chunk not yet freed
}

// copyIn returns a copy of data in huge-page memory and the chunk that
// holds it (release it when the weight is freed), or data itself and nil
// where huge pages are off or cannot be had.
func (a *hugeArena) copyIn(data []byte) ([]byte, *hugeChunk) {
	if !hugePagesOn || len(data) == 0 {
		return data, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := (len(data) + hugeAlign - 1) &^ (hugeAlign - 1)
	if a.cur == nil || len(a.cur.rest) < n {
		mapping, aligned, ok := hugepage.Map(max(hugeChunkMin, (n+hugepage.Size-1)&^(hugepage.Size-1)))
		if !ok {
			return data, nil
		}
		if old := a.cur; old != nil && old.refs == 0 {
			old.unmap()
		}
		a.cur = &hugeChunk{arena: a, mapping: mapping, rest: aligned}
	}
	c := a.cur
	out := c.rest[:len(data):len(data)]
	c.rest = c.rest[n:]
	c.refs++
	copy(out, data)
	return out, c
}

// release drops one weight's hold on c.
func (c *hugeChunk) release() {
	a := c.arena
	a.mu.Lock()
	defer a.mu.Unlock()
	c.refs--
	if c.refs == 0 && a.cur != c {
		c.unmap()
	}
}

// unmap returns c's memory (under its arena's lock).
func (c *hugeChunk) unmap() {
	hugepage.Unmap(c.mapping)
	c.mapping, c.rest = nil, nil
}

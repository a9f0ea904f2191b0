// download.go: a large float32 Download (the logits of a max-batch decode
// step: 55 rows x 128256 x 4 bytes = 28 MB at int4 55 x 32K, 51 MB at
// int2's 100 rows) through a ring of two page-locked chunks instead of
// one pageable copy. Into Go memory the driver stages a copy through its
// own pinned buffer and copies out on one thread, after the step's last
// kernel and before the host can start the next step; here chunk i+1
// crosses PCIe while several goroutines copy chunk i out of its pinned
// slot into the caller's slice (docs/perf/decode-step.md v22). The bytes
// are the same; only how they travel changes. On by default (8 MiB
// chunks); BITDECODE_DOWNLOAD_CHUNK=0 goes back to the pageable copy.

package gpu

import (
	"cmp"
	"fmt"
	"runtime"
	"sync"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

const (
	// downloadMinBytes is the smallest Download that takes the pinned
	// ring: below it (the B = 1 step's 501 KiB of logits) v8b measured no
	// gain (decode-step.md v8b).
	downloadMinBytes = 4 << 20
	// downloadMaxCopiers bounds the goroutines that copy a chunk out of
	// its pinned slot.
	downloadMaxCopiers = 8
	// downloadCopierBytes is the least a copier goroutine is given.
	downloadCopierBytes = 256 << 10
	// defaultDownloadChunkKiB is Options.DownloadChunkKiB's default
	// (decode-step.md v22): fewer, larger chunks were faster in both
	// calls, ~45 us a chunk of waits and goroutine wake-ups. At int4 55 x
	// 32K 1 MiB chunks read 32.27 ms a step, 4 MiB 31.33-31.59, 8 MiB
	// 31.08 (4 chunks; one run), the pageable copy 31.41-31.85.
	defaultDownloadChunkKiB = 8192
)

// pinnedRing is Download's two page-locked chunk slots and the events
// that say when each slot's copy from the device has landed; touched only
// inside Download's Do (the owner thread), built at the first large
// Download and freed at Close.
type pinnedRing struct {
	chunk int
	slot  [2]*cuda.HostBuffer
	ev    [2]cuda.Event
}

// downloadChunk returns the ring's chunk size in bytes for a Download of
// n bytes, or 0 where the copy goes straight into pageable memory.
func (b *Backend) downloadChunk(n int) int {
	kib := cmp.Or(b.opts.DownloadChunkKiB, defaultDownloadChunkKiB)
	if kib < 0 || n < downloadMinBytes || b.group != nil {
		return 0
	}
	return kib << 10
}

// downloadPinned copies n = len(dst) bytes at src into dst through the
// ring (chunk bytes a slot): it queues chunk i+1's copy on the stream
// before it copies chunk i out, so the two overlap. It ends with the
// stream synchronized, as Download's pageable path does.
func (b *Backend) downloadPinned(c *cuda.Ctx, dst []byte, src cuda.DevicePtr, chunk int) error {
	r, err := b.ring(c, chunk)
	if err != nil {
		return err
	}
	n := len(dst)
	chunks := (n + chunk - 1) / chunk
	span := func(i int) (int, int) { return i * chunk, min(n, (i+1)*chunk) }
	queue := func(i int) error {
		lo, hi := span(i)
		if err := c.DtoHAsync(r.slot[i%2].Bytes()[:hi-lo], src+cuda.DevicePtr(lo), b.stream); err != nil {
			return err
		}
		return c.Record(r.ev[i%2], b.stream)
	}
	if err := queue(0); err != nil {
		return err
	}
	for i := range chunks {
		// Chunk i+1 goes to the other slot, whose chunk i-1 was copied
		// out in the previous iteration.
		if i+1 < chunks {
			if err := queue(i + 1); err != nil {
				return err
			}
		}
		if err := c.SyncEvent(r.ev[i%2]); err != nil {
			return err
		}
		lo, hi := span(i)
		parallelCopy(dst[lo:hi], r.slot[i%2].Bytes()[:hi-lo])
	}
	return b.syncStream(c)
}

// ring returns the backend's pinned ring with chunk-byte slots, building
// (or rebuilding at another chunk size) it on first use.
func (b *Backend) ring(c *cuda.Ctx, chunk int) (*pinnedRing, error) {
	if r := b.dlRing; r != nil && r.chunk == chunk {
		return r, nil
	}
	if err := b.freeRing(c); err != nil {
		return nil, err
	}
	r := &pinnedRing{chunk: chunk}
	for i := range r.slot {
		h, err := c.AllocHost(chunk, false)
		if err != nil {
			b.dlRing = r
			b.freeRing(c)
			return nil, fmt.Errorf("download ring: %w", err)
		}
		r.slot[i] = h
		if r.ev[i], err = c.NewEvent(); err != nil {
			b.dlRing = r
			b.freeRing(c)
			return nil, fmt.Errorf("download ring: %w", err)
		}
	}
	b.dlRing = r
	return r, nil
}

// freeRing frees the pinned ring, if any (on the owner thread).
func (b *Backend) freeRing(c *cuda.Ctx) error {
	r := b.dlRing
	if r == nil {
		return nil
	}
	b.dlRing = nil
	var first error
	for i := range r.slot {
		if err := c.FreeHost(r.slot[i]); err != nil && first == nil {
			first = err
		}
		if r.ev[i] != 0 {
			if err := c.DestroyEvent(r.ev[i]); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// parallelCopy copies src into dst (the same length) with up to
// downloadMaxCopiers goroutines of at least downloadCopierBytes each.
func parallelCopy(dst, src []byte) {
	n := len(src)
	g := min(downloadMaxCopiers, runtime.GOMAXPROCS(0), max(1, n/downloadCopierBytes))
	if g <= 1 {
		copy(dst, src)
		return
	}
	per := (n + g - 1) / g
	per = (per + 63) &^ 63 // whole cache lines a goroutine
	var wg sync.WaitGroup
	for lo := per; lo < n; lo += per {
		hi := min(n, lo+per)
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	copy(dst[:min(n, per)], src[:min(n, per)])
	wg.Wait()
}

// planes_timeline.go: the launch timeline of planes.cu's split_mma
// (session 14), decode_mma's instrument (decode_timeline.go) on the
// bit-plane kernel: with PlanesTuning.Timeline split_mma is compiled with
// -DBD_TIMELINE=1 and every CTA writes the GPU's nanosecond timer at its
// entry and at the end of each phase (decode_timeline.go's words: a warp's
// prologue is its pipeline filled and query made, its loop its tiles done;
// no per-warp first tile), and the stamp kernel just before each launch
// gives the time the kernel ahead ended. PlanesPlan.Timeline reads the
// last launches back as TimelineLaunch records for SummarizeTimeline.

package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// loadTimeline takes the stamp kernel from mod and allocates the plan's
// timeline regions (zeroed: a phase a CTA never reached reads 0).
func (p *PlanesPlan) loadTimeline(mod *cuda.Module) error {
	var err error
	if p.stamp, err = mod.Function(timelineStampExpr); err != nil {
		return err
	}
	n := timelineLaunches * p.timelineRegionWords()
	if p.tl, err = p.dev.Alloc(n * 8); err != nil {
		return err
	}
	return p.dev.Do(func(c *cuda.Ctx) error { return c.Memset32(p.tl, 0, 2*n) })
}

// timelineRegionWords is the words of one launch's region at the plan's
// largest grid (every launch's region has that size).
func (p *PlanesPlan) timelineRegionWords() int {
	s := p.shape
	return timelineHead + timelineWords*p.maxSplits*s.Hkv*p.rowChunks*s.B
}

// timelineRegion queues the stamp kernel into the next launch's region and
// returns the region, split_mma's extra argument.
func (p *PlanesPlan) timelineRegion(c *cuda.Ctx, st cuda.Stream) (cuda.DevicePtr, error) {
	region := p.tl + cuda.DevicePtr(8*(p.tlNext%timelineLaunches)*p.timelineRegionWords())
	p.tlNext++
	return region, c.Launch(p.stamp, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, st, region)
}

// Timeline returns the records of the plan's last launches (at most
// timelineLaunches, oldest first), which must have had the plan's shape;
// nil without PlanesTuning.Timeline. Item is the (KV head, row chunk).
func (p *PlanesPlan) Timeline() ([]TimelineLaunch, error) {
	if p.tl == 0 {
		return nil, nil
	}
	s := p.shape
	items := s.Hkv * p.rowChunks
	ctas := p.maxSplits * items * s.B
	words := p.timelineRegionWords()
	raw := make([]byte, timelineLaunches*words*8)
	if err := p.dev.Do(func(c *cuda.Ctx) error {
		if err := c.Synchronize(); err != nil {
			return err
		}
		return c.DtoH(raw, p.tl)
	}); err != nil {
		return nil, fmt.Errorf("kernels: planes timeline: %w", err)
	}
	n := min(p.tlNext, timelineLaunches)
	var out []TimelineLaunch
	for k := p.tlNext - n; k < p.tlNext; k++ {
		reg := raw[8*(k%timelineLaunches)*words:]
		w := func(i int) uint64 { return binary.LittleEndian.Uint64(reg[8*i:]) }
		l := TimelineLaunch{Stamp: w(0)}
		for i := range ctas {
			base := timelineHead + i*timelineWords
			info := w(base + tlInfo)
			if info == ^uint64(0) || w(base+tlEntry) == 0 {
				continue // no positions, or never written
			}
			r := TimelineCTA{Split: i % p.maxSplits, Item: i / p.maxSplits % items, Seq: i / (p.maxSplits * items),
				SM: int(info & 0xffff), Tiles: int(info >> 16 & 0xffffff), PerWarp: int(info >> 40 & 0xffffff),
				Entry: w(base + tlEntry), WarpsDone: w(base + tlWarpsDone), Partial: w(base + tlPartial),
				Arrived: w(base + tlArrived), Exit: w(base + tlExit), Last: w(base+tlLast) != 0}
			for wi := range tlWarps {
				r.Prologue[wi], r.Loop[wi] = w(base+tlPrologue+wi), w(base+tlLoop+wi)
			}
			l.CTAs = append(l.CTAs, r)
		}
		out = append(out, l)
	}
	return out, nil
}

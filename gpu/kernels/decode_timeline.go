// decode_timeline.go: the launch timeline of decode_mma.cu (session 19)
// and of planes.cu's split_mma (session 14): where one launch's time goes,
// CTA by CTA. With DecodeTuning.Timeline (PlanesTuning.Timeline) the
// kernel is compiled with -DBD_TIMELINE=1 and every CTA writes the GPU's
// nanosecond timer (%globaltimer, one clock for all SMs) at its entry and
// at the end of each phase; a one-thread stamp kernel just before the
// launch gives the time the kernel ahead ended. A plan's launchTimeline
// holds the regions and reads the last launches back (DecodePlan.Timeline,
// PlanesPlan.Timeline); SummarizeTimeline prints the distribution of each
// phase.

package kernels

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// Timeline layout, kept equal to bitdecode.cuh's kTL* constants (and
// decode_mma.cu's kTLFirst; TestHeaderConstantsMatchGo checks them): a
// launch's region is timelineHead words (word 0 the stamp) and
// timelineWords 64-bit words per CTA, in blockIdx order (x fastest).
const (
	timelineHead     = 8
	timelineWords    = 24
	timelineLaunches = 8 // regions, the launches they hold cycle through them
	tlEntry          = 0
	tlInfo           = 1
	tlPrologue       = 2 // + warp
	tlFirst          = 6 // + warp; decode_mma only (split_mma's read 0)
	tlLoop           = 10
	tlWarpsDone      = 14
	tlPartial        = 15
	tlArrived        = 16
	tlExit           = 17
	tlLast           = 18
	tlWarps          = 4 // decode_mma.cu's and planes.cu's kWarps
)

// timelineDefine and timelineStampExpr are the NVRTC option and the stamp
// kernel's name expression of a timeline build.
const (
	timelineDefine    = "-DBD_TIMELINE=1"
	timelineStampExpr = "decode_timeline_stamp"
)

// launchTimeline is a plan's launch timeline: timelineLaunches regions of
// the plan's largest split grid, the next one next % timelineLaunches,
// each written by the stamp kernel and the split kernel. buf is 0 without
// the timeline.
type launchTimeline struct {
	buf   cuda.DevicePtr
	stamp cuda.Function
	next  int
	// grid is the plan's largest split grid: splits, KV heads x row
	// chunks, sequences (every launch's region has its size).
	grid cuda.Dim3
}

// load takes the stamp kernel from mod and allocates the regions for split
// grids of at most grid (zeroed: a phase a CTA never reached, or a word its
// kernel never writes, reads 0).
func (t *launchTimeline) load(dev *cuda.Device, mod *cuda.Module, grid cuda.Dim3) error {
	var err error
	if t.stamp, err = mod.Function(timelineStampExpr); err != nil {
		return err
	}
	t.grid = grid
	n := timelineLaunches * t.regionWords()
	if t.buf, err = dev.Alloc(n * 8); err != nil {
		return err
	}
	return dev.Do(func(c *cuda.Ctx) error { return c.Memset32(t.buf, 0, 2*n) })
}

// regionWords is the words of one launch's region.
func (t *launchTimeline) regionWords() int {
	return timelineHead + timelineWords*t.grid.X*t.grid.Y*t.grid.Z
}

// region queues the stamp kernel into the next launch's region and
// returns the region, the split kernel's extra argument.
func (t *launchTimeline) region(c *cuda.Ctx, st cuda.Stream) (cuda.DevicePtr, error) {
	region := t.buf + cuda.DevicePtr(8*(t.next%timelineLaunches)*t.regionWords())
	t.next++
	return region, c.Launch(t.stamp, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, st, region)
}

// read returns the records of the last launches (at most
// timelineLaunches, oldest first), which must have had the plan's largest
// grid; nil without the timeline. kind names the plan in errors.
func (t *launchTimeline) read(dev *cuda.Device, kind string) ([]TimelineLaunch, error) {
	if t.buf == 0 {
		return nil, nil
	}
	raw := make([]byte, timelineLaunches*t.regionWords()*8)
	if err := dev.Do(func(c *cuda.Ctx) error {
		if err := c.Synchronize(); err != nil {
			return err
		}
		return c.DtoH(raw, t.buf)
	}); err != nil {
		return nil, fmt.Errorf("kernels: %s timeline: %w", kind, err)
	}
	return t.records(raw), nil
}

// records decodes the regions raw (timelineLaunches of them, as the GPU
// wrote them) into the last launches' records, oldest first.
func (t *launchTimeline) records(raw []byte) []TimelineLaunch {
	splits, items := t.grid.X, t.grid.Y
	ctas := splits * items * t.grid.Z
	words := t.regionWords()
	n := min(t.next, timelineLaunches)
	var out []TimelineLaunch
	for k := t.next - n; k < t.next; k++ {
		reg := raw[8*(k%timelineLaunches)*words:]
		w := func(i int) uint64 { return binary.LittleEndian.Uint64(reg[8*i:]) }
		l := TimelineLaunch{Stamp: w(0)}
		for i := range ctas {
			base := timelineHead + i*timelineWords
			info := w(base + tlInfo)
			if info == ^uint64(0) || w(base+tlEntry) == 0 {
				continue // no tokens, or never written
			}
			r := TimelineCTA{Split: i % splits, Item: i / splits % items, Seq: i / (splits * items),
				SM: int(info & 0xffff), Tiles: int(info >> 16 & 0xffffff), PerWarp: int(info >> 40 & 0xffffff),
				Entry: w(base + tlEntry), WarpsDone: w(base + tlWarpsDone), Partial: w(base + tlPartial),
				Arrived: w(base + tlArrived), Exit: w(base + tlExit), Last: w(base+tlLast) != 0}
			for wi := range tlWarps {
				r.Prologue[wi], r.First[wi], r.Loop[wi] = w(base+tlPrologue+wi), w(base+tlFirst+wi), w(base+tlLoop+wi)
			}
			l.CTAs = append(l.CTAs, r)
		}
		out = append(out, l)
	}
	return out
}

// TimelineCTA is one CTA's record of a timeline launch: times in ns of the
// GPU's timer, 0 where the CTA did not reach (or does not have) the phase.
type TimelineCTA struct {
	Split, Item, Seq int // blockIdx x, y (KV head x row chunk), z
	SM               int
	Tiles, PerWarp   int // the CTA's packed tiles and tiles per warp (split_mma: 4 and 1, one "tile" a warp)
	Entry            uint64
	Prologue         [tlWarps]uint64 // warp's query setup done (the tile loop starts)
	First            [tlWarps]uint64 // warp's first tile computed (decode_mma only)
	Loop             [tlWarps]uint64 // warp's packed tiles computed
	WarpsDone        uint64          // the warp-merge barrier passed (the residual included)
	Partial          uint64          // the split's partial written (0: one split, no partial)
	Arrived          uint64          // the merge's count returned
	Exit             uint64
	Last             bool // this CTA merged its row chunk's splits
}

// warpTiles returns how many packed tiles warp w of the CTA runs.
func (r *TimelineCTA) warpTiles(w int) int {
	return max(0, min(r.Tiles, (w+1)*r.PerWarp)-w*r.PerWarp)
}

// TimelineLaunch is one launch's records: the stamp written just before
// it (when the kernel ahead had ended) and its CTAs that had tokens.
type TimelineLaunch struct {
	Stamp uint64
	CTAs  []TimelineCTA
}

// Timeline returns the records of the plan's last launches (at most
// timelineLaunches, oldest first), which must have had the plan's shape;
// nil without DecodeTuning.Timeline.
func (p *DecodePlan) Timeline() ([]TimelineLaunch, error) { return p.tl.read(p.dev, "decode") }

// Timeline returns the records of the plan's last launches (at most
// timelineLaunches, oldest first), which must have had the plan's shape;
// nil without PlanesTuning.Timeline. A record's Item is the (KV head, row
// chunk); its First words are 0 (split_mma does not write them).
func (p *PlanesPlan) Timeline() ([]TimelineLaunch, error) { return p.tl.read(p.dev, "planes") }

// timelineDist collects one phase's durations (ns) and prints their
// median, 90th percentile and maximum in us.
type timelineDist struct {
	name string
	v    []float64
}

func (d *timelineDist) add(a, b uint64) {
	if a != 0 && b != 0 && b >= a {
		d.v = append(d.v, float64(b-a))
	}
}

func (d *timelineDist) print(w io.Writer) {
	if len(d.v) == 0 {
		fmt.Fprintf(w, "| %s | - | - | - | 0 |\n", d.name)
		return
	}
	slices.Sort(d.v)
	q := func(f float64) float64 { return d.v[min(len(d.v)-1, int(f*float64(len(d.v))))] / 1e3 }
	fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %d |\n", d.name, q(0.5), q(0.9), d.v[len(d.v)-1]/1e3, len(d.v))
}

// SummarizeTimeline writes a markdown table of the launches' phases, over
// all their CTAs (or warps): median, 90th percentile and maximum in us,
// and the number of samples. Per launch: the start (the stamp to the
// first CTA's entry), the spread of the entries, the end (the stamp to the
// last exit) and the CTAs per SM.
func SummarizeTimeline(w io.Writer, launches []TimelineLaunch) {
	ds := []*timelineDist{
		{name: "start: stamp -> first CTA entry (per launch)"},
		{name: "entries: first -> last CTA entry (per launch)"},
		{name: "prologue: entry -> query set up (per warp)"},
		{name: "first tile: query set up -> first tile computed (per warp)"},
		{name: "per tile after the first (per warp with 2+ tiles)"},
		{name: "loop: entry -> packed tiles done (per warp)"},
		{name: "warp merge: CTA's last warp done -> barrier passed"},
		{name: "partial: barrier -> partial written"},
		{name: "count: partial written -> arrival known"},
		{name: "merge: arrival -> exit (the last CTA of a row chunk)"},
		{name: "one split: barrier -> output written"},
		{name: "CTA life: entry -> exit"},
		{name: "last partial -> merge starts (per row chunk)"},
		{name: "merge end -> last exit (per launch)"},
		{name: "end: stamp -> last exit (per launch)"},
		{name: "end: first entry -> last exit (per launch)"},
		{name: "tail: last CTA entry -> last exit (per launch)"},
	}
	const (
		dStart = iota
		dEntries
		dPrologue
		dFirst
		dPerTile
		dLoop
		dWarpMerge
		dPartial
		dCount
		dMerge
		dOneSplit
		dLife
		dLastPartial
		dMergeTail
		dEnd
		dSpan
		dTail
	)
	maxPerSM := 0
	var running []string // per launch: mean running CTAs by tenth of its span
	for _, l := range launches {
		if len(l.CTAs) == 0 {
			continue
		}
		first, lastEntry, lastExit, lastMergeEnd := ^uint64(0), uint64(0), uint64(0), uint64(0)
		perSM := map[int]int{}
		type chunk struct{ seq, item int }
		lastPartial := map[chunk]uint64{}
		mergeStart := map[chunk]uint64{}
		for i := range l.CTAs {
			r := &l.CTAs[i]
			first, lastEntry, lastExit = min(first, r.Entry), max(lastEntry, r.Entry), max(lastExit, r.Exit)
			perSM[r.SM]++
			done := uint64(0)
			for wi := range tlWarps {
				n := r.warpTiles(wi)
				if n == 0 {
					continue
				}
				ds[dPrologue].add(r.Entry, r.Prologue[wi])
				ds[dFirst].add(r.Prologue[wi], r.First[wi])
				if n > 1 && r.Loop[wi] > r.First[wi] && r.First[wi] != 0 {
					ds[dPerTile].v = append(ds[dPerTile].v, float64(r.Loop[wi]-r.First[wi])/float64(n-1))
				}
				ds[dLoop].add(r.Entry, r.Loop[wi])
				done = max(done, r.Loop[wi])
			}
			ds[dWarpMerge].add(done, r.WarpsDone)
			ds[dLife].add(r.Entry, r.Exit)
			c := chunk{r.Seq, r.Item}
			if r.Partial == 0 {
				ds[dOneSplit].add(r.WarpsDone, r.Exit)
				continue
			}
			ds[dPartial].add(r.WarpsDone, r.Partial)
			ds[dCount].add(r.Partial, r.Arrived)
			lastPartial[c] = max(lastPartial[c], r.Partial)
			if r.Last {
				ds[dMerge].add(r.Arrived, r.Exit)
				mergeStart[c] = r.Arrived
				lastMergeEnd = max(lastMergeEnd, r.Exit)
			}
		}
		for c, t := range lastPartial {
			ds[dLastPartial].add(t, mergeStart[c])
		}
		ds[dStart].add(l.Stamp, first)
		ds[dEntries].add(first, lastEntry)
		ds[dMergeTail].add(lastMergeEnd, lastExit)
		ds[dEnd].add(l.Stamp, lastExit)
		ds[dSpan].add(first, lastExit)
		ds[dTail].add(lastEntry, lastExit)
		running = append(running, runningByTenth(l.CTAs, first, lastExit))
		for _, n := range perSM {
			maxPerSM = max(maxPerSM, n)
		}
	}
	fmt.Fprintf(w, "| phase (%d launches) | median us | p90 | max | n |\n|---|---|---|---|---|\n", len(launches))
	for _, d := range ds {
		d.print(w)
	}
	fmt.Fprintf(w, "\nmost CTAs on one SM in a launch: %d\n", maxPerSM)
	if len(running) > 0 {
		// Session 20: the waves' tail at max batch.
		fmt.Fprintf(w, "running CTAs, mean by tenth of the span (last launch): %s\n", running[len(running)-1])
	}
}

// runningByTenth returns the mean number of running CTAs (entry to exit)
// in each tenth of [first, last], and the share of the peak they use.
func runningByTenth(ctas []TimelineCTA, first, last uint64) string {
	if last <= first {
		return "-"
	}
	const bins = 10
	span := float64(last - first)
	var busy [bins]float64
	for i := range ctas {
		a, b := float64(ctas[i].Entry-first), float64(ctas[i].Exit-first)
		if ctas[i].Entry < first || ctas[i].Exit < ctas[i].Entry {
			continue
		}
		for k := range bins {
			lo, hi := span*float64(k)/bins, span*float64(k+1)/bins
			if o := min(b, hi) - max(a, lo); o > 0 {
				busy[k] += o
			}
		}
	}
	peak, sum := 0.0, 0.0
	parts := make([]string, bins)
	for k := range bins {
		m := busy[k] / (span / bins)
		peak, sum = max(peak, m), sum+m
		parts[k] = fmt.Sprintf("%.0f", m)
	}
	return fmt.Sprintf("%s (%.1f%% of the peak tenth's over the span)", strings.Join(parts, " "), 100*sum/(bins*max(peak, 1)))
}

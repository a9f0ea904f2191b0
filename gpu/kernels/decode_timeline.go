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
	tlMarks          = 19 // + markReleased, markWeights, markMerged (session 26)
	tlLens           = 22 // thread 0: lens returned (session 28; decode_mma only)
	tlQuery          = 23 // thread 0: its query loads returned (session 28; decode_mma only)
	tlWarps          = 4  // decode_mma.cu's and planes.cu's kWarps
)

// The fused merge's marks, bitdecode.cuh's kMark* (session 26): words
// tlMarks + i.
const (
	markReleased = 0 // the count's release fence done (every CTA of a merge)
	markWeights  = 1 // the merging CTA's weights made
	markMerged   = 2 // the merging CTA's outputs written
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
				Arrived: w(base + tlArrived), Exit: w(base + tlExit), Last: w(base+tlLast) != 0,
				Released: w(base + tlMarks + markReleased), Weights: w(base + tlMarks + markWeights),
				Merged: w(base + tlMarks + markMerged), Lens: w(base + tlLens), Query: w(base + tlQuery)}
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
	// Session 26: the count's release fence done, and in the merging CTA
	// its weights made and its outputs written (0 where not written).
	Released, Weights, Merged uint64
	// Session 28: thread 0's lens load returned (the branch on L passed)
	// and its query loads returned (decode_mma only; 0 elsewhere).
	Lens, Query uint64
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
		{name: "  prologue's lens: entry -> lens returned (thread 0)"},
		{name: "  prologue's query: lens -> query returned (thread 0: first tile requested, dependency wait, query load)"},
		{name: "  prologue's setup: query returned -> warp 0's query set up (fold, operands)"},
		{name: "first tile: query set up -> first tile computed (per warp)"},
		{name: "per tile after the first (per warp with 2+ tiles)"},
		{name: "loop: entry -> packed tiles done (per warp)"},
		{name: "warp merge: CTA's last warp done -> barrier passed"},
		{name: "partial: barrier -> partial written"},
		{name: "count: partial written -> arrival known"},
		{name: "  count's release fence: partial written -> fence done"},
		{name: "  count's atomic (+ acquire): fence done -> arrival known"},
		{name: "merge: arrival -> exit (the last CTA of a row chunk)"},
		{name: "  merge's weights: arrival -> weights made"},
		{name: "  merge's outputs: weights -> outputs written"},
		{name: "  merge's end: outputs written -> exit"},
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
		dLens
		dQuery
		dSetup
		dFirst
		dPerTile
		dLoop
		dWarpMerge
		dPartial
		dCount
		dFence
		dAtomic
		dMerge
		dMergeW
		dMergeO
		dMergeEnd
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
			ds[dLens].add(r.Entry, r.Lens)
			ds[dQuery].add(r.Lens, r.Query)
			if r.warpTiles(0) > 0 {
				ds[dSetup].add(r.Query, r.Prologue[0])
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
			ds[dFence].add(r.Partial, r.Released)
			ds[dAtomic].add(r.Released, r.Arrived)
			lastPartial[c] = max(lastPartial[c], r.Partial)
			if r.Last {
				ds[dMerge].add(r.Arrived, r.Exit)
				ds[dMergeW].add(r.Arrived, r.Weights)
				ds[dMergeO].add(r.Weights, r.Merged)
				ds[dMergeEnd].add(r.Merged, r.Exit)
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

// ctaLoopEnd is the latest of a CTA's warps' loop ends (0: none written).
func ctaLoopEnd(r *TimelineCTA) uint64 {
	e := uint64(0)
	for wi := range tlWarps {
		e = max(e, r.Loop[wi])
	}
	return e
}

// SummarizeSMs writes, for launches of one plan, whether the CTAs whose
// loops end last sit on the same SMs launch after launch (session 26):
// per launch each SM's latest loop end from the launch's first entry; the
// mean Spearman rank correlation of those times between consecutive
// launches (1: the same SMs are slow every time, 0: no relation); how many
// of a launch's slowest tenth of SMs are in the next launch's slowest
// tenth; the loop end of SMs running one CTA against those running two;
// and the SMs most often in the slowest tenth.
func SummarizeSMs(w io.Writer, launches []TimelineLaunch) {
	type smTimes map[int]float64
	var per []smTimes
	var one, two []float64
	for _, l := range launches {
		if len(l.CTAs) == 0 {
			continue
		}
		first := ^uint64(0)
		for i := range l.CTAs {
			first = min(first, l.CTAs[i].Entry)
		}
		t, n := smTimes{}, map[int]int{}
		for i := range l.CTAs {
			r := &l.CTAs[i]
			if e := ctaLoopEnd(r); e > first {
				t[r.SM] = max(t[r.SM], float64(e-first)/1e3)
			}
			n[r.SM]++
		}
		for sm, v := range t {
			if n[sm] == 1 {
				one = append(one, v)
			} else {
				two = append(two, v)
			}
		}
		per = append(per, t)
	}
	if len(per) < 2 {
		return
	}
	slowest := func(t smTimes) []int {
		sms := make([]int, 0, len(t))
		for sm := range t {
			sms = append(sms, sm)
		}
		slices.SortFunc(sms, func(a, b int) int {
			if t[a] != t[b] {
				if t[a] > t[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		return sms
	}
	var rho, overlap float64
	pairs := 0
	count := map[int]int{}
	for k := range per {
		s := slowest(per[k])
		tenth := max(1, len(s)/10)
		for _, sm := range s[:tenth] {
			count[sm]++
		}
		if k == 0 {
			continue
		}
		a, b := per[k-1], per[k]
		var common []int
		for sm := range a {
			if _, ok := b[sm]; ok {
				common = append(common, sm)
			}
		}
		rho += spearman(common, a, b)
		prev := slowest(a)[:max(1, len(a)/10)]
		hit := 0
		for _, sm := range s[:tenth] {
			if slices.Contains(prev, sm) {
				hit++
			}
		}
		overlap += float64(hit) / float64(tenth)
		pairs++
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Fprintf(w, "per-SM loop end: rank correlation between consecutive launches %.2f; slowest tenth kept %.0f%%; median loop end, SMs of one CTA %.2f us (%d), of two %.2f us (%d)\n",
		rho/float64(pairs), 100*overlap/float64(pairs), med(one), len(one), med(two), len(two))
	var often []string
	for _, sm := range slowest(smTimes(func() map[int]float64 {
		m := map[int]float64{}
		for sm, c := range count {
			m[sm] = float64(c)
		}
		return m
	}())) {
		if len(often) == 12 {
			break
		}
		often = append(often, fmt.Sprintf("%d:%d", sm, count[sm]))
	}
	fmt.Fprintf(w, "SMs most often in the slowest tenth (sm:launches of %d): %s\n", len(per), strings.Join(often, " "))
}

// spearman is the rank correlation of a[sm] and b[sm] over sms (ties by
// SM number; 0 with fewer than 3).
func spearman(sms []int, a, b map[int]float64) float64 {
	n := len(sms)
	if n < 3 {
		return 0
	}
	rank := func(t map[int]float64) map[int]float64 {
		s := slices.Clone(sms)
		slices.SortFunc(s, func(x, y int) int {
			if t[x] != t[y] {
				if t[x] < t[y] {
					return -1
				}
				return 1
			}
			return x - y
		})
		r := map[int]float64{}
		for i, sm := range s {
			r[sm] = float64(i)
		}
		return r
	}
	ra, rb := rank(a), rank(b)
	d2 := 0.0
	for _, sm := range sms {
		d := ra[sm] - rb[sm]
		d2 += d * d
	}
	nf := float64(n)
	return 1 - 6*d2/(nf*(nf*nf-1))
}

// WriteTimelineCSV writes one CSV line per timed CTA of launches (session
// 26): the row's label, the launch, the CTA's split, item, sequence and
// SM, then its phases in ns from the launch's first entry (0 where not
// written): entry, the warps' latest prologue, earliest and latest loop
// ends, warps done, partial, release fence, arrival, weights, merged, exit,
// and 1 if it merged.
func WriteTimelineCSV(w io.Writer, label string, launches []TimelineLaunch) error {
	for k, l := range launches {
		first := ^uint64(0)
		for i := range l.CTAs {
			first = min(first, l.CTAs[i].Entry)
		}
		rel := func(t uint64) int64 {
			if t == 0 {
				return 0
			}
			return int64(t) - int64(first)
		}
		for i := range l.CTAs {
			r := &l.CTAs[i]
			pro, lo := uint64(0), ^uint64(0)
			for wi := range tlWarps {
				pro = max(pro, r.Prologue[wi])
				if r.Loop[wi] != 0 {
					lo = min(lo, r.Loop[wi])
				}
			}
			if lo == ^uint64(0) {
				lo = 0
			}
			last := 0
			if r.Last {
				last = 1
			}
			if _, err := fmt.Fprintf(w, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", label, k, r.Split, r.Item, r.Seq, r.SM,
				rel(r.Entry), rel(pro), rel(lo), rel(ctaLoopEnd(r)), rel(r.WarpsDone), rel(r.Partial), rel(r.Released),
				rel(r.Arrived), rel(r.Weights), rel(r.Merged), rel(r.Exit), last); err != nil {
				return err
			}
		}
	}
	return nil
}

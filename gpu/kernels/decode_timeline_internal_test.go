package kernels

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// TestSummarizeTimeline checks the phase table on a hand-made launch of two
// splits of one row chunk: each phase's duration is known.
func TestSummarizeTimeline(t *testing.T) {
	cta := func(split int, base uint64, last bool) TimelineCTA {
		r := TimelineCTA{Split: split, SM: split, Tiles: 8, PerWarp: 2, Entry: base, WarpsDone: base + 9000,
			Partial: base + 9500, Arrived: base + 10500, Exit: base + 10600, Last: last}
		for w := range tlWarps {
			r.Prologue[w], r.First[w], r.Loop[w] = base+1000, base+3000, base+7000 // tiles of 4 us after the first
		}
		if last {
			r.Exit = base + 12500 // 2 us of merge
		}
		return r
	}
	l := TimelineLaunch{Stamp: 100000, CTAs: []TimelineCTA{cta(0, 101500, false), cta(1, 102000, true)}}
	checkSummary(t, []TimelineLaunch{l},
		"| start: stamp -> first CTA entry (per launch) | 1.50 | 1.50 | 1.50 | 1 |",
		"| entries: first -> last CTA entry (per launch) | 0.50 | 0.50 | 0.50 | 1 |",
		"| prologue: entry -> query set up (per warp) | 1.00 | 1.00 | 1.00 | 8 |",
		"| per tile after the first (per warp with 2+ tiles) | 4.00 | 4.00 | 4.00 | 8 |",
		"| warp merge: CTA's last warp done -> barrier passed | 2.00 | 2.00 | 2.00 | 2 |",
		"| count: partial written -> arrival known | 1.00 | 1.00 | 1.00 | 2 |",
		"| merge: arrival -> exit (the last CTA of a row chunk) | 2.00 | 2.00 | 2.00 | 1 |",
		"| last partial -> merge starts (per row chunk) | 1.00 | 1.00 | 1.00 | 1 |",
		"| end: stamp -> last exit (per launch) | 14.50 | 14.50 | 14.50 | 1 |",
		"most CTAs on one SM in a launch: 1",
	)
}

// checkSummary checks that SummarizeTimeline's table of launches has the
// rows want.
func checkSummary(t *testing.T, launches []TimelineLaunch, want ...string) {
	t.Helper()
	var b bytes.Buffer
	SummarizeTimeline(&b, launches)
	out := b.String()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}

// TestTimelineRecords checks launchTimeline.records on regions written by
// hand as the kernels write them: the CTAs' blockIdx from their place,
// the info word's fields, the skipped CTAs (no tokens, never written),
// decode_mma's first-tile words and split_mma's, never written, read as 0,
// and the launches in order once the regions have cycled.
func TestTimelineRecords(t *testing.T) {
	tl := launchTimeline{grid: cuda.Dim3{X: 3, Y: 2, Z: 2}, next: timelineLaunches + 2}
	words := tl.regionWords()
	if want := timelineHead + timelineWords*12; words != want {
		t.Fatalf("regionWords = %d, want %d", words, want)
	}
	raw := make([]byte, timelineLaunches*words*8)
	put := func(launch, i int, v uint64) {
		binary.LittleEndian.PutUint64(raw[8*((launch%timelineLaunches)*words+i):], v)
	}
	// Launch k (the last two, 8 and 9, overwrite regions 0 and 1): CTA 7
	// (split 1, item 0, sequence 1) as decode_mma writes it, CTA 4 (split 1,
	// item 1, sequence 0) as split_mma does, CTA 2 with no tokens; the others
	// never written.
	for k := range timelineLaunches + 2 {
		base := uint64(1000 * (k + 1))
		put(k, 0, base)
		for _, c := range []struct {
			cta        int
			tiles, per uint64
			first      bool
		}{{7, 13, 4, true}, {4, tlWarps, 1, false}} {
			o := timelineHead + c.cta*timelineWords
			put(k, o+tlEntry, base+1)
			put(k, o+tlInfo, 77|c.tiles<<16|c.per<<40)
			for w := range tlWarps {
				put(k, o+tlPrologue+w, base+2)
				if c.first {
					put(k, o+tlFirst+w, base+3)
				}
				put(k, o+tlLoop+w, base+4)
			}
			put(k, o+tlWarpsDone, base+5)
			put(k, o+tlPartial, base+6)
			put(k, o+tlArrived, base+7)
			put(k, o+tlExit, base+8)
			put(k, o+tlLast, uint64(c.cta&1))
		}
		put(k, timelineHead+2*timelineWords+tlEntry, base+1)
		put(k, timelineHead+2*timelineWords+tlInfo, ^uint64(0))
	}
	got := tl.records(raw)
	if len(got) != timelineLaunches {
		t.Fatalf("%d launches, want %d", len(got), timelineLaunches)
	}
	for j, l := range got {
		base := uint64(1000 * (j + 3)) // launches 2..9, oldest first
		if l.Stamp != base || len(l.CTAs) != 2 {
			t.Fatalf("launch %d: stamp %d with %d CTAs, want %d with 2", j, l.Stamp, len(l.CTAs), base)
		}
		var four = [tlWarps]uint64{base + 2, base + 2, base + 2, base + 2}
		want := []TimelineCTA{
			{Split: 1, Item: 1, Seq: 0, SM: 77, Tiles: tlWarps, PerWarp: 1, Entry: base + 1, Prologue: four,
				WarpsDone: base + 5, Partial: base + 6, Arrived: base + 7, Exit: base + 8},
			{Split: 1, Item: 0, Seq: 1, SM: 77, Tiles: 13, PerWarp: 4, Entry: base + 1, Prologue: four,
				WarpsDone: base + 5, Partial: base + 6, Arrived: base + 7, Exit: base + 8, Last: true},
		}
		for w := range tlWarps {
			want[0].Loop[w], want[1].Loop[w], want[1].First[w] = base+4, base+4, base+3
		}
		for i := range want {
			if l.CTAs[i] != want[i] {
				t.Errorf("launch %d CTA %d:\n got %+v\nwant %+v", j, i, l.CTAs[i], want[i])
			}
		}
	}
}

// TestSummarizeTimelineNoFirst checks that records without first-tile
// words (split_mma's) give the first-tile and per-tile rows no samples and
// leave the other rows as they are.
func TestSummarizeTimelineNoFirst(t *testing.T) {
	r := TimelineCTA{Tiles: tlWarps, PerWarp: 1, Entry: 101000, WarpsDone: 109000, Exit: 110000}
	for w := range tlWarps {
		r.Prologue[w], r.Loop[w] = 102000, 107000
	}
	checkSummary(t, []TimelineLaunch{{Stamp: 100000, CTAs: []TimelineCTA{r}}},
		"| first tile: query set up -> first tile computed (per warp) | - | - | - | 0 |",
		"| per tile after the first (per warp with 2+ tiles) | - | - | - | 0 |",
		"| prologue: entry -> query set up (per warp) | 1.00 | 1.00 | 1.00 | 4 |",
		"| loop: entry -> packed tiles done (per warp) | 6.00 | 6.00 | 6.00 | 4 |",
		"| one split: barrier -> output written | 1.00 | 1.00 | 1.00 | 1 |",
	)
}

// TestSummarizeSMs checks the per-SM summary on launches whose SMs keep
// their order (rank correlation 1, the slowest tenth kept) and on a launch
// whose order is reversed (-1), and the CSV lines' count and fields.
func TestSummarizeSMs(t *testing.T) {
	launch := func(order []int) TimelineLaunch {
		var l TimelineLaunch
		for i, sm := range order {
			r := TimelineCTA{SM: sm, Entry: 1000, Exit: 9000}
			for w := range tlWarps {
				r.Loop[w] = 1000 + uint64(1000*(i+1))
			}
			l.CTAs = append(l.CTAs, r)
		}
		return l
	}
	same := []TimelineLaunch{launch([]int{0, 1, 2, 3}), launch([]int{0, 1, 2, 3})}
	var b strings.Builder
	SummarizeSMs(&b, same)
	if !strings.Contains(b.String(), "consecutive launches 1.00; slowest tenth kept 100%") || !strings.Contains(b.String(), "of 2): 3:2\n") || !strings.Contains(b.String(), "one CTA 3.00 us (8)") {
		t.Errorf("same order:\n%s", b.String())
	}
	b.Reset()
	SummarizeSMs(&b, []TimelineLaunch{launch([]int{0, 1, 2, 3}), launch([]int{3, 2, 1, 0})})
	if !strings.Contains(b.String(), "consecutive launches -1.00; slowest tenth kept 0%") {
		t.Errorf("reversed order:\n%s", b.String())
	}
	b.Reset()
	if err := WriteTimelineCSV(&b, "x", same); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 8 || lines[7] != "x,1,0,0,0,3,0,0,4000,4000,0,0,0,0,0,0,8000,0" {
		t.Errorf("CSV:\n%s", b.String())
	}
}

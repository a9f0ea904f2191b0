package kernels

import (
	"bytes"
	"strings"
	"testing"
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
	var b bytes.Buffer
	SummarizeTimeline(&b, []TimelineLaunch{l})
	out := b.String()
	for _, want := range []string{
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
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

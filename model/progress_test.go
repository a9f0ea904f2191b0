package model

import (
	"bytes"
	"strings"
	"testing"
)

// TestLineProgress: to a LineProgress writer (a log, a pipe) a fast load
// prints nothing, and a slow one prints whole lines, at most one a second,
// then a last line; no carriage returns.
func TestLineProgress(t *testing.T) {
	var fast bytes.Buffer
	p := newProgressBar(LineProgress(&fast), 100<<20)
	p.add(50 << 20)
	p.add(50 << 20)
	p.done()
	if fast.Len() != 0 {
		t.Errorf("a fast load printed %q, want nothing", fast.String())
	}

	var slow bytes.Buffer
	p = newProgressBar(LineProgress(&slow), 100<<20)
	p.start = p.start.Add(-3 * progressLineEvery)
	p.last = p.start
	p.add(30 << 20) // a second has passed since the last line: a line
	p.add(10 << 20) // none has: no line
	p.last = p.last.Add(-progressLineEvery)
	p.add(60 << 20) // a line
	p.done()
	out := slow.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{"loading  30%  30/100 MB, 3s", "loading 100%  100/100 MB, 3s", "loaded 100 MB in 3.0s"}
	if strings.Contains(out, "\r") || len(lines) != len(want) {
		t.Fatalf("slow load printed %q, want the lines %q", out, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
}

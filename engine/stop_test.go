package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStopMatcher feeds text in pieces and checks the emitted text and
// where it stops against a reference that searches the whole text.
func TestStopMatcher(t *testing.T) {
	cases := []struct {
		stops  []string
		pieces []string
		want   string
		stop   bool
	}{
		// A stop inside one token's text: the token "\n\t" holds "\n".
		{[]string{"\n"}, []string{"func", " main()", " {\n\t", "return"}, "func main() {", true},
		{[]string{"END"}, []string{"abc", "E", "N", "Dxyz"}, "abc", true},
		{[]string{"END"}, []string{"abcEN", "x"}, "abcENx", false},
		{[]string{"ab", "b"}, []string{"xa", "bc"}, "x", true}, // earliest start wins
		{[]string{"bc", "abcd"}, []string{"zabcd"}, "z", true}, // earliest start, not first listed
		{[]string{"}}"}, []string{"a}", "}", "b"}, "a", true},  // across tokens
		{[]string{"x"}, []string{"", "yy", ""}, "yy", false},   // empty pieces
		{nil, []string{"a", "b"}, "ab", false},                 // no stops
		{[]string{""}, []string{"a", "b"}, "ab", false},        // empty stops are ignored
		{[]string{"aab"}, []string{"a", "a", "a", "b", "c"}, "a", true},
	}
	for _, c := range cases {
		m := newStopMatcher(c.stops)
		var got strings.Builder
		stopped := false
		for _, p := range c.pieces {
			e, s := m.add(p)
			got.WriteString(e)
			if s {
				stopped = true
				break
			}
		}
		if !stopped {
			got.WriteString(m.flush())
		}
		if got.String() != c.want || stopped != c.stop {
			t.Errorf("stops %q pieces %q: got %q (stopped %v), want %q (%v)", c.stops, c.pieces, got.String(), stopped, c.want, c.stop)
		}
	}
}

// TestStopMatcherRandom compares the matcher with the whole-text reference
// (cut at the first occurrence of any stop) on random texts and pieces, and
// checks that nothing emitted before the stop is taken back.
func TestStopMatcherRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const alphabet = "ab\n{}"
	randStr := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 5000 {
		var stops []string
		for range 1 + r.IntN(3) {
			stops = append(stops, randStr(1+r.IntN(4)))
		}
		text := randStr(r.IntN(40))
		want, wantStop := text, false
		first := -1
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && (first < 0 || i < first) {
				first = i
			}
		}
		if first >= 0 {
			want, wantStop = text[:first], true
		}
		m := newStopMatcher(stops)
		var got strings.Builder
		stopped := false
		for rest := text; rest != "" && !stopped; {
			n := min(len(rest), r.IntN(5))
			e, s := m.add(rest[:n])
			got.WriteString(e)
			stopped = s
			rest = rest[n:]
		}
		if !stopped {
			got.WriteString(m.flush())
		}
		if got.String() != want || stopped != wantStop {
			t.Fatalf("stops %q text %q: got %q (stopped %v), want %q (%v)", stops, text, got.String(), stopped, want, wantStop)
		}
	}
}

// TestStopMatcherCost checks that the work per piece does not grow with
// the text: long stops and a long generation take a bounded held window.
func TestStopMatcherCost(t *testing.T) {
	stop := strings.Repeat("a", MaxStopBytes-1) + "b"
	m := newStopMatcher([]string{stop, stop + "", "c"})
	emitted := 0
	for range 10000 {
		e, s := m.add("a")
		if s {
			t.Fatal("stopped early")
		}
		emitted += len(e)
		if len(m.held) >= MaxStopBytes {
			t.Fatalf("held %d bytes, want < %d", len(m.held), MaxStopBytes)
		}
	}
	e, s := m.add("b")
	if emitted += len(e); !s || emitted != 10000-(MaxStopBytes-1) {
		t.Fatalf("the long stop: stopped %v, emitted %d bytes, want %d", s, emitted, 10000-(MaxStopBytes-1))
	}
}

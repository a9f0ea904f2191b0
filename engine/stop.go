package engine

import (
	"fmt"
	"strings"
)

// Bounds on stop strings, so that matching them costs a bounded amount per
// token on the scheduler's goroutine (the OpenAI API allows 4).
const (
	// MaxStops is the most stop strings one request may give.
	MaxStops = 16
	// MaxStopBytes is the longest stop string, in bytes.
	MaxStopBytes = 256
)

// checkStops returns an error if stops exceed MaxStops or MaxStopBytes.
func checkStops(stops []string) error {
	if len(stops) > MaxStops {
		return fmt.Errorf("engine: %d stop strings, at most %d", len(stops), MaxStops)
	}
	for i, s := range stops {
		if len(s) > MaxStopBytes {
			return fmt.Errorf("engine: stop string %d is %d bytes, at most %d", i, len(s), MaxStopBytes)
		}
	}
	return nil
}

// stopMatcher cuts generated text at the first occurrence of any stop
// string, wherever it falls: inside one token's text ("\n" in "\n\t"),
// across tokens, or at the end. It holds back only the text that could
// still become the start of a stop string, and costs at most
// O(len(stops) · (MaxStopBytes + piece)) per piece, whatever the length of
// the text so far.
type stopMatcher struct {
	stops   []string
	longest int    // bytes of the longest stop string
	held    string // text not yet emitted: a possible start of a stop
}

// newStopMatcher returns a matcher for the non-empty stop strings of stops.
func newStopMatcher(stops []string) *stopMatcher {
	m := &stopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
			m.longest = max(m.longest, len(s))
		}
	}
	return m
}

// active reports whether there is any stop string to match.
func (m *stopMatcher) active() bool { return len(m.stops) > 0 }

// add takes the next piece of text and returns the text that can be
// emitted now and whether a stop string was found; at a stop, emit is the
// text before it and the rest (the stop and anything after it) is dropped.
func (m *stopMatcher) add(piece string) (emit string, stopped bool) {
	if len(m.stops) == 0 {
		return piece, false
	}
	// A match ends inside the piece and starts at most longest-1 bytes
	// before it: search the held text plus the piece, and cut at the
	// earliest match.
	w := m.held + piece
	cut := -1
	for _, s := range m.stops {
		if i := strings.Index(w, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		m.held = ""
		return w[:cut], true
	}
	// Hold back the longest suffix of w that is a proper prefix of a stop.
	keep := 0
	for _, s := range m.stops {
		for n := min(len(s)-1, len(w)); n > keep; n-- {
			if strings.HasSuffix(w, s[:n]) {
				keep = n
				break
			}
		}
	}
	m.held = w[len(w)-keep:]
	return w[:len(w)-keep], false
}

// flush returns the text still held back, at the end of generation.
func (m *stopMatcher) flush() string {
	h := m.held
	m.held = ""
	return h
}

package tokenizer

import (
	"runtime"
	"strings"
	"testing"
)

// TestLongWordAllocations bounds what encoding one very long word (a run of
// spaces or of one letter: a single pre-token) allocates per byte of text:
// the server tokenizes a request before its context check can refuse it, so
// this is its memory per byte of body (server/budget.go). Before mergeWord
// sized its symbols and merge queue to the word it allocated ~141 bytes a
// byte on these fixtures through append's growth; now ~60-81.
func TestLongWordAllocations(t *testing.T) {
	const n, bound = 100000, 100.0
	for _, name := range []string{"llama3_split", "gpt2_prefix", "llama2_spm"} {
		tok := loadFixture(t, name)
		for _, text := range []string{strings.Repeat(" ", n), strings.Repeat("a", n)} {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			ids := tok.Encode(text, false)
			runtime.ReadMemStats(&m1)
			if len(ids) == 0 {
				t.Fatalf("%s: %q x %d encodes to nothing", name, text[:1], n)
			}
			if per := float64(m1.TotalAlloc-m0.TotalAlloc) / n; per > bound {
				t.Errorf("%s: %q x %d allocates %.1f bytes a byte (at most %.0f)", name, text[:1], n, per, bound)
			}
		}
	}
}

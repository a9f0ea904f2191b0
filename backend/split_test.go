package backend

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestSplitRanges: each split kind's ranges, KV heads replicated over more
// ranks, and the shapes that cannot split, with the numbers in the error.
func TestSplitRanges(t *testing.T) {
	heads := Split{Kind: Rows, Unit: 64, What: "query heads"}
	kv := Split{Kind: Rows, Unit: 64, Replicate: true, What: "KV heads"}
	for _, c := range []struct {
		name     string
		s        Split
		dim, n   int
		want     []Range
		errWords string
	}{
		{"replicated", Split{}, 10, 2, []Range{{0, 10}, {0, 10}}, ""},
		{"rows", Split{Kind: Rows}, 12, 3, []Range{{0, 4}, {4, 4}, {8, 4}}, ""},
		{"cols by heads", Split{Kind: Cols, Unit: 64}, 4 * 64, 2, []Range{{0, 128}, {128, 128}}, ""},
		{"vocab uneven", Split{Kind: Vocab}, 10, 4, []Range{{0, 3}, {3, 3}, {6, 2}, {8, 2}}, ""},
		{"kv heads split", kv, 4 * 64, 2, []Range{{0, 128}, {128, 128}}, ""},
		{"kv heads replicated", kv, 2 * 64, 4, []Range{{0, 64}, {0, 64}, {64, 64}, {64, 64}}, ""},
		{"one kv head", kv, 64, 4, []Range{{0, 64}, {0, 64}, {0, 64}, {0, 64}}, ""},
		{"14 heads over 4", heads, 14 * 64, 4, nil, "14 query heads over 4 ranks"},
		{"3 kv heads over 2", kv, 3 * 64, 2, nil, "3 KV heads over 2 ranks"},
		{"2 query heads over 4", heads, 2 * 64, 4, nil, "2 query heads over 4 ranks"},
		{"rows not divisible", Split{Kind: Rows}, 10, 4, nil, "10 rows over 4 ranks"},
		{"partial head", heads, 100, 2, nil, "not whole query heads of 64"},
		{"vocab smaller than ranks", Split{Kind: Vocab}, 3, 4, nil, "leaves rank 3 none"},
	} {
		got, err := c.s.Ranges(c.dim, c.n)
		if c.errWords != "" {
			if err == nil || !errors.Is(err, ErrSplit) || !strings.Contains(err.Error(), c.errWords) {
				t.Errorf("%s: error %v, want ErrSplit saying %q", c.name, err, c.errWords)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

package eval

import "regexp"

// identRE matches identifiers of Go (and most languages): a letter or
// underscore, then letters, digits and underscores.
var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// MinReuseIdent is the shortest identifier ReuseProbes considers; shorter
// names (i, err, ctx) recur everywhere and test nothing long-range.
const MinReuseIdent = 6

// ReuseProbes finds long-range retrieval targets in a window of tokens whose
// texts are pieces (pieces[i] is token i decoded alone): identifiers whose
// previous occurrence in the window lies at least minGap tokens before a
// reuse and that do not occur in between. For each such reuse it returns
// the positions of the identifier's tokens after its first (the first
// token of a name is a guess even for a perfect memory; the rest are
// determined by the earlier occurrence). A token counts if it lies wholly
// inside the identifier. Positions are ascending; position p means token
// pieces[p], predicted from the prefix ending at p-1.
func ReuseProbes(pieces []string, minGap int) []int {
	start := make([]int, len(pieces)+1) // byte offset of each token
	var text []byte
	for i, p := range pieces {
		start[i] = len(text)
		text = append(text, p...)
	}
	start[len(pieces)] = len(text)
	tokenAt := func(off int) int { // the token holding byte off
		lo, hi := 0, len(pieces)-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if start[mid] <= off {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	last := map[string]int{} // identifier -> token of its latest occurrence
	var probes []int
	for _, m := range identRE.FindAllIndex(text, -1) {
		a, b := m[0], m[1]
		// Whole identifiers only: not a suffix of a longer word split oddly.
		name := string(text[a:b])
		first := tokenAt(a)
		prev, seen := last[name]
		last[name] = first
		if len(name) < MinReuseIdent || !seen || first-prev < minGap {
			continue
		}
		for t := first + 1; t < len(pieces) && start[t+1] <= b; t++ {
			if start[t] > a && start[t] < start[t+1] {
				probes = append(probes, t)
			}
		}
	}
	return probes
}

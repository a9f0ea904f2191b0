package tokenizer

import (
	"sort"
	"sync"
	"unicode/utf8"
)

//go:generate sh -c "python3 gen_unorm.py && gofmt -w unorm_tables.go"

// Unicode normalization forms (UAX #15) for the NFC, NFD, NFKC and NFKD
// normalizers: full decomposition (canonical, or compatibility too), the
// canonical ordering of combining marks, then, for NFC and NFKC, canonical
// composition. The tables in unorm_tables.go are generated; they are turned
// into maps on first use so that tokenizers without such a normalizer pay
// nothing.

// Hangul syllable arithmetic (Unicode §3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

type unormData struct {
	canon  map[rune]string // one-level canonical decompositions
	compat map[rune]string // one-level compatibility decompositions
	comp   map[uint64]rune // primary composites by pair
}

var (
	unormOnce sync.Once
	unorm     unormData
)

func unormTables() *unormData {
	unormOnce.Do(func() {
		unorm.canon = make(map[rune]string)
		unorm.compat = make(map[rune]string)
		for _, d := range decompositions {
			if d.compat {
				unorm.compat[d.r] = d.d
			} else {
				unorm.canon[d.r] = d.d
			}
		}
		unorm.comp = make(map[uint64]rune, len(compositions))
		for _, c := range compositions {
			unorm.comp[pairKey(c[0], c[1])] = c[2]
		}
	})
	return &unorm
}

// combiningClass returns the canonical combining class of r.
func combiningClass(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	i := sort.Search(len(cccRanges), func(i int) bool { return cccRanges[i][1] >= r })
	if i < len(cccRanges) && cccRanges[i][0] <= r {
		return uint8(cccRanges[i][2])
	}
	return 0
}

// decomposeRune appends the full decomposition of r.
func (u *unormData) decomposeRune(dst []rune, r rune, compat bool) []rune {
	if s := r - hangulSBase; s >= 0 && s < hangulSCount {
		dst = append(dst, hangulLBase+s/hangulNCount, hangulVBase+(s%hangulNCount)/hangulTCount)
		if t := s % hangulTCount; t != 0 {
			dst = append(dst, hangulTBase+t)
		}
		return dst
	}
	d, ok := u.canon[r]
	if !ok && compat {
		d, ok = u.compat[r]
	}
	if !ok {
		return append(dst, r)
	}
	for _, c := range d {
		dst = u.decomposeRune(dst, c, compat)
	}
	return dst
}

// normalizeUnicode returns s in NFD, NFC, NFKD or NFKC.
func normalizeUnicode(s string, compat, compose bool) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	u := unormTables()
	rs := make([]rune, 0, len(s))
	for _, r := range s {
		rs = u.decomposeRune(rs, r, compat)
	}
	// Canonical ordering: stable sort of each run of non-starters by class.
	for i := 0; i < len(rs); {
		if combiningClass(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && combiningClass(rs[j]) != 0 {
			j++
		}
		run := rs[i:j]
		sort.SliceStable(run, func(a, b int) bool { return combiningClass(run[a]) < combiningClass(run[b]) })
		i = j
	}
	if compose {
		rs = u.compose(rs)
	}
	return string(rs)
}

// compose is the canonical composition algorithm: each character is combined
// with the last starter when nothing between them blocks it.
func (u *unormData) compose(rs []rune) []rune {
	if len(rs) == 0 {
		return rs
	}
	out := rs[:1]
	starter := -1
	if combiningClass(rs[0]) == 0 {
		starter = 0
	}
	lastClass := -1 // class of the last character kept after the starter
	if starter < 0 {
		lastClass = int(combiningClass(rs[0]))
	}
	for _, c := range rs[1:] {
		cc := int(combiningClass(c))
		if starter >= 0 {
			blocked := lastClass != -1 && (lastClass == 0 || lastClass >= cc)
			if !blocked {
				if p, ok := u.composePair(out[starter], c); ok {
					out[starter] = p
					continue
				}
			}
		}
		if cc == 0 {
			starter = len(out)
			lastClass = -1
		} else {
			lastClass = cc
		}
		out = append(out, c)
	}
	return out
}

func (u *unormData) composePair(a, b rune) (rune, bool) {
	// Hangul L+V and LV+T.
	if l := a - hangulLBase; l >= 0 && l < hangulLCount {
		if v := b - hangulVBase; v >= 0 && v < hangulVCount {
			return hangulSBase + (l*hangulVCount+v)*hangulTCount, true
		}
	}
	if s := a - hangulSBase; s >= 0 && s < hangulSCount && s%hangulTCount == 0 {
		if t := b - hangulTBase; t > 0 && t < hangulTCount {
			return a + t, true
		}
	}
	r, ok := u.comp[pairKey(a, b)]
	return r, ok
}

// isCombiningMark reports whether r is one of combiningMarks.
func isCombiningMark(r rune) bool {
	if r < 0x300 {
		return false
	}
	i := sort.Search(len(combiningMarks), func(i int) bool { return combiningMarks[i][1] >= r })
	return i < len(combiningMarks) && combiningMarks[i][0] <= r
}

package main

import (
	"fmt"
	"slices"
	"sort"
	"unicode"
	"unicode/utf8"
)

// Character classes of the GPT-2 pre-tokenizer regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// which the ByteLevel pre-tokenizer (use_regex: true) of tokenizer.json
// applies. splitWords is the trainer's own scanner of that regex; prepare
// checks that the tokenizer package, which has its own, encodes the same.
const (
	clsLetter = iota
	clsNumber
	clsSpace
	clsOther
)

func classOf(r rune) int {
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// runEnd returns the end of the run of class c starting at i.
func runEnd(s string, i, c int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if classOf(r) != c {
			break
		}
		i += n
	}
	return i
}

// splitWords appends the pieces of s under the GPT-2 regex to dst.
func splitWords(s string, dst []string) []string {
	for i := 0; i < len(s); {
		j := matchAt(s, i)
		dst = append(dst, s[i:j])
		i = j
	}
	return dst
}

func matchAt(s string, i int) int {
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	c := classOf(r)
	if r == ' ' && i+1 < len(s) {
		r2, n2 := utf8.DecodeRuneInString(s[i+1:])
		if c2 := classOf(r2); c2 != clsSpace {
			return runEnd(s, i+1+n2, c2)
		}
	}
	if c != clsSpace {
		return runEnd(s, i+n, c)
	}
	// \s+(?!\S)|\s+: a whitespace run followed by a non-space gives up its
	// last character to the next piece (" foo"), unless it is one character.
	end := runEnd(s, i+n, clsSpace)
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// byteToRune is GPT-2's bytes_to_unicode: printable bytes stand for
// themselves, the others for U+0100 onwards, so every token is printable.
// byteOrder lists the bytes in the order of that table (printable first),
// the order of the byte tokens in the vocabulary.
var byteToRune, byteOrder = func() ([256]rune, []byte) {
	var m [256]rune
	var order []byte
	seen := [256]bool{}
	for _, rg := range [][2]int{{'!', '~'}, {0xA1, 0xAC}, {0xAE, 0xFF}} {
		for b := rg[0]; b <= rg[1]; b++ {
			m[b], seen[b] = rune(b), true
			order = append(order, byte(b))
		}
	}
	n := 0
	for b := range 256 {
		if !seen[b] {
			m[b] = rune(256 + n)
			n++
			order = append(order, byte(b))
		}
	}
	return m, order
}()

// tokenString returns the byte-level (printable) spelling of raw bytes.
func tokenString(raw []byte) string {
	rs := make([]rune, len(raw))
	for i, b := range raw {
		rs[i] = byteToRune[b]
	}
	return string(rs)
}

// bpeModel is a trained byte-level BPE: token ids after the specials are
// the 256 bytes (in byteOrder), then one token per merge.
type bpeModel struct {
	specials []string
	tokens   [][]byte         // raw bytes of every non-special token, by id-len(specials)
	merges   [][2]int32       // merge i makes token id firstMerge+i
	rank     map[uint64]int32 // pair -> merge index
	byteID   [256]int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// trainBPE learns vocab-len(specials)-256 merges from word counts. Ties in
// pair count are broken by the smaller pair key, so training is
// deterministic.
func trainBPE(counts map[string]int64, vocab int, specials []string) (*bpeModel, error) {
	nMerges := vocab - len(specials) - 256
	if nMerges < 0 {
		return nil, fmt.Errorf("vocab %d is smaller than %d specials + 256 bytes", vocab, len(specials))
	}
	m := &bpeModel{specials: specials, rank: map[uint64]int32{}}
	base := int32(len(specials))
	for i, b := range byteOrder {
		m.byteID[b] = base + int32(i)
		m.tokens = append(m.tokens, []byte{b})
	}
	// Words in a fixed order, for determinism.
	keys := make([]string, 0, len(counts))
	for w := range counts {
		keys = append(keys, w)
	}
	sort.Strings(keys)
	type word struct {
		syms  []int32
		count int64
	}
	words := make([]word, len(keys))
	pairCount := map[uint64]int64{}
	where := map[uint64][]int32{}
	for wi, k := range keys {
		syms := make([]int32, len(k))
		for i := range len(k) {
			syms[i] = m.byteID[k[i]]
		}
		words[wi] = word{syms, counts[k]}
		for i := 0; i+1 < len(syms); i++ {
			p := pairKey(syms[i], syms[i+1])
			pairCount[p] += counts[k]
			where[p] = append(where[p], int32(wi))
		}
	}
	stamp := make([]int32, len(words))
	for i := range stamp {
		stamp[i] = -1
	}
	for it := range nMerges {
		var best uint64
		var bestN int64
		for p, n := range pairCount {
			if n > bestN || (n == bestN && p < best) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			return nil, fmt.Errorf("corpus too small: only %d merges before pairs ran out", it)
		}
		a, b := int32(best>>32), int32(uint32(best))
		id := base + int32(len(m.tokens))
		m.tokens = append(m.tokens, slices.Concat(m.tokens[a-base], m.tokens[b-base]))
		m.merges = append(m.merges, [2]int32{a, b})
		m.rank[best] = int32(it)
		for _, wi := range where[best] {
			if stamp[wi] == int32(it) {
				continue
			}
			stamp[wi] = int32(it)
			w := &words[wi]
			if len(w.syms) < 2 {
				continue
			}
			for i := 0; i+1 < len(w.syms); i++ {
				p := pairKey(w.syms[i], w.syms[i+1])
				if pairCount[p] -= w.count; pairCount[p] == 0 {
					delete(pairCount, p)
				}
			}
			out := w.syms[:0]
			for i := 0; i < len(w.syms); i++ {
				if i+1 < len(w.syms) && w.syms[i] == a && w.syms[i+1] == b {
					out = append(out, id)
					i++
				} else {
					out = append(out, w.syms[i])
				}
			}
			w.syms = out
			for i := 0; i+1 < len(w.syms); i++ {
				p := pairKey(w.syms[i], w.syms[i+1])
				pairCount[p] += w.count
				if p2 := where[p]; len(p2) == 0 || p2[len(p2)-1] != int32(wi) {
					where[p] = append(p2, int32(wi))
				}
			}
		}
		delete(where, best)
		delete(pairCount, best)
	}
	return m, nil
}

// encodeWord is the trainer's own BPE encoding of one pre-tokenized piece:
// repeatedly merge the adjacent pair of lowest merge rank (leftmost first).
func (m *bpeModel) encodeWord(w string, dst []int) []int {
	syms := make([]int32, len(w))
	for i := range len(w) {
		syms[i] = m.byteID[w[i]]
	}
	base := int32(len(m.specials))
	for len(syms) > 1 {
		bestR, bestI := int32(-1), -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := m.rank[pairKey(syms[i], syms[i+1])]; ok && (bestR < 0 || r < bestR) {
				bestR, bestI = r, i
			}
		}
		if bestI < 0 {
			break
		}
		syms[bestI] = base + 256 + bestR
		syms = slices.Delete(syms, bestI+1, bestI+2)
	}
	for _, s := range syms {
		dst = append(dst, int(s))
	}
	return dst
}

// encode is the trainer's own encoding of text (no specials).
func (m *bpeModel) encode(text string) []int {
	var ids []int
	for _, w := range splitWords(text, nil) {
		ids = m.encodeWord(w, ids)
	}
	return ids
}

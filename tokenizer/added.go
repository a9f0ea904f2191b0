package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's "added_tokens": a token matched
// in the raw text before the model runs (HF AddedToken).
type AddedToken struct {
	ID         int    // token id
	Content    string // text of the token, e.g. "<|eot_id|>"
	Special    bool   // a control token: skipped by DecodeOptions.SkipSpecial (unless normalized into another string), kept as text by SpecialAsText
	LStrip     bool   // the match swallows the whitespace on its left
	RStrip     bool   // the match swallows the whitespace on its right
	SingleWord bool   // only matches when not inside a word
	Normalized bool   // matched against the normalized text instead of the raw text
}

// addedVocab matches added tokens in text: AddedVocabulary::find_matches,
// leftmost-longest over a byte trie, one trie for tokens matched in the raw
// text and one for tokens matched in the normalized text.
type addedVocab struct {
	tokens  []AddedToken     // in file order
	byID    map[int32]int    // id -> index in tokens
	content map[string]int32 // content -> id
	raw     *trie            // normalized == false
	norm    *trie            // normalized == true, on normalized contents
	// decodeAs is the string Decode uses for an added token: its normalized
	// content for normalized tokens (HF simple_id_to_token).
	decodeAs map[int32]string
}

// trie is a byte trie; value >= 0 marks the end of a token.
type trie struct {
	nodes []trieNode
	first [256]bool // bytes that start some token
}

type trieNode struct {
	next  map[byte]int32
	value int32 // token id, or -1
}

func newTrie() *trie {
	return &trie{nodes: []trieNode{{value: -1}}}
}

func (t *trie) insert(s string, id int32) {
	if s == "" {
		return
	}
	t.first[s[0]] = true
	n := int32(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		nx, ok := t.nodes[n].next[c]
		if !ok {
			if t.nodes[n].next == nil {
				t.nodes[n].next = make(map[byte]int32, 1)
			}
			nx = int32(len(t.nodes))
			t.nodes[n].next[c] = nx
			t.nodes = append(t.nodes, trieNode{value: -1})
		}
		n = nx
	}
	t.nodes[n].value = id
}

// longestAt returns the id and end of the longest token starting at i.
func (t *trie) longestAt(s string, i int) (id int32, end int) {
	id, end = -1, -1
	n := int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := t.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if v := t.nodes[n].value; v >= 0 {
			id, end = v, j+1
		}
	}
	return id, end
}

// protectFunc reports whether the byte range [start, end) of the text may not
// be matched as a special token (SpecialAsText, or a chat message body).
type protectFunc func(start, end int) bool

// split appends the pieces of p: added tokens found by t, and the text
// between them. It implements find_matches with lstrip, rstrip and
// single_word; after a rejected match the search resumes at its end, as the
// reference's non-overlapping leftmost iterator does.
func (av *addedVocab) split(t *trie, p piece, base int, protect protectFunc, dst []piece) []piece {
	s := p.s
	startOffset := 0
	for i := 0; i < len(s); {
		if !t.first[s[i]] {
			i++
			continue
		}
		id, end := t.longestAt(s, i)
		if id < 0 {
			i++
			continue
		}
		start := i
		i = end
		tok := &av.tokens[av.byID[id]]
		if tok.Special && protect != nil && protect(base+start, base+end) {
			continue
		}
		if tok.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := end == len(s) || !startsWithWord(s[end:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.LStrip {
			ns := start
			for ns > 0 {
				r, n := utf8.DecodeLastRuneInString(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= n
			}
			start = max(ns, startOffset)
		}
		if tok.RStrip {
			for end < len(s) {
				r, n := utf8.DecodeRuneInString(s[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += n
			}
		}
		if startOffset < start {
			dst = append(dst, piece{s: s[startOffset:start], id: -1, first: p.first && startOffset == 0})
		}
		dst = append(dst, piece{s: s[start:end], id: id})
		startOffset = end
		if i < end {
			i = end
		}
	}
	if startOffset < len(s) {
		dst = append(dst, piece{s: s[startOffset:], id: -1, first: p.first && startOffset == 0})
	}
	return dst
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isRustWord(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isRustWord(r)
}

// isRustWord is \w of Rust's regex crate, which HF's added vocabulary uses
// for single_word (not Oniguruma's \w, isWord): Alphabetic (letters, letter
// numbers, Other_Alphabetic), marks, decimal digits, connector punctuation
// and Join_Control (ZWNJ, ZWJ); unlike Oniguruma's, not Latin-1's ¹²³¼½¾.
func isRustWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
	}
	return isLetter(r) || unicode.IsMark(r) || unicode.In(r, unicode.Nd, unicode.Nl, unicode.Pc,
		unicode.Other_Alphabetic, unicode.Join_Control)
}

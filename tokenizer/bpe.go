package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpe is the HF "BPE" model (tokenizers/src/models/bpe): a word is split into
// characters, each looked up in the vocabulary (with byte fallback or the unk
// token when absent), then adjacent pairs are merged lowest rank first until no
// merge applies. The merge order, the tie-break on position and the handling
// of stale queue entries follow word.rs's merge_all exactly, so the ids are
// those of the reference even when several merges produce the same token.
type bpe struct {
	vocab  map[string]int32
	merges map[uint64]bpeMerge // key: pairKey(left, right)

	unk          int32 // id of unk_token, or -1
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	byteIDs      [256]int32

	cache bpeCache
}

// bpeMerge is the rank of a merge (its index in the merges list) and the id
// of the token it produces.
type bpeMerge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Word cache. HF keeps the first 10,000 words shorter than 256 bytes and
// then stops inserting; we keep the first 65,536 (a few MB), which holds the
// working vocabulary of large texts (heldout.txt has 26k distinct words) and
// bounds memory on long-running servers.
const (
	bpeCacheWords    = 1 << 16
	bpeCacheMaxBytes = 256
)

type bpeCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func (c *bpeCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *bpeCache) put(w string, ids []int32) {
	if len(w) >= bpeCacheMaxBytes {
		return
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[string][]int32, 1024)
	}
	if len(c.m) < bpeCacheWords {
		c.m[strings.Clone(w)] = ids
	}
	c.mu.Unlock()
}

// parseBPE decodes the "model" object of tokenizer.json.
func parseBPE(o jobject) (*bpe, error) {
	m := &bpe{unk: -1}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	var err error
	if d := o.get("dropout"); !d.isNull() {
		// Dropout makes encoding random and is a training device; HF skips it
		// when it is 0 and inference wants the deterministic ids, so any
		// value is accepted and ignored (documented in doc.go).
		var f float64
		if err := jsonNumber(d, &f); err != nil {
			return nil, err
		}
		if !(f >= 0 && f <= 1) {
			return nil, d.errorf("dropout %g is not in [0, 1]", f)
		}
	}
	unkTok, err := o.get("unk_token").strOr("")
	if err != nil {
		return nil, err
	}
	if m.prefix, err = o.get("continuing_subword_prefix").strOr(""); err != nil {
		return nil, err
	}
	if m.suffix, err = o.get("end_of_word_suffix").strOr(""); err != nil {
		return nil, err
	}
	if m.fuseUnk, err = o.get("fuse_unk").boolOr(false); err != nil {
		return nil, err
	}
	if m.byteFallback, err = o.get("byte_fallback").boolOr(false); err != nil {
		return nil, err
	}
	if m.ignoreMerges, err = o.get("ignore_merges").boolOr(false); err != nil {
		return nil, err
	}

	if m.vocab, err = parseVocab(o.get("vocab")); err != nil {
		return nil, err
	}
	if unkTok != "" {
		// HF fails at the first unknown character when unk_token is not in
		// the vocabulary; we fail at load time, which is clearer.
		id, ok := m.vocab[unkTok]
		if !ok {
			return nil, o.get("unk_token").errorf("unk_token %q is not in model.vocab", unkTok)
		}
		m.unk = id
	}
	for b := 0; b < 256; b++ {
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}

	mn := o.get("merges")
	if mn.isNull() {
		return nil, mn.errorf("missing (BPE needs vocab and merges)")
	}
	if err := m.parseMergesFast(mn); err == nil {
		return m, nil
	}
	// Slow path, for the error message.
	list, err := mn.array()
	if err != nil {
		return nil, err
	}
	m.merges = make(map[uint64]bpeMerge, len(list))
	rank := 0
	for _, e := range list {
		var a, b string
		if len(e.raw) > 0 && e.raw[0] == '"' {
			// Legacy form "a b": exactly one space separates the halves.
			s, err := e.str()
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(s, "#version") {
				continue
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return nil, e.errorf("merge %q is not two tokens separated by one space", s)
			}
			a, b = parts[0], parts[1]
		} else {
			pair, err := e.array()
			if err != nil {
				return nil, e.errorf(`want "a b" or ["a", "b"], got %s`, e.kind())
			}
			if len(pair) != 2 {
				return nil, e.errorf("merge has %d elements, want 2", len(pair))
			}
			if a, err = pair[0].str(); err != nil {
				return nil, err
			}
			if b, err = pair[1].str(); err != nil {
				return nil, err
			}
		}
		aid, ok := m.vocab[a]
		if !ok {
			return nil, e.errorf("merge token %q is not in model.vocab", a)
		}
		bid, ok := m.vocab[b]
		if !ok {
			return nil, e.errorf("merge token %q is not in model.vocab", b)
		}
		bb := b
		if m.prefix != "" {
			if !strings.HasPrefix(b, m.prefix) {
				// HF slices the prefix off unconditionally (and would cut a
				// character in half); such a file is broken.
				return nil, e.errorf("merge token %q does not start with continuing_subword_prefix %q", b, m.prefix)
			}
			bb = b[len(m.prefix):]
		}
		nid, ok := m.vocab[a+bb]
		if !ok {
			return nil, e.errorf("merged token %q is not in model.vocab", a+bb)
		}
		// A repeated pair keeps its last rank, as HF's map collection does.
		m.merges[pairKey(aid, bid)] = bpeMerge{rank: int32(rank), id: nid}
		rank++
	}
	return m, nil
}

// parseVocab decodes model.vocab. The common case is decoded in one call;
// on any problem the entries are checked one by one to name the bad one.
func parseVocab(n jnode) (map[string]int32, error) {
	if t := bytes.TrimSpace(n.raw); n.valid && len(t) > 0 && t[0] == '{' {
		if v, ok := fastVocab(t); ok {
			return v, nil
		}
	}
	var fast map[string]int64
	if err := json.Unmarshal(n.raw, &fast); err == nil && fast != nil {
		ok := true
		v := make(map[string]int32, len(fast))
		for tok, id := range fast {
			if id < 0 || id > maxTokenID {
				ok = false
				break
			}
			v[tok] = int32(id)
		}
		if ok {
			return v, nil
		}
	}
	vo, err := n.object()
	if err != nil {
		return nil, err
	}
	v := make(map[string]int32, len(vo.m))
	for tok := range vo.m {
		id, err := vo.get(tok).integer(maxTokenID)
		if err != nil {
			return nil, err
		}
		v[tok] = int32(id)
	}
	return v, nil
}

// parseMergesFast decodes the merges list in its two usual forms in one
// pass (fastMerges over a valid file, encoding/json otherwise); it returns
// an error for anything unusual, and parseBPE then takes the slow path that
// names the offending entry. Each merge's three tokens are looked up by
// their bytes (no string made for them).
func (m *bpe) parseMergesFast(n jnode) error {
	raw := bytes.TrimSpace(n.raw)
	merges := make(map[uint64]bpeMerge, len(raw)/16)
	prefix := []byte(m.prefix)
	var joined []byte
	rank := 0 // the entry's place: a repeated pair keeps its last, as in parseBPE
	add := func(a, b []byte) bool {
		aid, ok1 := m.vocab[string(a)]
		bid, ok2 := m.vocab[string(b)]
		if !ok1 || !ok2 || !bytes.HasPrefix(b, prefix) {
			return false
		}
		joined = append(append(joined[:0], a...), b[len(prefix):]...)
		nid, ok := m.vocab[string(joined)]
		if !ok {
			return false
		}
		merges[pairKey(aid, bid)] = bpeMerge{rank: int32(rank), id: nid}
		rank++
		return true
	}
	if len(raw) > 0 && raw[0] == '[' && n.valid {
		if !fastMerges(raw, add) {
			return errBadMerge
		}
		m.merges = merges
		return nil
	}
	var legacy []string
	var pairs [][2]string
	if err := json.Unmarshal(raw, &legacy); err == nil {
		for _, s := range legacy {
			if strings.HasPrefix(s, "#version") {
				continue
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return errBadMerge
			}
			pairs = append(pairs, [2]string{a, b})
		}
	} else {
		var list [][]string
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		for _, p := range list {
			if len(p) != 2 {
				return errBadMerge
			}
			pairs = append(pairs, [2]string{p[0], p[1]})
		}
	}
	for _, p := range pairs {
		if !add([]byte(p[0]), []byte(p[1])) {
			return errBadMerge
		}
	}
	m.merges = merges
	return nil
}

var errBadMerge = errors.New("bad merge")

func jsonNumber(n jnode, f *float64) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(string(n.raw)), 64)
	if err != nil {
		return n.errorf("want a number, got %s", n.kind())
	}
	*f = v
	return nil
}

// tokenize appends the ids of one pre-tokenized word to dst.
func (m *bpe) tokenize(w string, dst []int32) []int32 {
	if w == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(dst, id)
		}
	}
	if ids, ok := m.cache.get(w); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = m.mergeWord(w, dst)
	ids := make([]int32, len(dst)-start)
	copy(ids, dst[start:])
	m.cache.put(w, ids)
	return dst
}

// symbol is one node of the doubly linked list of word.rs.
type symbol struct {
	id         int32
	prev, next int32 // indices, -1 at the ends
	size       int32 // bytes of the word covered; 0 once merged away
}

// mergeItem is a queued merge; the queue pops the lowest (rank, pos).
type mergeItem struct {
	rank, pos, id int32
}

func (a mergeItem) less(b mergeItem) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

type mergeHeap []mergeItem

func (h *mergeHeap) push(x mergeItem) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() mergeItem {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s[r].less(s[l]) {
			c = r
		}
		if !s[c].less(s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// addSymbol appends a symbol to the linked list.
func addSymbol(syms []symbol, id int32, size int) []symbol {
	n := int32(len(syms))
	if n > 0 {
		syms[n-1].next = n
	}
	return append(syms, symbol{id: id, prev: n - 1, next: -1, size: int32(size)})
}

// mergeWord runs merge_word of model.rs: initial symbols, then merge_all.
func (m *bpe) mergeWord(w string, dst []int32) []int32 {
	var symBuf [64]symbol
	syms := symBuf[:0]
	if len(w) > len(symBuf) {
		// A long word (a run of spaces, a minified line) gets its symbols
		// in one allocation, a character each (byte fallback may add
		// more), instead of append's growth: 4 MiB of spaces allocated
		// ~5x its final symbols that way.
		syms = make([]symbol, 0, utf8.RuneCountInString(w))
	}
	unkID, unkLen := int32(-1), 0
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRuneInString(w[i:])
		s := w[i : i+size]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+size == len(w) && m.suffix != "" {
			s += m.suffix
		}
		i += size
		if id, ok := m.vocab[s]; ok {
			if unkID >= 0 {
				syms = addSymbol(syms, unkID, unkLen)
				unkID = -1
			}
			syms = addSymbol(syms, id, size)
			continue
		}
		if m.byteFallback {
			all := true
			for j := 0; j < len(s); j++ {
				if m.byteIDs[s[j]] < 0 {
					all = false
					break
				}
			}
			if all {
				// As in HF, a pending unk is not flushed here: it stays
				// pending and lands after these byte tokens.
				for j := 0; j < len(s); j++ {
					syms = addSymbol(syms, m.byteIDs[s[j]], 1)
				}
				continue
			}
		}
		if m.unk >= 0 {
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkLen += size
			case unkID >= 0:
				syms = addSymbol(syms, unkID, unkLen)
				unkID, unkLen = m.unk, size
			default:
				unkID, unkLen = m.unk, size
			}
		}
		// Without unk_token nor byte fallback the character is dropped,
		// exactly as the reference does.
	}
	if unkID >= 0 {
		syms = addSymbol(syms, unkID, unkLen)
	}

	if len(syms) > 1 && len(m.merges) > 0 {
		var heapBuf [64]mergeItem
		q := mergeHeap(heapBuf[:0])
		if len(syms) > len(heapBuf) {
			q = make(mergeHeap, 0, len(syms)) // at most a pair a symbol to start with
		}
		for i := 0; i+1 < len(syms); i++ {
			if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
				q.push(mergeItem{rank: mg.rank, pos: int32(i), id: mg.id})
			}
		}
		for len(q) > 0 {
			top := q.pop()
			cur := &syms[top.pos]
			if cur.size == 0 || cur.next < 0 {
				continue
			}
			nextPos := cur.next
			right := syms[nextPos]
			mg, ok := m.merges[pairKey(cur.id, right.id)]
			if !ok || mg.id != top.id {
				continue // stale entry
			}
			cur.id = top.id
			cur.size += right.size
			cur.next = right.next
			syms[nextPos].size = 0
			if right.next >= 0 {
				syms[right.next].prev = top.pos
			}
			if cur.prev >= 0 {
				if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
					q.push(mergeItem{rank: mg.rank, pos: cur.prev, id: mg.id})
				}
			}
			if cur.next >= 0 {
				if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
					q.push(mergeItem{rank: mg.rank, pos: top.pos, id: mg.id})
				}
			}
		}
	}
	for _, s := range syms {
		if s.size != 0 {
			dst = append(dst, s.id)
		}
	}
	return dst
}

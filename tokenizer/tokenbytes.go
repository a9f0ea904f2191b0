package tokenizer

import "strings"

// TokenBytes returns the bytes token id adds to a decoded text when it
// comes after other tokens (a Metaspace token's leading space included), as
// raw bytes: a byte-level token that ends inside a UTF-8 character, or a
// byte-fallback token ("<0xE6>"), gives its bytes rather than U+FFFD. It
// returns nil for special tokens (which decoding with SkipSpecial drops)
// and for ids without a token. Constrained decoding (package constrain)
// matches these bytes against its grammar.
func (t *Tokenizer) TokenBytes(id int) []byte {
	s, ok := t.decodeToken(id, true)
	if !ok {
		return nil
	}
	_, added := t.added.byID[int32(id)]
	if !added {
		if hasDecoder(t.dec, func(d decoder) bool { _, ok := d.(byteLevelDec); return ok }) {
			return byteLevelBytes(nil, s)
		}
		if b, ok := parseByteToken(s); ok && hasDecoder(t.dec, func(d decoder) bool { _, ok := d.(byteFallbackDec); return ok }) {
			return []byte{b}
		}
	}
	// Any other decoder: what the token adds after a copy of itself.
	one := t.DecodeWith([]int{id}, DecodeOptions{SkipSpecial: true})
	two := t.DecodeWith([]int{id, id}, DecodeOptions{SkipSpecial: true})
	if !strings.HasPrefix(two, one) {
		return []byte(one)
	}
	return []byte(two[len(one):])
}

// hasDecoder reports whether d or a decoder of its sequence satisfies f.
func hasDecoder(d decoder, f func(decoder) bool) bool {
	if seq, ok := d.(sequenceDec); ok {
		for _, x := range seq {
			if hasDecoder(x, f) {
				return true
			}
		}
		return false
	}
	return d != nil && f(d)
}

package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder is one HF decoder: Decoder::decode_chain, a map from the list of
// token strings to a list of strings, which Decode finally joins.
type decoder interface {
	decodeChain(tokens []string) []string
}

// byteLevelDec is the ByteLevel decoder: every token's characters back to
// bytes, all tokens concatenated, invalid UTF-8 replaced by U+FFFD.
type byteLevelDec struct{}

func (byteLevelDec) decodeChain(tokens []string) []string {
	var b []byte
	for _, t := range tokens {
		b = byteLevelBytes(b, t)
	}
	if utf8.Valid(b) {
		return []string{string(b)}
	}
	return []string{string(appendLossy(nil, b))}
}

// metaspaceDec is the Metaspace decoder: the replacement character becomes a
// space, except in the first token when a prefix was prepended at encoding.
type metaspaceDec struct {
	replacement rune
	prepend     prependScheme
}

func (m metaspaceDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		if i == 0 && m.prepend != prependNever {
			out[i] = strings.ReplaceAll(t, string(m.replacement), "")
		} else {
			out[i] = strings.ReplaceAll(t, string(m.replacement), " ")
		}
	}
	return out
}

// byteFallbackDec is ByteFallback: runs of "<0xXX>" tokens become the bytes
// they name when those form valid UTF-8, else one U+FFFD per byte.
type byteFallbackDec struct{}

func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(t[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}

func (byteFallbackDec) decodeChain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range tokens {
		if b, ok := parseByteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// fuseDec is Fuse: all tokens joined into one.
type fuseDec struct{}

func (fuseDec) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDec is Strip: up to start leading and stop trailing occurrences of
// content removed from every token.
type stripDec struct {
	content     rune
	start, stop int
}

func (s stripDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rs := []rune(t)
		lo := 0
		for lo < s.start && lo < len(rs) && rs[lo] == s.content {
			lo++
		}
		hi := len(rs)
		for k := 0; k < s.stop && hi > lo && rs[hi-1] == s.content; k++ {
			hi--
		}
		out[i] = string(rs[lo:hi])
	}
	return out
}

// replaceDec is the Replace decoder: pattern matches become content.
type replaceDec struct {
	m       matcher
	content string
}

func (r *replaceDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = replaceAll(r.m, t, r.content)
	}
	return out
}

// bpeDec is BPEDecoder: the end-of-word suffix becomes a space, except on
// the last token, where it is dropped.
type bpeDec struct{ suffix string }

func (d bpeDec) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rep := " "
		if i == len(tokens)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

// sequenceDec runs decoders in order.
type sequenceDec []decoder

func (seq sequenceDec) decodeChain(tokens []string) []string {
	for _, d := range seq {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// parseDecoder decodes the "decoder" field (non-null).
func parseDecoder(n jnode, depth int) (decoder, error) {
	o, typ, err := openComponent(n, depth)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "Metaspace":
		ms, err := parseMetaspace(o)
		if err != nil {
			return nil, err
		}
		return metaspaceDec{replacement: ms.replacement, prepend: ms.prepend}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		c, err := o.get("content").str()
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(c) != 1 {
			return nil, o.get("content").errorf("want one character, got %q", c)
		}
		r, _ := utf8.DecodeRuneInString(c)
		start, err := o.get("start").integerOr(0, maxTokenID)
		if err != nil {
			return nil, err
		}
		stop, err := o.get("stop").integerOr(0, maxTokenID)
		if err != nil {
			return nil, err
		}
		return stripDec{content: r, start: start, stop: stop}, nil
	case "Replace":
		m, c, err := parseReplace(o)
		if err != nil {
			return nil, err
		}
		return &replaceDec{m: m, content: c}, nil
	case "BPEDecoder":
		s, err := o.get("suffix").strOr("</w>")
		if err != nil {
			return nil, err
		}
		return bpeDec{suffix: s}, nil
	case "Sequence":
		seq, err := parseList(o, "decoders", depth, parseDecoder)
		return sequenceDec(seq), err
	}
	return nil, o.get("type").wrap(unsupported("decoder", typ,
		"ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder, Sequence"))
}

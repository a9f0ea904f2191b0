package tokenizer

import "strings"

// DecodeStream turns generated ids into text one token at a time. It emits
// text only once it is complete UTF-8: a character split over several
// byte tokens ("<0xE2>", "<0x82>", "<0xAC>" for "€", or a byte-level token
// ending in the middle of a character) comes out whole, with the last of
// its tokens. Decoders that treat the first token specially (Metaspace and
// SentencePiece's Strip drop its leading space) are handled by decoding a
// window of recent tokens and emitting only what the new token added, the
// algorithm of HF's DecodeStream (tokenizers/src/tokenizer/mod.rs).
//
// Text that ends in U+FFFD is held back, since it may be a character still
// incomplete; when it is not (the model produced invalid bytes, or a real
// U+FFFD), it comes out with the next token that ends in anything else, or
// from Flush at the end of the sequence.
//
// A DecodeStream is not safe for concurrent use; use one per sequence.
type DecodeStream struct {
	t           *Tokenizer
	opts        DecodeOptions
	ids         []int
	prefix      string
	prefixIndex int
}

// NewDecodeStream returns a stream decoder for one generated sequence.
func (t *Tokenizer) NewDecodeStream(opts DecodeOptions) *DecodeStream {
	return &DecodeStream{t: t, opts: opts}
}

// Step adds the next generated id and returns the text it completes, which
// may be "" (an incomplete character, or a skipped special token).
func (s *DecodeStream) Step(id int) string {
	if s.prefix == "" && len(s.ids) > 0 {
		p := s.t.DecodeWith(s.ids, s.opts)
		if !strings.HasSuffix(p, "\uFFFD") {
			s.prefix, s.prefixIndex = p, len(s.ids)
		}
	}
	s.ids = append(s.ids, id)
	str := s.t.DecodeWith(s.ids, s.opts)
	if len(str) <= len(s.prefix) || strings.HasSuffix(str, "\uFFFD") {
		return ""
	}
	var out string
	if strings.HasPrefix(str, s.prefix) {
		out = str[len(s.prefix):]
	} else {
		// The decoder changed text already emitted (HF returns an error
		// here); emit what follows the common part rather than fail.
		k := 0
		for k < len(str) && k < len(s.prefix) && str[k] == s.prefix[k] {
			k++
		}
		out = strings.ToValidUTF8(str[k:], "")
	}
	n := copy(s.ids, s.ids[s.prefixIndex:])
	s.ids = s.ids[:n]
	s.prefix = s.t.DecodeWith(s.ids, s.opts)
	s.prefixIndex = n
	return out
}

// Flush returns the text still held back at the end of a sequence (an
// incomplete character, as U+FFFD) and resets the stream.
func (s *DecodeStream) Flush() string {
	var out string
	if len(s.ids) > s.prefixIndex {
		str := s.t.DecodeWith(s.ids, s.opts)
		if strings.HasPrefix(str, s.prefix) {
			out = str[len(s.prefix):]
		}
	}
	s.ids, s.prefix, s.prefixIndex = s.ids[:0], "", 0
	return out
}

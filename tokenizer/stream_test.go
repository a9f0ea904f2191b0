package tokenizer

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// streamAll feeds ids one by one and returns the chunks and the flush.
func streamAll(tok *Tokenizer, ids []int, opts DecodeOptions) (chunks []string, flush string) {
	s := tok.NewDecodeStream(opts)
	for _, id := range ids {
		chunks = append(chunks, s.Step(id))
	}
	return chunks, s.Flush()
}

func byteIDs(t *testing.T, tok *Tokenizer, bs ...byte) []int {
	t.Helper()
	var ids []int
	for _, b := range bs {
		id, ok := tok.TokenToID(byteToken(b))
		if !ok {
			t.Fatalf("no byte token for %#x", b)
		}
		ids = append(ids, id)
	}
	return ids
}

func byteToken(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

// TestDecodeStream checks the token-by-token output on the cases that break
// naive streaming.
func TestDecodeStream(t *testing.T) {
	spm := loadFixture(t, "llama2_spm")
	a, _ := spm.TokenToID("a")
	euro := byteIDs(t, spm, 0xE2, 0x82, 0xAC)

	// "€" as three byte-fallback tokens comes out whole with the last one.
	chunks, flush := streamAll(spm, append(append([]int{a}, euro...), a), DecodeOptions{})
	if want := []string{"a", "", "", "€", "a"}; !equalStrings(chunks, want) || flush != "" {
		t.Errorf("byte fallback: chunks %q flush %q, want %q", chunks, flush, want)
	}

	// An incomplete character at the end comes out of Flush as U+FFFD.
	chunks, flush = streamAll(spm, []int{a, euro[0], euro[1]}, DecodeOptions{})
	if want := []string{"a", "", ""}; !equalStrings(chunks, want) || flush != "\uFFFD\uFFFD" {
		t.Errorf("incomplete: chunks %q flush %q", chunks, flush)
	}

	// Invalid bytes are held until a token completes the text, then come out
	// with it; at the end of a sequence Flush returns them.
	ff := byteIDs(t, spm, 0xFF, 0xFF, 0xFF)
	chunks, flush = streamAll(spm, append(ff, a), DecodeOptions{})
	if want := []string{"", "", "", "\uFFFD\uFFFD\uFFFDa"}; !equalStrings(chunks, want) || flush != "" {
		t.Errorf("invalid bytes: chunks %q flush %q, want %q", chunks, flush, want)
	}
	chunks, flush = streamAll(spm, ff, DecodeOptions{})
	if strings.Join(chunks, "") != "" || flush != "\uFFFD\uFFFD\uFFFD" {
		t.Errorf("invalid bytes at the end: chunks %q flush %q", chunks, flush)
	}

	// SentencePiece: the first token's ▁ is no space (Strip decoder), later
	// ones are.
	ids := spm.Encode("Hello world", false)
	chunks, _ = streamAll(spm, ids, DecodeOptions{})
	if got := strings.Join(chunks, ""); got != "Hello world" || chunks[0] != "" {
		t.Errorf("SentencePiece first token: chunks %q", chunks)
	}

	// Metaspace decoder: same rule, from prepend_scheme.
	ms := loadFixture(t, "mistral_metaspace")
	ids = ms.Encode("Hello world", false)
	chunks, _ = streamAll(ms, ids, DecodeOptions{})
	if got := strings.Join(chunks, ""); got != "Hello world" {
		t.Errorf("Metaspace: chunks %q", chunks)
	}

	// Skipped special tokens produce nothing.
	l3 := loadFixture(t, "llama3_split")
	ids = l3.Encode("<|begin_of_text|>Hi<|eot_id|>", false)
	chunks, _ = streamAll(l3, ids, DecodeOptions{SkipSpecial: true})
	if got := strings.Join(chunks, ""); got != "Hi" || chunks[0] != "" {
		t.Errorf("SkipSpecial: chunks %q", chunks)
	}
}

// TestDecodeStreamMatchesDecode checks on random text, for every fixture and
// the real checkpoint, that the chunks are valid UTF-8 and add up to Decode.
func TestDecodeStreamMatchesDecode(t *testing.T) {
	toks := map[string]*Tokenizer{}
	for _, name := range []string{"gpt2_prefix", "llama3_split", "llama2_spm", "mistral_metaspace", "added_strip", "qwen2_nfc", "zoo_metaspace"} {
		toks[name] = loadFixture(t, name)
	}
	if dir := gocoderDirNoSkip(); dir != "" {
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		toks["gocoder"] = tok
	}
	r := rand.New(rand.NewSource(2))
	for name, tok := range toks {
		for i := 0; i < 300; i++ {
			text := randomText(r, 1+r.Intn(30))
			ids := tok.Encode(text, true)
			for _, skip := range []bool{false, true} {
				opts := DecodeOptions{SkipSpecial: skip}
				chunks, flush := streamAll(tok, ids, opts)
				for _, c := range chunks {
					if !utf8.ValidString(c) {
						t.Fatalf("%s: chunk %q of %q is not valid UTF-8", name, c, text)
					}
				}
				if got, want := strings.Join(chunks, "")+flush, tok.DecodeWith(ids, opts); got != want {
					t.Fatalf("%s: stream of %q (ids %v) = %q, Decode = %q", name, text, ids, got, want)
				}
			}
		}
	}
}

// TestDecodeStreamByteLevel splits an emoji over byte-level tokens of the
// real checkpoint: nothing comes out until the character is complete.
func TestDecodeStreamByteLevel(t *testing.T) {
	tok, err := Load(gocoderDir(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("x 🤗", false)
	if len(ids) < 3 {
		t.Fatalf("want the emoji split over several tokens, got %v", ids)
	}
	chunks, flush := streamAll(tok, ids, DecodeOptions{})
	for i, c := range chunks[:len(chunks)-1] {
		if strings.ContainsRune(c, utf8.RuneError) {
			t.Errorf("chunk %d = %q holds a partial character", i, c)
		}
	}
	if got := strings.Join(chunks, "") + flush; got != "x 🤗" || !strings.HasSuffix(chunks[len(chunks)-1], "🤗") {
		t.Errorf("chunks %q", chunks)
	}
}

// TestConcurrentEncode encodes from several goroutines at once (the word
// cache is shared); run with -race.
func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"llama3_split", "zoo_invert", "qwen2_nfc"} {
		tok := loadFixture(t, name)
		fresh := loadFixture(t, name)
		texts := make([]string, 50)
		want := make([][]int, len(texts))
		r := rand.New(rand.NewSource(3))
		for i := range texts {
			texts[i] = randomText(r, 40)
			want[i] = fresh.Encode(texts[i], true)
		}
		done := make(chan error, 4)
		for g := 0; g < 4; g++ {
			go func() {
				for k := 0; k < 5; k++ {
					for i, s := range texts {
						if got := tok.Encode(s, true); !equalInts(got, want[i]) {
							done <- errMismatch(name + ": " + s)
							return
						}
						_ = tok.Decode(want[i])
					}
				}
				done <- nil
			}()
		}
		for g := 0; g < 4; g++ {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
}

type errMismatch string

func (e errMismatch) Error() string { return "concurrent Encode differs on " + string(e) }

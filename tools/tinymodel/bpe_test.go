package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/tokenizer"
)

// corpusSample is Go-like text with the cases the GPT-2 split regex treats
// specially: contractions, runs of spaces and tabs before words, digits,
// punctuation runs, non-ASCII letters and a trailing space run.
const corpusSample = `// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bytes

import "errors"

// Buffer's zero value is an empty buffer ready to use; it's fine.
type Buffer struct {
	buf      []byte // contents are the bytes buf[off : len(buf)]
	off      int    // read at &buf[off], write at &buf[len(buf)]
	lastRead readOp // last read operation, so that Unread* can work correctly.
}

func (b *Buffer) Write(p []byte) (n int, err error) {
	b.lastRead = opInvalid
	m, ok := b.tryGrowByReslice(len(p))
	if !ok {
		m = b.grow(len(p))
	}
	return copy(b.buf[m:], p), nil
}

var errNegativeRead = errors.New("bytes.Buffer: reader returned negative count from Read")
const smallBufferSize = 64 // héllo, 世界 ½ ⅓ I'll we've they're
x := 12345678 + 0x7fff &^ 3   
`

func TestTrainerMatchesTokenizer(t *testing.T) {
	counts := map[string]int64{}
	for range 3 {
		for _, w := range splitWords(corpusSample, nil) {
			counts[w]++
		}
	}
	m, err := trainBPE(counts, 3+256+120, []string{bosToken, eosToken, padToken})
	if err != nil {
		t.Fatal(err)
	}
	js, err := m.tokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(tokenizer.Files{Tokenizer: js, TokenizerConfig: tokenizerConfigJSON()})
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 3+256+120 {
		t.Errorf("vocab %d, want %d", tok.VocabSize(), 3+256+120)
	}
	if id, ok := tok.BOS(); !ok || id != bosID {
		t.Errorf("BOS %d %v, want %d", id, ok, bosID)
	}
	texts := append(strings.Split(corpusSample, "\n"), corpusSample,
		"  \t\n\n\tfoo  bar\t\t", "'s'S'll'LL'd '", "a1b22c333 ４５", "\u00a0x\u2003y", "emoji 🙂🙂 end", "")
	for _, s := range texts {
		got := tok.Encode(s, false)
		if want := m.encode(s); !slices.Equal(got, want) {
			t.Errorf("%q: tokenizer %v, trainer %v", s, got, want)
		}
		if dec := tok.Decode(got); dec != s {
			t.Errorf("%q: decodes to %q", s, dec)
		}
	}
	if ids := tok.Encode("func", true); len(ids) == 0 || ids[0] != bosID {
		t.Errorf("Encode with specials = %v, want BOS first", ids)
	}
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"func main() {", []string{"func", " main", "()", " {"}},
		{"\n\t\tx := 1", []string{"\n\t", "\t", "x", " :=", " 1"}},
		{"it's  ok ", []string{"it", "'s", " ", " ok", " "}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
	} {
		if got := splitWords(tc.in, nil); !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHeldOutIsDeterministic(t *testing.T) {
	n := 0
	pkgs := []string{"bufio", "bytes", "net/http", "cmd/compile/internal/ssa", "crypto/sha256", "go/ast", "sort", "strings"}
	for _, p := range pkgs {
		if heldOut(p, 3) != heldOut(p, 3) {
			t.Fatalf("heldOut(%q) changes", p)
		}
		if heldOut(p, 100) {
			n++
		}
		if heldOut(p, 0) {
			t.Errorf("heldOut(%q, 0) = true", p)
		}
	}
	if n != len(pkgs) {
		t.Errorf("heldOut(_, 100) held out %d of %d", n, len(pkgs))
	}
}

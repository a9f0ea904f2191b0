package tokenizer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFastJSONReaders checks fastjson.go's readers against encoding/json on
// valid JSON with escapes in keys and values (\u00e9, a surrogate pair, a
// lone surrogate, which both decode to U+FFFD), a raw invalid UTF-8 byte,
// repeated keys, nested values to skip and irregular spacing; and that the
// vocabulary and merges readers refuse what they do not decode (ids that
// are not plain integers, merges of other forms), for the checked path.
func TestFastJSONReaders(t *testing.T) {
	obj := []byte("{ \"a\" : 1 ,\"\\u00e9t\\u00e9\":[1,{\"x\":\"]}\"}],\"\\ud83d\\ude00\":\"s\\\"q\",\n\"lone\\ud800\":null,\"bad\xff\":\"v\xfe\",\"a\":2.5e3, \"n\":{\"k\":[[],{}]}}")
	if !json.Valid(obj) {
		t.Fatal("the test object is not valid JSON")
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(obj, &want); err != nil {
		t.Fatal(err)
	}
	got, err := splitObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("splitObject: keys %q, want %q", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || string(g) != string(w) {
			t.Errorf("splitObject[%q] = %s, want %s", k, g, w)
		}
		if len(w) > 0 && w[0] == '"' {
			var ws string
			json.Unmarshal(w, &ws)
			if gs, err := unquote(g); err != nil || gs != ws {
				t.Errorf("unquote(%s) = %q, %v; want %q", g, gs, err, ws)
			}
			if gb, err := rawString(g); err != nil || string(gb) != ws {
				t.Errorf("rawString(%s) = %q, %v; want %q", g, gb, err, ws)
			}
		}
	}
	arr := []byte(`[ 1, "x" ,[2,[3]], {"a":"]"} ,null,true ]`)
	var wa []json.RawMessage
	json.Unmarshal(arr, &wa)
	if ga := splitArray(arr); !reflect.DeepEqual(toStrings(ga), toStrings(wa)) {
		t.Errorf("splitArray = %q, want %q", toStrings(ga), toStrings(wa))
	}

	vocab := []byte(`{"a": 0, "\u0120b":1 , "c\"": 17,"a":3}`)
	var wv map[string]int32
	json.Unmarshal(vocab, &wv)
	if gv, ok := fastVocab(vocab); !ok || !maps.Equal(gv, wv) {
		t.Errorf("fastVocab = %v, %v; want %v", gv, ok, wv)
	}
	for _, bad := range []string{`{"a": 1.0}`, `{"a": 1e2}`, `{"a": -1}`, `{"a": "1"}`, `{"a": 99999999999}`} {
		if _, ok := fastVocab([]byte(bad)); ok {
			t.Errorf("fastVocab(%s) decoded it; want the checked path", bad)
		}
	}

	type pair struct{ a, b string }
	collect := func(s string) ([]pair, bool) {
		var ps []pair
		ok := fastMerges([]byte(s), func(a, b []byte) bool { ps = append(ps, pair{string(a), string(b)}); return true })
		return ps, ok
	}
	for _, tc := range []struct {
		in   string
		want []pair
	}{
		{`["#version: 0.2", "a b", "\u0120 c"]`, []pair{{"a", "b"}, {"Ġ", "c"}}},
		{`[["a","b"] , [ "a b" , "\u00e9" ]]`, []pair{{"a", "b"}, {"a b", "é"}}},
		{`["a b", ["c", "d"]]`, []pair{{"a", "b"}, {"c", "d"}}},
	} {
		if got, ok := collect(tc.in); !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("fastMerges(%s) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{`["a  b"]`, `["ab"]`, `["a b c"]`, `[["a"]]`, `[["a","b","c"]]`, `[1]`, `[["a",1]]`} {
		if _, ok := collect(bad); ok {
			t.Errorf("fastMerges(%s) decoded it; want the checked path", bad)
		}
	}
}

func toStrings(rs []json.RawMessage) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// TestFastJSONSame loads every tokenizer.json of testdata (and of
// $BITDECODE_REALTOK_DIR's folders, if set) through fastjson.go's readers
// and through encoding/json's path and requires the same tokenizer: the
// vocabulary, the merges with their ranks, every id's token, the added
// tokens, the special ids and the same encoding of a mixed text.
func TestFastJSONSame(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if dir := os.Getenv(envRealTok); dir != "" {
		real, _ := filepath.Glob(filepath.Join(dir, "*", "tokenizer.json"))
		files = append(files, real...)
	}
	text := "Hello, wörld! 你好 🙂 <|begin_of_text|> \t\n  func main() { return 0x1F }"
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b[:min(len(b), 4096)]), `"model"`) {
			continue // not a tokenizer.json (a config or a reference file)
		}
		cfg := strings.TrimSuffix(f, ".json") + ".config.json"
		cb, _ := os.ReadFile(cfg)
		load := func(fast bool) *Tokenizer {
			fastJSON = fast
			defer func() { fastJSON = true }()
			tok, err := New(Files{Tokenizer: b, TokenizerConfig: cb})
			if err != nil {
				t.Fatalf("%s (fast %v): %v", f, fast, err)
			}
			return tok
		}
		a, c := load(true), load(false)
		checked++
		if !maps.Equal(a.model.vocab, c.model.vocab) || !maps.Equal(a.model.merges, c.model.merges) {
			t.Errorf("%s: the vocabulary (%d, %d) or merges (%d, %d) differ", f, len(a.model.vocab), len(c.model.vocab), len(a.model.merges), len(c.model.merges))
		}
		if !slices.Equal(a.idToTok, c.idToTok) || !slices.Equal(a.hasID, c.hasID) || a.bos != c.bos || a.eos != c.eos || !slices.Equal(a.stop, c.stop) {
			t.Errorf("%s: the id table or special ids differ", f)
		}
		if !reflect.DeepEqual(a.added, c.added) {
			t.Errorf("%s: the added tokens differ", f)
		}
		if ea, ec := a.Encode(text, true), c.Encode(text, true); !slices.Equal(ea, ec) {
			t.Errorf("%s: Encode gives %v, encoding/json's path %v", f, ea, ec)
		}
	}
	if checked < 8 {
		t.Fatalf("compared %d tokenizer files, want the testdata's", checked)
	}
}

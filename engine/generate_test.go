package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// TestGreedyMatchesGolden generates through the low-bit cache machinery with
// fp16 KV and checks all 48 greedy tokens of every golden prompt; other
// formats report their agreement (int8 must agree on most). The golden
// prompts and continuations are short (< 128 tokens), so the res32 variants
// are what exercise packed blocks here.
func TestGreedyMatchesGolden(t *testing.T) {
	dir := testmodel.Dir(t)
	var g struct {
		Prompts []struct {
			IDs    []int `json:"ids"`
			Greedy []int `json:"greedy_ids"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"fp16", "int8", "int4", "int8:kc32:res32", "int4:kc32:v32:res32", "int2:kc32:v32:res32", "int4:kc32:v32:res32:rot", "int2:kc32:v32:res32:rot"} {
		agree, total := 0, 0
		for i, p := range g.Prompts {
			c, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec(spec), kvcache.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			st, err := Generate(context.Background(), m, tok, c, 1, p.IDs, GenerateOptions{MaxTokens: len(p.Greedy), StopIDs: []int{}}, func(s string) { out.WriteString(s) })
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for n < len(st.Tokens) && n < len(p.Greedy) && st.Tokens[n] == p.Greedy[n] {
				n++
			}
			agree += n
			total += len(p.Greedy)
			if spec == "fp16" && n != len(p.Greedy) {
				t.Errorf("fp16 KV prompt %d: greedy tokens diverge from golden at %d of %d:\n got %v\nwant %v", i, n, len(p.Greedy), st.Tokens, p.Greedy)
			}
			if got, want := out.String(), tok.DecodeWith(st.Tokens, tokenizer.DecodeOptions{SkipSpecial: true}); got != want {
				t.Errorf("%s prompt %d: streamed text %q, decoded %q", spec, i, got, want)
			}
			if st.KVBytes <= 0 || st.KVBytesFP16 <= 0 {
				t.Errorf("%s: KV bytes %d / fp16 %d", spec, st.KVBytes, st.KVBytesFP16)
			}
		}
		t.Logf("%s KV: %d of %d greedy tokens agree with golden before the first divergence", spec, agree, total)
		if strings.HasPrefix(spec, "int8") && agree < total/2 {
			t.Errorf("int8 KV: only %d of %d tokens agree with golden", agree, total)
		}
	}
}

func TestSampler(t *testing.T) {
	logits := func() []float32 { return []float32{1, 3, 2, 0.5, 2.9} }
	if got := NewSampler(SampleOptions{}).Sample(logits(), nil); got != 1 {
		t.Errorf("greedy = %d, want 1", got)
	}
	// Repetition penalty 2 halves the logit of token 1 (3 -> 1.5): token 4 wins.
	if got := NewSampler(SampleOptions{RepeatPenalty: 2}).Sample(logits(), []int{1}); got != 4 {
		t.Errorf("greedy with penalty = %d, want 4", got)
	}
	// top-k 2 only ever yields tokens 1 and 4; the same seed gives the same sequence.
	s1, s2 := NewSampler(SampleOptions{Temperature: 1, TopK: 2, Seed: 7}), NewSampler(SampleOptions{Temperature: 1, TopK: 2, Seed: 7})
	seen := map[int]int{}
	for i := 0; i < 2000; i++ {
		a, b := s1.Sample(logits(), nil), s2.Sample(logits(), nil)
		if a != b {
			t.Fatal("same seed, different tokens")
		}
		seen[a]++
	}
	if len(seen) != 2 || seen[1] == 0 || seen[4] == 0 {
		t.Errorf("top-k 2 sampled %v", seen)
	}
	// p(1)/p(4) = e^0.1 = 1.105: check the empirical ratio loosely (2000 draws, ~4 sigma).
	if r := float64(seen[1]) / float64(seen[4]); r < 0.9 || r > 1.35 {
		t.Errorf("ratio of token 1 to token 4 = %.2f, want about 1.105", r)
	}
	// min-p 0.9 keeps only tokens within 10% of the best probability: 1 and 4.
	s := NewSampler(SampleOptions{Temperature: 1, MinP: 0.9, Seed: 1})
	for i := 0; i < 200; i++ {
		if got := s.Sample(logits(), nil); got != 1 && got != 4 {
			t.Fatalf("min-p sampled %d", got)
		}
	}
	// top-p 0.01 keeps only the most likely token.
	s = NewSampler(SampleOptions{Temperature: 1, TopP: 0.01, Seed: 1})
	for i := 0; i < 50; i++ {
		if got := s.Sample(logits(), nil); got != 1 {
			t.Fatalf("top-p 0.01 sampled %d", got)
		}
	}
	for _, bad := range []SampleOptions{{Temperature: -1}, {TopP: 2}, {MinP: -0.1}, {TopK: -3}, {RepeatPenalty: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestStopInsideToken generates with the embedded model, whose byte-level
// BPE has tokens such as "\n\t": a stop string inside one token's text must
// cut the output where it begins, in Generate and in the scheduler alike.
// Before the stop matcher, only a text ending with the stop was seen, and
// generation ran past the newline.
func TestStopInsideToken(t *testing.T) {
	lm, err := Open("", Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	prompt, _ := lm.Encode("func main() {", false)
	gen := func(stop []string) (string, Stats) {
		c, err := lm.NewCache(kv.MustParseSpec("int8"), kvcache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		st, err := Generate(context.Background(), lm.Model, lm.Tokenizer, c, 0, prompt,
			GenerateOptions{MaxTokens: 40, Stop: stop, StopIDs: []int{}, Sample: SampleOptions{RepeatPenalty: 1.3}}, func(s string) { out.WriteString(s) })
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), st
	}
	free, st := gen(nil)
	// Pick a one-byte stop string that first occurs inside a longer token,
	// not at its start: the case the old matcher missed.
	stop, at := "", -1
	text := ""
	for _, id := range st.Tokens {
		piece := lm.Tokenizer.Decode([]int{id})
		for k := 1; k < len(piece) && stop == ""; k++ {
			if c := piece[k : k+1]; strings.Index(free, c) == len(text)+k {
				stop, at = c, len(text)+k
			}
		}
		text += piece
	}
	if stop == "" {
		t.Fatalf("no byte of %q first occurs inside a token", free)
	}
	got, st2 := gen([]string{stop})
	if got != free[:at] || st2.StopReason != "stop string" {
		t.Errorf("stop %q: got %q (%s), want %q", stop, got, st2.StopReason, free[:at])
	}

	// The scheduler, with the same request.
	sc, err := lm.NewCache(kv.MustParseSpec("int8"), kvcache.Options{MaxSeqs: 2, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(lm.Model, lm.Tokenizer, sc, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	strm, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 40, Stop: []string{stop}, StopIDs: []int{},
		Sample: SampleOptions{RepeatPenalty: 1.3}})
	if err != nil {
		t.Fatal(err)
	}
	got, res := collect(t, strm)
	if got != free[:at] || res.FinishReason != FinishStop {
		t.Errorf("scheduler, stop %q: got %q (%s), want %q", stop, got, res.FinishReason, free[:at])
	}
}

// TestMaxTokensOverflow submits max tokens of 2^63-1, which wrapped the
// context check (prompt + max tokens) into a negative number: it must be
// refused as beyond the context, not run to the end of it.
func TestMaxTokensOverflow(t *testing.T) {
	m, tok, be := tiny(t)
	c, err := kvcache.NewPaged(be, m.Config(), kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 2, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(m, tok, c, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Submit(context.Background(), Request{Prompt: []int{1, 2, 3}, MaxTokens: math.MaxInt})
	var ce *ContextError
	if !errors.As(err, &ce) {
		t.Fatalf("max tokens 2^63-1: err = %v, want a ContextError", err)
	}
	if _, err := s.Submit(context.Background(), Request{Prompt: []int{1}, MaxTokens: 1, Stop: make([]string, MaxStops+1)}); err == nil {
		t.Error("too many stop strings accepted")
	}
	if _, err := s.Submit(context.Background(), Request{Prompt: []int{1}, MaxTokens: 1, Stop: []string{strings.Repeat("x", MaxStopBytes+1)}}); err == nil {
		t.Error("an overlong stop string accepted")
	}
}

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
)

// boundedSchema admits documents of bounded length, so that every
// constrained generation must complete within its token budget.
const boundedSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"n":{"type":"integer"},"ok":{"type":"boolean"},
"color":{"enum":["red","green"]},"tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},"required":["name","n","ok","color","tags"],"additionalProperties":false}`

// checkBounded checks a document against boundedSchema by decoding it into
// a struct that disallows unknown fields.
func checkBounded(doc string) error {
	var v struct {
		Name  *string  `json:"name"`
		N     *int64   `json:"n"`
		OK    *bool    `json:"ok"`
		Color *string  `json:"color"`
		Tags  []string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal([]byte(doc), &raw)
	switch {
	case len(raw) != 5 || v.Name == nil || v.N == nil || v.OK == nil || v.Color == nil || v.Tags == nil:
		return fmt.Errorf("missing or extra members")
	case len([]rune(*v.Name)) > 6 || (*v.Color != "red" && *v.Color != "green") || len(v.Tags) > 2:
		return fmt.Errorf("a bound broken")
	}
	for _, t := range v.Tags {
		if len([]rune(t)) > 3 {
			return fmt.Errorf("tag %q too long", t)
		}
	}
	return nil
}

// TestConstrainedGotiny generates with the embedded model (a real
// byte-level tokenizer) under json_object and a schema, greedy and
// sampled (with log probabilities), eight requests at once over a KV pool
// small enough to preempt: every completion that stops parses (and
// matches the schema), every one cut by max tokens is a prefix the grammar
// accepts, and the bounded schema's all stop.
func TestConstrainedGotiny(t *testing.T) {
	lm, bounded := gotinyBounded(t)
	tok := lm.Tokenizer
	vocab := TokenVocab(tok, lm.Model.Config().Vocab)
	for _, c := range []struct {
		name    string
		g       *constrain.Grammar
		max     int
		bounded bool
	}{{"json_object", constrain.JSONObject(), 48, false}, {"schema", bounded, 160, true}} {
		sc, err := lm.NewCache(kv.MustParseSpec("int8:kc32:v32:res32"), kvcache.Options{MaxSeqs: 6, Blocks: 10})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewScheduler(lm.Model, tok, sc, SchedulerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var streams []*Stream
		var opts []SampleOptions
		for i := range 8 {
			o := SampleOptions{Seed: uint64(i)}
			switch i % 4 {
			case 1:
				o.Temperature = 1
			case 2:
				o.Temperature, o.TopP, o.TopK, o.Logprobs, o.TopLogprobs = 0.8, 0.9, 50, true, 3
			case 3:
				o.Temperature, o.MinP, o.RepeatPenalty = 1.2, 0.05, 1.1
			}
			// Prompts of three blocks, none shared, so that the pool
			// preempts.
			prompt := tok.Encode(strings.Repeat(fmt.Sprintf("// Config %d is read from JSON.\n", i), 10)+"var config = `", true)
			st, err := s.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: c.max, Sample: o, Constraint: c.g})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
			opts = append(opts, o)
		}
		stopped, preempted := 0, 0
		for i, st := range streams {
			text, res := collect(t, st)
			preempted += res.Preemptions
			// The tokens' bytes, through a fresh matcher, are the text.
			m := constrain.NewMatcher(c.g, vocab, tok.StopIDs())
			for _, id := range res.Tokens {
				if err := m.Accept(id); err != nil {
					t.Fatalf("%s %d: %v in %q", c.name, i, err, text)
				}
			}
			switch res.FinishReason {
			case FinishStop:
				stopped++
				if !m.Complete() || !json.Valid([]byte(text)) {
					t.Errorf("%s %d: stopped with %q, not a whole document", c.name, i, text)
				}
				if c.bounded {
					if err := checkBounded(text); err != nil {
						t.Errorf("%s %d: %q: %v", c.name, i, text, err)
					}
				}
			case FinishLength:
				if c.bounded {
					t.Errorf("%s %d: cut by max tokens (%d) in a bounded schema: %q", c.name, i, c.max, text)
				}
			default:
				t.Errorf("%s %d: finished with %s (%v)", c.name, i, res.FinishReason, res.Err)
			}
			if opts[i].Logprobs {
				if len(res.Logprobs) != len(res.Tokens) {
					t.Errorf("%s %d: %d logprobs for %d tokens", c.name, i, len(res.Logprobs), len(res.Tokens))
				}
				for _, lp := range res.Logprobs {
					if !(lp.Logprob <= 0) || math.IsInf(lp.Logprob, -1) || len(lp.Top) == 0 || lp.Top[0].Logprob < lp.Logprob {
						t.Errorf("%s %d: logprob %+v", c.name, i, lp)
					}
					for _, alt := range lp.Top {
						if math.IsInf(alt.Logprob, -1) {
							t.Errorf("%s %d: a masked alternative reported: %+v", c.name, i, lp)
						}
					}
				}
			}
			t.Logf("%s %d (%s, %d preemptions): %q", c.name, i, res.FinishReason, res.Preemptions, text)
		}
		t.Logf("%s: block of %d tokens, %d blocks, stats %+v", c.name, sc.BlockTokens(), sc.TotalBlocks(), s.Stats())
		s.Close()
		if c.bounded && stopped != len(streams) {
			t.Errorf("%s: %d of %d stopped", c.name, stopped, len(streams))
		}
		if preempted == 0 {
			t.Errorf("%s: no request was preempted (the test means to check that the matcher survives recomputation)", c.name)
		}
	}
}

// TestConstrainedIgnoreEOS checks that a constrained request without stop
// tokens ends, with FinishStop, once the document is complete.
func TestConstrainedIgnoreEOS(t *testing.T) {
	lm, err := Open("", Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	g, err := constrain.JSONSchema([]byte(`{"enum":[true]}`), constrain.SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := lm.NewCache(kv.MustParseSpec("int8"), kvcache.Options{MaxSeqs: 1, Blocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewScheduler(lm.Model, lm.Tokenizer, sc, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Submit(context.Background(), Request{Prompt: lm.Tokenizer.Encode("x := ", true), MaxTokens: 100, StopIDs: []int{}, Constraint: g})
	if err != nil {
		t.Fatal(err)
	}
	text, res := collect(t, st)
	if res.FinishReason != FinishStop || text != "true" || res.CompletionTokens > 4 {
		t.Errorf("got %q (%s)", text, res.FinishReason)
	}
}

// TestGenerateConstrained runs Generate (what `bitdecode run --json` and
// `--json-schema` use) on the embedded model under json_object and the
// bounded schema, greedy and sampled: the text is the grammar's document,
// complete where generation stopped on a stop token, and the bounded
// schema's always stops.
func TestGenerateConstrained(t *testing.T) {
	lm, bounded := gotinyBounded(t)
	for _, c := range []struct {
		name    string
		g       *constrain.Grammar
		bounded bool
	}{{"json_object", constrain.JSONObject(), false}, {"schema", bounded, true}} {
		for _, sample := range []SampleOptions{{}, {Temperature: 0.9, TopP: 0.95, Seed: 5}} {
			ids, err := lm.Encode("x = ", false)
			if err != nil {
				t.Fatal(err)
			}
			opts := GenerateOptions{MaxTokens: 160, Sample: sample, Constraint: c.g}
			cache, err := lm.NewCache(kv.MustParseSpec("int8:kc32:v32:res32"), lm.SoloCacheOptions(len(ids), opts))
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			st, err := Generate(t.Context(), lm.Model, lm.Tokenizer, cache, 0, ids, opts, func(s string) { out.WriteString(s) })
			cache.Close()
			if err != nil {
				t.Fatalf("%s %+v: %v", c.name, sample, err)
			}
			text := out.String()
			switch {
			case st.StopReason == "stop token" && !json.Valid([]byte(text)):
				t.Errorf("%s %+v: stopped with %q, not JSON", c.name, sample, text)
			case c.bounded && st.StopReason != "stop token":
				t.Errorf("%s %+v: %s with %q", c.name, sample, st.StopReason, text)
			case !strings.HasPrefix(strings.TrimSpace(text), "{"):
				t.Errorf("%s %+v: %q does not start an object", c.name, sample, text)
			case c.bounded:
				if err := checkBounded(text); err != nil {
					t.Errorf("%s %+v: %q: %v", c.name, sample, text, err)
				}
			}
			t.Logf("%s %+v: %s, %q", c.name, sample, st.StopReason, text)
		}
	}
}

// gotinyBounded opens the embedded model on the CPU (closed at the test's
// end) and compiles boundedSchema.
func gotinyBounded(t *testing.T) (*Model, *constrain.Grammar) {
	t.Helper()
	lm, err := Open("", Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	bounded, err := constrain.JSONSchema([]byte(boundedSchema), constrain.SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lm, bounded
}

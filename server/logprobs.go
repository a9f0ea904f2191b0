package server

import (
	"math"
	"unicode/utf8"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// The log-probability objects of the OpenAI API. Log probabilities are the
// model's own (the log-softmax of its logits before penalties, bias and
// temperature, as vLLM reports them by default); a token's text is its
// decoded bytes (one token may hold part of a UTF-8 character: then Token
// shows U+FFFD where Bytes is exact).

// chatLogprobs is a chat choice's (or chunk's) logprobs.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal []chatTokenLogprob `json:"refusal"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// textLogprobs is a legacy completion choice's (or chunk's) logprobs. With
// echo the prompt's tokens come first; the very first has no log
// probability (null), as OpenAI reports it.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// minLogprob stands for -Inf (JSON has no infinities), as OpenAI does.
const minLogprob = -9999.0

func finiteLogprob(v float64) float64 {
	if math.IsInf(v, -1) || math.IsNaN(v) || v < minLogprob {
		return minLogprob
	}
	return v
}

// tokenText returns token id's text and bytes.
func tokenText(tok *tokenizer.Tokenizer, id int) (string, []int) {
	s := tok.Decode([]int{id})
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	return s, b
}

// chatLogprobsOf converts sampled tokens to chat logprobs.
func chatLogprobsOf(tok *tokenizer.Tokenizer, toks []engine.SampledToken) *chatLogprobs {
	lp := &chatLogprobs{Content: make([]chatTokenLogprob, len(toks))}
	for i, t := range toks {
		s, b := tokenText(tok, t.ID)
		c := chatTokenLogprob{Token: s, Logprob: finiteLogprob(t.Logprob), Bytes: b, TopLogprobs: make([]chatTopLogprob, len(t.Top))}
		for j, a := range t.Top {
			as, ab := tokenText(tok, a.ID)
			c.TopLogprobs[j] = chatTopLogprob{Token: as, Logprob: finiteLogprob(a.Logprob), Bytes: ab}
		}
		lp.Content[i] = c
	}
	return lp
}

// textLogprobsOf converts sampled tokens to legacy completion logprobs;
// offset is the text offset of the first token in the choice's text.
func textLogprobsOf(tok *tokenizer.Tokenizer, toks []engine.SampledToken, offset int) *textLogprobs {
	lp := &textLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, t := range toks {
		offset = lp.add(tok, t, true, offset)
	}
	return lp
}

// promptLogprobsOf is the echoed prompt's share of legacy completion
// logprobs: prompt[0] without a log probability, then the scored tokens
// (engine.Result.PromptLogprobs: prompt[1:]), text offsets from 0.
func promptLogprobsOf(tok *tokenizer.Tokenizer, prompt []int, scored []engine.SampledToken) *textLogprobs {
	lp := textLogprobsOf(tok, nil, 0)
	if len(prompt) == 0 {
		return lp
	}
	offset := lp.add(tok, engine.SampledToken{TokenLogprob: engine.TokenLogprob{ID: prompt[0]}}, false, 0)
	for _, t := range scored {
		offset = lp.add(tok, t, true, offset)
	}
	return lp
}

// add appends token t (its log probability and alternatives when scored,
// nulls otherwise) at text offset offset and returns the next token's.
func (lp *textLogprobs) add(tok *tokenizer.Tokenizer, t engine.SampledToken, scored bool, offset int) int {
	s, _ := tokenText(tok, t.ID)
	var v *float64
	var top map[string]float64
	if scored {
		f := finiteLogprob(t.Logprob)
		v, top = &f, make(map[string]float64, len(t.Top))
		for _, a := range t.Top {
			as, _ := tokenText(tok, a.ID)
			if _, dup := top[as]; !dup { // two tokens may print alike; keep the likelier
				top[as] = finiteLogprob(a.Logprob)
			}
		}
	}
	lp.Tokens, lp.TokenLogprobs, lp.TopLogprobs, lp.TextOffset = append(lp.Tokens, s), append(lp.TokenLogprobs, v), append(lp.TopLogprobs, top), append(lp.TextOffset, offset)
	// Offsets count the text as the choice shows it: special tokens (a
	// prompt's BOS) take no room.
	return offset + len(tok.DecodeWith([]int{t.ID}, tokenizer.DecodeOptions{SkipSpecial: true}))
}

// join appends b's entries to lp's.
func (lp *textLogprobs) join(b *textLogprobs) *textLogprobs {
	lp.Tokens, lp.TokenLogprobs = append(lp.Tokens, b.Tokens...), append(lp.TokenLogprobs, b.TokenLogprobs...)
	lp.TopLogprobs, lp.TextOffset = append(lp.TopLogprobs, b.TopLogprobs...), append(lp.TextOffset, b.TextOffset...)
	return lp
}

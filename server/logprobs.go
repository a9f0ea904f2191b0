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

// textLogprobs is a legacy completion choice's (or chunk's) logprobs.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
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
	lp := &textLogprobs{Tokens: make([]string, len(toks)), TokenLogprobs: make([]float64, len(toks)),
		TopLogprobs: make([]map[string]float64, len(toks)), TextOffset: make([]int, len(toks))}
	for i, t := range toks {
		s, _ := tokenText(tok, t.ID)
		lp.Tokens[i], lp.TokenLogprobs[i], lp.TextOffset[i] = s, finiteLogprob(t.Logprob), offset
		offset += len(tok.Decode([]int{t.ID}))
		top := make(map[string]float64, len(t.Top))
		for _, a := range t.Top {
			as, _ := tokenText(tok, a.ID)
			if _, dup := top[as]; !dup { // two tokens may print alike; keep the likelier
				top[as] = finiteLogprob(a.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
	}
	return lp
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// The client-compatibility suite: the OpenAI API as its official clients
// use it, against the embedded model (model/gotiny, a real byte-level BPE
// model, so tokens span several bytes and stop strings can fall inside
// one). scripts/openai-client (npm's openai package) runs the same cases
// against a real checkpoint.

// gotinyServer serves the embedded model through a paged int8 cache of
// blocks blocks for up to seqs sequences, with cfg adjusted by configure.
type gotinyServer struct {
	url   string
	lm    *engine.Model
	sched *engine.Scheduler
	srv   *Server
}

// waitIdle waits (20 s at most) until the scheduler runs and queues
// nothing, then requires every block of the cache free: the requests'
// sequences, aborted ones included, have ended and released theirs.
func (ts *gotinyServer) waitIdle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for st := ts.sched.Stats(); st.Running != 0 || st.Queued != 0; st = ts.sched.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("still busy: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := ts.lm.Cache; c.FreeBlocks() != c.TotalBlocks() {
		t.Errorf("leak: %d of %d blocks free", c.FreeBlocks(), c.TotalBlocks())
	}
}

func newGotinyServer(t testing.TB, blocks, seqs int, configure func(*Config)) *gotinyServer {
	t.Helper()
	lm, err := engine.Open("", engine.Options{Device: "cpu", KV: kv.MustParseSpec("int8:kc32:res32"),
		Cache: &kvcache.Options{MaxSeqs: seqs, Blocks: blocks}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := engine.NewScheduler(lm.Model, lm.Tokenizer, lm.Cache, engine.SchedulerOptions{PrefillChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scheduler: s, Tokenizer: lm.Tokenizer, ModelName: "gotiny"}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
		lm.Close()
	})
	return &gotinyServer{url: hs.URL, lm: lm, sched: s, srv: srv}
}

// completion is the subset of a (chat) completion response the suite reads.
type completion struct {
	Choices []struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func postJSON(t testing.TB, url, body string) completion {
	t.Helper()
	code, b := post(t, context.Background(), url, body)
	if code != 200 {
		t.Fatalf("%s: status %d: %s", body, code, b)
	}
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v: %s", body, err, b)
	}
	return c
}

// text returns choice i's text (chat or completion).
func (c completion) text(i int) string { return c.Choices[i].Text + c.Choices[i].Message.Content }

// postStream posts a streaming request and returns its data events
// (framing checked by sseEvents).
func postStream(t testing.TB, url, body string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", body, resp.StatusCode, b)
	}
	return sseEvents(t, resp.Body)
}

// TestCompatCompletionsAndChat runs the basic endpoints whole and streamed:
// a streamed response is the whole one cut into chunks, with the role
// chunk first, a finish chunk, the usage chunk when asked, and [DONE].
func TestCompatCompletionsAndChat(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp, chat := ts.url+"/v1/completions", ts.url+"/v1/chat/completions"
	whole := postJSON(t, comp, `{"model":"gotiny","prompt":"func main() {","max_tokens":24,"temperature":0}`)
	if whole.Choices[0].FinishReason != "length" || whole.Usage.CompletionTokens != 24 {
		t.Errorf("completion: finish %q, %d tokens", whole.Choices[0].FinishReason, whole.Usage.CompletionTokens)
	}
	events := postStream(t, comp, `{"model":"gotiny","prompt":"func main() {","max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream ends with %q", events[len(events)-1])
	}
	var text strings.Builder
	var u *usage
	for _, e := range events[:len(events)-1] {
		var c struct {
			Choices []textChoice `json:"choices"`
			Usage   *usage       `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
		if c.Usage != nil {
			u = c.Usage
		}
	}
	if text.String() != whole.text(0) || u == nil || u.CompletionTokens != 24 {
		t.Errorf("streamed %q (usage %+v), whole %q", text.String(), u, whole.text(0))
	}
	c := postJSON(t, chat, `{"model":"gotiny","messages":[{"role":"system","content":"Write Go."},{"role":"user","content":"a loop"}],"max_tokens":16,"temperature":0}`)
	if len(c.Choices) != 1 || c.text(0) == "" {
		t.Errorf("chat: %+v", c)
	}
	ce := postStream(t, chat, `{"model":"gotiny","messages":[{"role":"user","content":"a loop"}],"max_tokens":16,"temperature":0,"stream":true}`)
	if !strings.Contains(ce[0], `"role":"assistant"`) || !strings.Contains(ce[len(ce)-2], `"finish_reason":"length"`) || ce[len(ce)-1] != "[DONE]" {
		t.Errorf("chat stream: first %q, last two %q", ce[0], ce[len(ce)-2:])
	}
}

// TestCompatStopInsideToken: a stop sequence that falls inside one token's
// text cuts the output where it begins, whole and streamed.
func TestCompatStopInsideToken(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp := ts.url + "/v1/completions"
	base := `{"model":"gotiny","prompt":"func main() {","max_tokens":40,"temperature":0,"repetition_penalty":1.3,"logprobs":0`
	free := postJSON(t, comp, base+`}`)
	var lp textLogprobs
	if err := json.Unmarshal(free.Choices[0].Logprobs, &lp); err != nil {
		t.Fatal(err)
	}
	text := free.text(0)
	stop, at := "", -1
	for i, tok := range lp.Tokens {
		for k := 1; k < len(tok) && stop == ""; k++ {
			if c := tok[k : k+1]; strings.Index(text, c) == lp.TextOffset[i]+k {
				stop, at = c, lp.TextOffset[i]+k
			}
		}
	}
	if stop == "" {
		t.Fatalf("no byte of %q first occurs inside a token", text)
	}
	sj, _ := json.Marshal(stop)
	cut := postJSON(t, comp, base+`,"stop":[`+string(sj)+`]}`)
	if cut.text(0) != text[:at] || cut.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q (%s), want %q", stop, cut.text(0), cut.Choices[0].FinishReason, text[:at])
	}
	var streamed strings.Builder
	for _, e := range postStream(t, comp, strings.Replace(base, `,"logprobs":0`, "", 1)+`,"stream":true,"stop":`+string(sj)+`}`) {
		var c struct{ Choices []textChoice }
		if json.Unmarshal([]byte(e), &c) == nil {
			for _, ch := range c.Choices {
				streamed.WriteString(ch.Text)
			}
		}
	}
	if streamed.String() != text[:at] {
		t.Errorf("streamed stop %q: %q, want %q", stop, streamed.String(), text[:at])
	}
}

// TestCompatSamplingParameters checks that each sampling parameter changes
// what it should and that a seed reproduces a sample.
func TestCompatSamplingParameters(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp := ts.url + "/v1/completions"
	req := func(extra string) string {
		return postJSON(t, comp, `{"model":"gotiny","prompt":"package main\n","max_tokens":20`+extra+`}`).text(0)
	}
	greedy := req(`,"temperature":0`)
	if got := req(`,"temperature":1,"top_k":1,"seed":9`); got != greedy {
		t.Errorf("top_k 1 %q differs from greedy %q", got, greedy)
	}
	if a, b := req(`,"temperature":1,"seed":42`), req(`,"temperature":1,"seed":42`); a != b {
		t.Errorf("same seed, different samples: %q, %q", a, b)
	}
	if got := req(`,"temperature":0,"min_p":1`); got != greedy {
		t.Errorf("min_p 1 %q differs from greedy %q", got, greedy)
	}
	// Ban the greedy first token: the first token changes.
	c := postJSON(t, comp, `{"model":"gotiny","prompt":"package main\n","max_tokens":1,"temperature":0,"logprobs":1}`)
	var lp textLogprobs
	if err := json.Unmarshal(c.Choices[0].Logprobs, &lp); err != nil || len(lp.Tokens) != 1 {
		t.Fatalf("logprobs: %v %s", err, c.Choices[0].Logprobs)
	}
	first := ts.lm.Tokenizer.Encode(lp.Tokens[0], false)
	if len(first) != 1 {
		t.Fatalf("token %q re-encodes to %v", lp.Tokens[0], first)
	}
	banned := req(fmt.Sprintf(`,"temperature":0,"logit_bias":{"%d":-100}`, first[0]))
	if strings.HasPrefix(banned, lp.Tokens[0]) && banned == greedy {
		t.Errorf("logit_bias -100 on the greedy first token changed nothing: %q", banned)
	}
	// Penalties make repeats rarer: count repeated tokens over a long
	// greedy run with and without.
	repeats := func(extra string) int {
		c := postJSON(t, comp, `{"model":"gotiny","prompt":"func f() {\n","max_tokens":64,"temperature":0,"logprobs":0`+extra+`}`)
		var lp textLogprobs
		_ = json.Unmarshal(c.Choices[0].Logprobs, &lp)
		seen, n := map[string]bool{}, 0
		for _, tok := range lp.Tokens {
			if seen[tok] {
				n++
			}
			seen[tok] = true
		}
		return n
	}
	plain, freq, rep := repeats(""), repeats(`,"frequency_penalty":2`), repeats(`,"repetition_penalty":2`)
	t.Logf("repeated tokens in 64: plain %d, frequency_penalty 2 %d, repetition_penalty 2 %d", plain, freq, rep)
	if freq >= plain || rep >= plain {
		t.Errorf("penalties did not reduce repeats: plain %d, frequency %d, repetition %d", plain, freq, rep)
	}
	// presence_penalty subtracts a constant once per generated token, which
	// this peaked model's greedy choices often outweigh; with the same seed
	// a sampled run must change (its arithmetic is checked in the engine's
	// sampler test).
	long := func(extra string) string {
		return postJSON(t, comp, `{"model":"gotiny","prompt":"func f() {\n","max_tokens":64,"temperature":1,"seed":7`+extra+`}`).text(0)
	}
	if long(`,"presence_penalty":2`) == long("") {
		t.Error("presence_penalty 2 left a seeded 64-token sample unchanged")
	}
}

// TestCompatLogprobs checks the log probability objects: the tokens spell
// the text, each logprob is at most 0 and at most the best alternative's,
// alternatives come best first, and greedy picks the best one.
func TestCompatLogprobs(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	c := postJSON(t, ts.url+"/v1/chat/completions", `{"model":"gotiny","messages":[{"role":"user","content":"hi"}],"max_tokens":12,"temperature":0,"logprobs":true,"top_logprobs":3}`)
	var lp chatLogprobs
	if err := json.Unmarshal(c.Choices[0].Logprobs, &lp); err != nil {
		t.Fatal(err)
	}
	var spelled []byte
	for i, e := range lp.Content {
		for _, b := range e.Bytes {
			spelled = append(spelled, byte(b))
		}
		if e.Logprob > 0 || len(e.TopLogprobs) != 3 {
			t.Fatalf("token %d: %+v", i, e)
		}
		for j := 1; j < len(e.TopLogprobs); j++ {
			if e.TopLogprobs[j].Logprob > e.TopLogprobs[j-1].Logprob {
				t.Errorf("token %d: alternatives out of order %+v", i, e.TopLogprobs)
			}
		}
		if math.Abs(e.Logprob-e.TopLogprobs[0].Logprob) > 1e-9 || e.Token != e.TopLogprobs[0].Token {
			t.Errorf("token %d: greedy chose %q (%g), best alternative %q (%g)", i, e.Token, e.Logprob, e.TopLogprobs[0].Token, e.TopLogprobs[0].Logprob)
		}
	}
	if string(spelled) != c.text(0) {
		t.Errorf("logprob tokens spell %q, content %q", spelled, c.text(0))
	}
	// Streamed: the chunks' logprobs together equal the whole response's.
	var streamed []chatTokenLogprob
	for _, e := range postStream(t, ts.url+"/v1/chat/completions", `{"model":"gotiny","messages":[{"role":"user","content":"hi"}],"max_tokens":12,"temperature":0,"logprobs":true,"top_logprobs":3,"stream":true}`) {
		var ch struct {
			Choices []struct {
				Logprobs *chatLogprobs `json:"logprobs"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(e), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].Logprobs != nil {
			streamed = append(streamed, ch.Choices[0].Logprobs.Content...)
		}
	}
	a, _ := json.Marshal(streamed)
	b, _ := json.Marshal(lp.Content)
	if !bytes.Equal(a, b) {
		t.Errorf("streamed logprobs differ from the whole response's:\n%s\n%s", a, b)
	}
}

// TestCompatEchoLogprobs scores a prompt the way evaluation harnesses do
// (echo with logprobs, max_tokens 0 or 1, the prompt as token ids): the
// prompt's tokens come back first, the first with null scores, then the
// generated one; a greedy token's score matches the same token scored as
// part of a prompt; a stream sends the same entries with the echo.
func TestCompatEchoLogprobs(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp := ts.url + "/v1/completions"
	ids := ts.lm.Tokenizer.Encode("func main() {\n\tfmt.Println(", true)
	idsJSON, _ := json.Marshal(ids)
	parse := func(c completion) textLogprobs {
		t.Helper()
		var lp textLogprobs
		if err := json.Unmarshal(c.Choices[0].Logprobs, &lp); err != nil {
			t.Fatalf("%v: %s", err, c.Choices[0].Logprobs)
		}
		return lp
	}
	// One generated token, greedy, with its score.
	gen := postJSON(t, comp, `{"model":"gotiny","prompt":`+string(idsJSON)+`,"max_tokens":1,"temperature":0,"logprobs":1,"echo":true}`)
	lp := parse(gen)
	if len(lp.Tokens) != len(ids)+1 || len(lp.TokenLogprobs) != len(ids)+1 || len(lp.TopLogprobs) != len(ids)+1 || len(lp.TextOffset) != len(ids)+1 {
		t.Fatalf("%d prompt tokens and 1 generated: %d tokens, %d logprobs, %d tops, %d offsets", len(ids), len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset))
	}
	if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Errorf("the first prompt token has scores %v %v, want null", *lp.TokenLogprobs[0], lp.TopLogprobs[0])
	}
	for i := 1; i < len(lp.Tokens); i++ {
		v, top := lp.TokenLogprobs[i], lp.TopLogprobs[i]
		if v == nil || *v > 0 || len(top) != 1 {
			t.Fatalf("token %d %q: logprob %v, top %v", i, lp.Tokens[i], v, top)
		}
		for _, a := range top {
			if a < *v-1e-12 {
				t.Errorf("token %d %q: logprob %g above the best alternative's %g", i, lp.Tokens[i], *v, a)
			}
		}
	}
	echo := ts.lm.Tokenizer.DecodeWith(ids, tokenizer.DecodeOptions{SkipSpecial: true})
	if !strings.HasPrefix(gen.text(0), echo) {
		t.Errorf("echo: %q does not start with the prompt", gen.text(0))
	}
	for i := 1; i < len(lp.TextOffset); i++ {
		if lp.TextOffset[i] < lp.TextOffset[i-1] {
			t.Errorf("text offsets go back: %v", lp.TextOffset)
			break
		}
	}
	if got := lp.TextOffset[len(ids)]; got != len(echo) {
		t.Errorf("the generated token's text offset is %d, the echoed prompt %d bytes long", got, len(echo))
	}
	if gen.Usage.PromptTokens != len(ids) || gen.Usage.CompletionTokens != 1 {
		t.Errorf("usage %+v", gen.Usage)
	}
	// The generated token scored as the prompt's last: the same number
	// (the same rows of the same prefill chunk).
	next := ts.lm.Tokenizer.Encode(lp.Tokens[len(ids)], false)
	if len(next) == 1 {
		idsJSON2, _ := json.Marshal(append(append([]int(nil), ids...), next[0]))
		score := postJSON(t, comp, `{"model":"gotiny","prompt":`+string(idsJSON2)+`,"max_tokens":0,"logprobs":1,"echo":true}`)
		lp2 := parse(score)
		last := lp2.TokenLogprobs[len(lp2.TokenLogprobs)-1]
		if len(lp2.Tokens) != len(ids)+1 || score.Usage.CompletionTokens != 0 || score.Choices[0].FinishReason != "length" {
			t.Errorf("max_tokens 0: %d tokens for %d, usage %+v, finish %q", len(lp2.Tokens), len(ids)+1, score.Usage, score.Choices[0].FinishReason)
		} else if *last != *lp.TokenLogprobs[len(ids)] {
			t.Errorf("greedy token %q: generated with logprob %v, scored in a prompt %v", lp.Tokens[len(ids)], *lp.TokenLogprobs[len(ids)], *last)
		}
		for i := 1; i < len(ids); i++ {
			if *lp2.TokenLogprobs[i] != *lp.TokenLogprobs[i] {
				t.Errorf("prompt token %d scored %v and %v", i, *lp2.TokenLogprobs[i], *lp.TokenLogprobs[i])
				break
			}
		}
	} else {
		t.Errorf("the generated token %q re-encodes to %v, not one token", lp.Tokens[len(ids)], next)
	}
	// Streamed: the echo chunk carries the prompt's entries, the next the
	// generated token's; together the whole response's.
	var streamed textLogprobs
	var text strings.Builder
	for _, e := range postStream(t, comp, `{"model":"gotiny","prompt":`+string(idsJSON)+`,"max_tokens":1,"temperature":0,"logprobs":1,"echo":true,"stream":true}`) {
		var ch struct{ Choices []textChoice }
		if json.Unmarshal([]byte(e), &ch) == nil && len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
			if l := ch.Choices[0].Logprobs; l != nil {
				streamed.join(l)
			}
		}
	}
	a, _ := json.Marshal(streamed)
	b, _ := json.Marshal(lp)
	if !bytes.Equal(a, b) || text.String() != gen.text(0) {
		t.Errorf("streamed %q %s, whole %q %s", text.String(), a, gen.text(0), b)
	}
	// max_tokens 0 needs echo.
	if code, body := post(t, context.Background(), comp, `{"model":"gotiny","prompt":"a","max_tokens":0}`); code != 400 {
		t.Errorf("max_tokens 0 without echo: %d %s", code, body)
	}
}

// TestCompatPromptBatch sends a batch of prompts (strings, then token
// ids) with n = 2: choice c is choice c % 2 of prompt c / 2, each the same
// greedy text as that prompt alone, usage counts each prompt once, and a
// stream tags every chunk with its choice.
func TestCompatPromptBatch(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp := ts.url + "/v1/completions"
	prompts := []string{"func main() {", "package main\n", "// Add returns"}
	alone := make([]string, len(prompts))
	tokens := 0
	for i, p := range prompts {
		pj, _ := json.Marshal(p)
		c := postJSON(t, comp, `{"model":"gotiny","prompt":`+string(pj)+`,"max_tokens":8,"temperature":0}`)
		alone[i] = c.text(0)
		tokens += c.Usage.PromptTokens
	}
	for _, form := range []string{"strings", "ids"} {
		var pj []byte
		if form == "strings" {
			pj, _ = json.Marshal(prompts)
		} else {
			ids := make([][]int, len(prompts))
			for i, p := range prompts {
				ids[i] = ts.lm.Tokenizer.Encode(p, true)
			}
			pj, _ = json.Marshal(ids)
		}
		body := `{"model":"gotiny","prompt":` + string(pj) + `,"max_tokens":8,"temperature":0,"n":2`
		c := postJSON(t, comp, body+`}`)
		if len(c.Choices) != 2*len(prompts) {
			t.Fatalf("%s: %d choices for %d prompts with n 2", form, len(c.Choices), len(prompts))
		}
		for k, ch := range c.Choices {
			if ch.Index != k || c.text(k) != alone[k/2] {
				t.Errorf("%s: choice %d (index %d) %q, prompt %d alone %q", form, k, ch.Index, c.text(k), k/2, alone[k/2])
			}
		}
		if c.Usage.PromptTokens != tokens || c.Usage.CompletionTokens != 2*len(prompts)*8 {
			t.Errorf("%s: usage %+v, want %d prompt tokens and %d completion tokens", form, c.Usage, tokens, 2*len(prompts)*8)
		}
		got := make([]string, len(c.Choices))
		for _, e := range postStream(t, comp, body+`,"stream":true}`) {
			var ch struct{ Choices []textChoice }
			if json.Unmarshal([]byte(e), &ch) == nil {
				for _, x := range ch.Choices {
					got[x.Index] += x.Text
				}
			}
		}
		for k := range got {
			if got[k] != alone[k/2] {
				t.Errorf("%s streamed: choice %d %q, want %q", form, k, got[k], alone[k/2])
			}
		}
	}
}

// TestCompatChoices runs n > 1: greedy choices are identical, sampled ones
// reproduce with the seed, a stream tags every chunk with its choice and
// finishes each, and usage counts the prompt once.
func TestCompatChoices(t *testing.T) {
	ts := newGotinyServer(t, 64, 8, nil)
	comp := ts.url + "/v1/completions"
	g := postJSON(t, comp, `{"model":"gotiny","prompt":"func main() {","max_tokens":10,"temperature":0,"n":3}`)
	if len(g.Choices) != 3 || g.text(0) != g.text(1) || g.text(1) != g.text(2) || g.Usage.CompletionTokens != 30 {
		t.Errorf("greedy n=3: %d choices, texts %q %q %q, usage %+v", len(g.Choices), g.text(0), g.text(1), g.text(2), g.Usage)
	}
	for i, ch := range g.Choices {
		if ch.Index != i {
			t.Errorf("choice %d has index %d", i, ch.Index)
		}
	}
	s1 := postJSON(t, comp, `{"model":"gotiny","prompt":"func main() {","max_tokens":16,"temperature":1,"seed":5,"n":4}`)
	s2 := postJSON(t, comp, `{"model":"gotiny","prompt":"func main() {","max_tokens":16,"temperature":1,"seed":5,"n":4}`)
	distinct := map[string]bool{}
	for i := range s1.Choices {
		if s1.text(i) != s2.text(i) {
			t.Errorf("choice %d with the same seed: %q then %q", i, s1.text(i), s2.text(i))
		}
		distinct[s1.text(i)] = true
	}
	if len(distinct) < 2 {
		t.Errorf("4 sampled choices are all %q", s1.text(0))
	}
	texts := map[int]string{}
	finished := map[int]string{}
	for _, e := range postStream(t, ts.url+"/v1/chat/completions", `{"model":"gotiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":1,"seed":3,"n":2,"stream":true}`) {
		var ch struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(e), &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			texts[c.Index] += c.Delta.Content
			if c.FinishReason != nil {
				finished[c.Index] = *c.FinishReason
			}
		}
	}
	if len(finished) != 2 || finished[0] == "" || finished[1] == "" {
		t.Errorf("stream n=2: finishes %v, texts %v", finished, texts)
	}
}

// TestCompatConcurrentAndAborts runs 32 concurrent streams, aborting every
// fourth after its first chunk: the others complete, every greedy text is
// its solo text, and no block stays in use.
func TestCompatConcurrentAndAborts(t *testing.T) {
	ts := newGotinyServer(t, 256, 32, nil)
	chat := ts.url + "/v1/chat/completions"
	prompts := []string{"a loop", "a map", "an error", "a struct"}
	solo := map[string]string{}
	for _, p := range prompts {
		solo[p] = postJSON(t, chat, `{"model":"gotiny","messages":[{"role":"user","content":"`+p+`"}],"max_tokens":24,"temperature":0}`).text(0)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		p := prompts[i%len(prompts)]
		wg.Go(func() {
			body := `{"model":"gotiny","messages":[{"role":"user","content":"` + p + `"}],"max_tokens":24,"temperature":0,"stream":true}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, chat, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			var text strings.Builder
			for sc.Scan() {
				d, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || d == "[DONE]" {
					continue
				}
				if i%4 == 3 {
					return // abort after the first chunk
				}
				var ch struct {
					Choices []struct {
						Delta struct{ Content string } `json:"delta"`
					} `json:"choices"`
				}
				if json.Unmarshal([]byte(d), &ch) == nil && len(ch.Choices) > 0 {
					text.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if text.String() != solo[p] {
				t.Errorf("stream %d (%s): %q, alone %q", i, p, text.String(), solo[p])
			}
		})
	}
	wg.Wait()
	ts.waitIdle(t)
	if st := ts.sched.Stats(); st.Cancelled == 0 {
		t.Errorf("no stream was aborted: %+v", st)
	}
}

// TestCompatNullParameters: a parameter sent as null is the parameter not
// sent, known or not, as the official Python client sends every argument
// given as None (function_call=None, reasoning_effort=None, ...); one that
// this server does not know, with a value, is still refused.
func TestCompatNullParameters(t *testing.T) {
	ts := newGotinyServer(t, 64, 4, nil)
	comp, chat := ts.url+"/v1/completions", ts.url+"/v1/chat/completions"
	const msgs = `"model":"gotiny","messages":[{"role":"user","content":"a loop"}],"max_completion_tokens":8,"temperature":0`
	want := postJSON(t, chat, `{`+msgs+`}`).text(0)
	nulls := `"top_p":null,"n":null,"stop":null,"max_tokens":null,"seed":null,"tools":null,"tool_choice":null,"response_format":null,` +
		`"logprobs":null,"top_logprobs":null,"presence_penalty":null,"frequency_penalty":null,"logit_bias":null,"user":null,` +
		`"parallel_tool_calls":null,"functions":null,"function_call":null,"metadata":null,"store":null,"service_tier":null,` +
		`"modalities":null,"audio":null,"stream_options":null,"prediction":null,"reasoning_effort":null,"web_search_options":null,` +
		`"verbosity":null,"prompt_cache_key":null,"safety_identifier":null,"json_schema":null,"kv_tiers":null`
	if got := postJSON(t, chat, `{`+msgs+`,`+nulls+`}`).text(0); got != want {
		t.Errorf("chat with null parameters: %q, without %q", got, want)
	}
	const prompt = `"model":"gotiny","prompt":"func main() {","max_tokens":8,"temperature":0`
	wantText := postJSON(t, comp, `{`+prompt+`}`).text(0)
	if got := postJSON(t, comp, `{`+prompt+`,"suffix":null,"echo":null,"best_of":null,"logprobs":null,"guided_json":null,"stream":null}`).text(0); got != wantText {
		t.Errorf("completion with null parameters: %q, without %q", got, wantText)
	}
	for _, body := range []string{`{` + msgs + `,"function_call":"auto"}`, `{` + msgs + `,"reasoning_effort":"low"}`, `{` + prompt + `,"guided_json":{}}`} {
		url := chat
		if strings.Contains(body, `"prompt"`) {
			url = comp
		}
		code, b := post(t, t.Context(), url, body)
		if typ, param, ecode, _ := apiErr(t, b); code != 400 || typ != "invalid_request_error" || ecode != "unknown_parameter" || !strings.Contains(body, `"`+param+`":`) {
			t.Errorf("%s: status %d, %s", body, code, b)
		}
	}
}

// TestCompatRequestID: every response of a generation endpoint, errors
// included, carries X-Request-Id (what the official clients read as
// request_id), the response's id: whole, and in every chunk of a stream.
func TestCompatRequestID(t *testing.T) {
	ts := newGotinyServer(t, 64, 4, nil)
	do := func(url, body string) (string, []byte) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("X-Request-Id"), b
	}
	seen := map[string]bool{}
	for _, c := range []struct{ path, body, prefix string }{
		{"/v1/chat/completions", `{"model":"gotiny","messages":[{"role":"user","content":"a loop"}],"max_tokens":4}`, "chatcmpl-"},
		{"/v1/completions", `{"model":"gotiny","prompt":"func","max_tokens":4}`, "cmpl-"},
	} {
		rid, b := do(ts.url+c.path, c.body)
		var r struct{ ID string }
		if err := json.Unmarshal(b, &r); err != nil || rid != r.ID || !strings.HasPrefix(rid, c.prefix) || seen[rid] {
			t.Errorf("%s: X-Request-Id %q, id %q (%v)", c.path, rid, r.ID, err)
		}
		seen[rid] = true
		rid, b = do(ts.url+c.path, c.body[:len(c.body)-1]+`,"stream":true}`)
		events := sseEvents(t, bytes.NewReader(b))
		for _, e := range events[:len(events)-1] {
			if err := json.Unmarshal([]byte(e), &r); err != nil || r.ID != rid {
				t.Errorf("%s stream: X-Request-Id %q, chunk id %q (%v)", c.path, rid, r.ID, err)
			}
		}
		if !strings.HasPrefix(rid, c.prefix) || seen[rid] {
			t.Errorf("%s stream: X-Request-Id %q", c.path, rid)
		}
		seen[rid] = true
		rid, b = do(ts.url+c.path, c.body[:len(c.body)-1]+`,"temperature":5}`)
		if _, param, _, _ := apiErr(t, b); param != "temperature" || !strings.HasPrefix(rid, c.prefix) || seen[rid] {
			t.Errorf("%s error: X-Request-Id %q, %s", c.path, rid, b)
		}
		seen[rid] = true
	}
}

// TestCompatToolStreamContent: a streamed answer with tools reads as the
// whole one does when the clients' stream helpers accumulate its deltas: a
// call alone has content null (no delta carries content, the role chunk
// included), an answer without calls has its content, "" if empty; without
// tools the role chunk carries content "" as before.
func TestCompatToolStreamContent(t *testing.T) {
	ts := newGotinyServer(t, 128, 4, func(c *Config) {
		tok, err := c.Tokenizer.WithChatTemplate(toolTemplate)
		if err != nil {
			t.Fatal(err)
		}
		c.Tokenizer = tok
	})
	chat := ts.url + "/v1/chat/completions"
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}]`
	const base = `{"model":"gotiny","messages":[{"role":"user","content":"Weather in Oslo?"}],"max_tokens":120,"temperature":0,` + tools
	// streamed returns the accumulated content (nil: no delta had any) and
	// the number of calls.
	streamed := func(body string) (*string, int) {
		t.Helper()
		var content *string
		calls := 0
		for _, e := range postStream(t, chat, body) {
			var ch struct {
				Choices []struct {
					Delta map[string]json.RawMessage `json:"delta"`
				} `json:"choices"`
			}
			if e == "[DONE]" || json.Unmarshal([]byte(e), &ch) != nil || len(ch.Choices) == 0 {
				continue
			}
			d := ch.Choices[0].Delta
			if raw, ok := d["content"]; ok {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatalf("content %s: %v", raw, err)
				}
				if content == nil {
					content = new(string)
				}
				*content += s
			}
			var tc []toolCallOut
			if raw, ok := d["tool_calls"]; ok && json.Unmarshal(raw, &tc) == nil {
				calls += len(tc)
			}
		}
		return content, calls
	}
	whole := func(body string) (*string, int, string) {
		t.Helper()
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string       `json:"content"`
					ToolCalls []toolCallOut `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		code, b := post(t, t.Context(), chat, body)
		if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
			t.Fatalf("%s: status %d, %s", body, code, b)
		}
		return r.Choices[0].Message.Content, len(r.Choices[0].Message.ToolCalls), string(b)
	}
	show := func(p *string) string {
		if p == nil {
			return "null"
		}
		return strconv.Quote(*p)
	}
	for _, choice := range []string{`"required","parallel_tool_calls":false`, `{"type":"function","function":{"name":"get_weather"}}`} {
		body := base + `,"tool_choice":` + choice + `}`
		wc, wn, b := whole(body)
		sc, sn := streamed(body[:len(body)-1] + `,"stream":true}`)
		if wc != nil || wn != 1 || sc != nil || sn != 1 {
			t.Errorf("tool_choice %s: whole content %s with %d calls, streamed %s with %d (%s)", choice, show(wc), wn, show(sc), sn, b)
		}
	}
	// "auto", answered with text: the same content whole and streamed; cut
	// by a stop string at its first byte, "" both ways.
	wc, wn, b := whole(base + `,"tool_choice":"auto"}`)
	if wn != 0 || wc == nil || *wc == "" {
		t.Fatalf("auto: %s", b)
	}
	sc, _ := streamed(base + `,"tool_choice":"auto","stream":true}`)
	if sc == nil || *sc != *wc {
		t.Errorf("auto: streamed content %s, whole %s", show(sc), show(wc))
	}
	stop, _ := json.Marshal((*wc)[:1])
	wc, _, b = whole(base + `,"tool_choice":"auto","stop":` + string(stop) + `}`)
	sc, _ = streamed(base + `,"tool_choice":"auto","stop":` + string(stop) + `,"stream":true}`)
	if wc == nil || *wc != "" || sc == nil || *sc != "" {
		t.Errorf("auto, empty answer: whole content %s, streamed %s (%s)", show(wc), show(sc), b)
	}
	// Without tools the role chunk carries content "".
	if ev := postStream(t, chat, `{"model":"gotiny","messages":[{"role":"user","content":"a loop"}],"max_tokens":4,"stream":true}`); !strings.Contains(ev[0], `"delta":{"role":"assistant","content":""}`) {
		t.Errorf("role chunk without tools: %s", ev[0])
	}
}

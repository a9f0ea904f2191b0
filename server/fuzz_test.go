package server

import (
	"testing"
)

// FuzzParseRequest feeds arbitrary bodies to the chat and completion
// parsers: they never panic; an error is an OpenAI error with a 4xx status
// and a message; an accepted request has a prompt of valid token ids, max
// tokens >= 1 that fit the context with the prompt, and valid sampling.
// Seeds are the client fixtures. Run with
//
//	go test ./server -run '^$' -fuzz FuzzParseRequest
func FuzzParseRequest(f *testing.F) {
	ts := newTestServer(f, 40, 4)
	for _, c := range clientFixtures {
		f.Add(c.body)
	}
	for _, m := range malformed {
		f.Add(m.body)
	}
	f.Add(`{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text"}]}],"stop":"","max_tokens":null,"seed":-1}`)
	f.Add(`{"model":"tiny","prompt":[[1,2,3]],"echo":true,"max_tokens":1}`)
	f.Add(`{"model":"tiny","prompt":"a","max_tokens":1,"kv_tiers":"h20:m40:l40"}`)
	limit := ts.sched.ContextLimit()
	vocab := 258
	f.Fuzz(func(t *testing.T, body string) {
		for _, parse := range []func([]byte) (*job, *apiError){ts.srv.parseChat, ts.srv.parseCompletion} {
			j, e := parse([]byte(body))
			if e != nil {
				if e.Status < 400 || e.Status > 499 || e.Message == "" || e.Type == "" {
					t.Fatalf("body %q: error %+v", body, e)
				}
				continue
			}
			if len(j.req.Prompt) == 0 || j.req.MaxTokens < 1 || len(j.req.Prompt)+j.req.MaxTokens > limit {
				t.Fatalf("body %q: accepted prompt of %d tokens with max %d (limit %d)", body, len(j.req.Prompt), j.req.MaxTokens, limit)
			}
			for _, id := range j.req.Prompt {
				if id < 0 || id >= vocab {
					t.Fatalf("body %q: token id %d", body, id)
				}
			}
			if err := j.req.Sample.Validate(); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
		}
	})
}

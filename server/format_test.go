package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// formatSchema admits documents of bounded length: every constrained
// completion must stop within max_tokens.
const formatSchema = `{"type":"object","properties":{"id":{"type":"integer"},"label":{"type":"string","maxLength":5},"kind":{"enum":["a","b"]},"flags":{"type":"array","items":{"type":"boolean"},"maxItems":2}},"required":["id","label","kind","flags"],"additionalProperties":false}`

// checkFormatDoc checks a document against formatSchema.
func checkFormatDoc(doc string) error {
	var v struct {
		ID    *int64  `json:"id"`
		Label *string `json:"label"`
		Kind  *string `json:"kind"`
		Flags []bool  `json:"flags"`
	}
	d := json.NewDecoder(strings.NewReader(doc))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return err
	}
	if v.ID == nil || v.Label == nil || v.Kind == nil || v.Flags == nil || len([]rune(*v.Label)) > 5 ||
		(*v.Kind != "a" && *v.Kind != "b") || len(v.Flags) > 2 {
		return fmt.Errorf("does not match the schema")
	}
	return nil
}

// TestResponseFormat sends json_object and json_schema requests through
// HTTP, chat and completions, streamed and not, with n 2 and sampling:
// every choice that stops parses, and every json_schema one (a bounded
// schema) stops and matches.
func TestResponseFormat(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	chat, comp := ts.url+"/v1/chat/completions", ts.url+"/v1/completions"
	user := `"messages":[{"role":"user","content":"Give me JSON"}]`
	strictSchema := `{"type":"json_schema","json_schema":{"name":"thing","strict":true,"schema":` + formatSchema + `}}`
	for _, c := range []struct {
		name, url, body string
		chat, bounded   bool
	}{
		{"chat json_object", chat, `{"model":"tiny","max_tokens":40,"n":2,"temperature":1,"seed":1,"response_format":{"type":"json_object"},` + user + `}`, true, false},
		{"chat json_schema", chat, `{"model":"tiny","max_tokens":120,"n":2,"temperature":0.9,"top_p":0.95,"seed":2,"logprobs":true,"top_logprobs":2,"response_format":` + strictSchema + `,` + user + `}`, true, true},
		{"chat json_schema greedy", chat, `{"model":"tiny","max_tokens":120,"temperature":0,"response_format":` + strictSchema + `,` + user + `}`, true, true},
		{"completion json_schema", comp, `{"model":"tiny","prompt":"x = ","max_tokens":120,"n":2,"temperature":1,"seed":3,"response_format":` + strictSchema + `}`, false, true},
		{"completion llama.cpp json_schema", comp, `{"model":"tiny","prompt":"x = ","max_tokens":120,"temperature":1,"seed":4,"logprobs":2,"json_schema":` + formatSchema + `}`, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := postJSON(t, c.url, c.body)
			check := func(where, text, finish string) {
				switch {
				case finish == "stop" && !json.Valid([]byte(text)):
					t.Errorf("%s: stopped with %q, not JSON", where, text)
				case c.bounded && finish != "stop":
					t.Errorf("%s: finished %q with %q", where, finish, text)
				case c.bounded:
					if err := checkFormatDoc(text); err != nil {
						t.Errorf("%s: %q: %v", where, text, err)
					}
				case finish != "stop" && finish != "length":
					t.Errorf("%s: finish %q", where, finish)
				}
				if !c.bounded && !strings.HasPrefix(text, "{") {
					t.Errorf("%s: %q does not start an object", where, text)
				}
			}
			for _, ch := range r.Choices {
				text := ch.Text
				if c.chat {
					text = ch.Message.Content
				}
				check(fmt.Sprintf("choice %d", ch.Index), text, ch.FinishReason)
				t.Logf("choice %d (%s): %q", ch.Index, ch.FinishReason, text)
			}
			if strings.Contains(c.body, `"n":2`) && len(r.Choices) != 2 {
				t.Errorf("%d choices", len(r.Choices))
			}
			// Streamed: the same documents come out in pieces.
			body := strings.Replace(c.body, `{"model"`, `{"stream":true,"model"`, 1)
			text, chunks := streamText(t, c.url, body, c.chat)
			finishes := map[float64]string{}
			texts := map[float64]*strings.Builder{}
			for _, ch := range chunks {
				choices, _ := ch["choices"].([]any)
				for _, x := range choices {
					x := x.(map[string]any)
					i := x["index"].(float64)
					if texts[i] == nil {
						texts[i] = &strings.Builder{}
					}
					if c.chat {
						if d, ok := x["delta"].(map[string]any); ok {
							if s, ok := d["content"].(string); ok {
								texts[i].WriteString(s)
							}
						}
					} else if s, ok := x["text"].(string); ok {
						texts[i].WriteString(s)
					}
					if f, ok := x["finish_reason"].(string); ok {
						finishes[i] = f
					}
				}
			}
			if len(texts) != len(r.Choices) || text == "" {
				t.Fatalf("stream: %d choices, want %d", len(texts), len(r.Choices))
			}
			for i, b := range texts {
				check(fmt.Sprintf("stream choice %v", i), b.String(), finishes[i])
			}
		})
	}
}

// TestResponseFormatLength checks that max_tokens cuts a constrained
// document with finish_reason "length" (the text then does not parse:
// the budget is the client's, as in vLLM).
func TestResponseFormatLength(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	code, b := post(t, context.Background(), ts.url+"/v1/chat/completions",
		`{"model":"tiny","max_tokens":2,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"t","schema":`+formatSchema+`}},"messages":[{"role":"user","content":"x"}]}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var r completion
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Choices) != 1 || r.Choices[0].FinishReason != "length" || json.Valid([]byte(r.Choices[0].Message.Content)) ||
		!strings.HasPrefix(r.Choices[0].Message.Content, "{") {
		t.Errorf("got %+v", r.Choices)
	}
}

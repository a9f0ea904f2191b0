package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// respObject is the subset of a Response object the tests read.
type respObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	CreatedAt         int64  `json:"created_at"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error             *responsesError   `json:"error"`
	Instructions      *string           `json:"instructions"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Temperature       float64           `json:"temperature"`
	TopP              float64           `json:"top_p"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	Tools             []responsesTool   `json:"tools"`
	Text              json.RawMessage   `json:"text"`
	Metadata          map[string]string `json:"metadata"`
	Output            []respItem        `json:"output"`
	Usage             *responsesUsage   `json:"usage"`
}

type respItem struct {
	ID        string       `json:"id"`
	Type      string       `json:"type"`
	Status    string       `json:"status"`
	Role      string       `json:"role"`
	Content   []outputText `json:"content"`
	CallID    string       `json:"call_id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
}

// text is the output text of the message items (the SDKs' output_text).
func (r respObject) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type == "message" {
			for _, c := range it.Content {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// calls returns the function_call items.
func (r respObject) calls() []respItem {
	var out []respItem
	for _, it := range r.Output {
		if it.Type == "function_call" {
			out = append(out, it)
		}
	}
	return out
}

// postResponse posts a Responses request that must succeed and checks the
// envelope every response has.
func postResponse(t testing.TB, url, body string) respObject {
	t.Helper()
	code, b := post(t, context.Background(), url+"/v1/responses", body)
	if code != 200 {
		t.Fatalf("%s: status %d: %s", body, code, b)
	}
	var r respObject
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v: %s", body, err, b)
	}
	checkRespEnvelope(t, body, r, b)
	return r
}

// checkRespEnvelope checks the fields the official clients type as
// required, the ids and the usage.
func checkRespEnvelope(t testing.TB, where string, r respObject, raw []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "object", "created_at", "status", "error", "incomplete_details", "instructions", "metadata", "model",
		"output", "parallel_tool_calls", "temperature", "tool_choice", "tools", "top_p", "text", "usage", "max_output_tokens", "truncation"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("%s: no %q in %s", where, k, raw)
		}
	}
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.CreatedAt == 0 || r.Model == "" {
		t.Errorf("%s: envelope %s", where, raw)
	}
	if u := r.Usage; u != nil && (u.InputTokens <= 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || u.OutputTokensDetails.ReasoningTokens != 0) {
		t.Errorf("%s: usage %+v", where, *u)
	}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			if !strings.HasPrefix(it.ID, "msg_") || it.Role != "assistant" || len(it.Content) != 1 || it.Content[0].Type != "output_text" || it.Content[0].Annotations == nil {
				t.Errorf("%s: message item %+v", where, it)
			}
		case "function_call":
			if !strings.HasPrefix(it.ID, "fc_") || !strings.HasPrefix(it.CallID, "call_") || it.Status != "completed" || !json.Valid([]byte(it.Arguments)) {
				t.Errorf("%s: function_call item %+v", where, it)
			}
		default:
			t.Errorf("%s: output item of type %q", where, it.Type)
		}
	}
}

// respEvent is one event of a Responses stream.
type respEvent struct {
	Type string         // the event: line, equal to data's type
	Seq  int            // sequence_number
	Data map[string]any // the data
	Raw  string
}

// postResponseStream posts a streaming request and returns its events,
// checking the framing ("event: T", "data: {...}", a blank line), that
// each data's type is its event line's and that the sequence numbers count
// from 0.
func postResponseStream(t testing.TB, url, body string) []respEvent {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d (%s): %s", body, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readResponseEvents(t, resp.Body)
}

func readResponseEvents(t testing.TB, r io.Reader) []respEvent {
	t.Helper()
	var out []respEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		typ, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			t.Fatalf("SSE: %q where an event: line belongs", sc.Text())
		}
		if !sc.Scan() {
			t.Fatalf("SSE: event %s has no data", typ)
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("SSE: %q after event: %s", sc.Text(), typ)
		}
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("SSE: event %s not followed by a blank line: %q", typ, sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("SSE: %s: %v", data, err)
		}
		if m["type"] != typ {
			t.Fatalf("SSE: event %s carries type %v", typ, m["type"])
		}
		seq, _ := m["sequence_number"].(float64)
		if int(seq) != len(out) || !strings.HasPrefix(data, `{"type":`) {
			t.Fatalf("SSE: event %d (%s) has sequence_number %v", len(out), typ, m["sequence_number"])
		}
		out = append(out, respEvent{Type: typ, Seq: int(seq), Data: m, Raw: data})
	}
	return out
}

// eventTypes lists the events' types.
func eventTypes(evs []respEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// lastResponse decodes the response of the stream's last event.
func lastResponse(t testing.TB, evs []respEvent) respObject {
	t.Helper()
	raw, _ := json.Marshal(evs[len(evs)-1].Data["response"])
	var r respObject
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	checkRespEnvelope(t, "the last event's response", r, raw)
	return r
}

// checkMessageStream checks the events of a streamed answer that is a
// message: created, in_progress, the item and part added, deltas, the
// text, part and item done, then end; every message event names the item,
// output 0 and content 0. It returns the deltas' text and log
// probabilities.
func checkMessageStream(t testing.TB, evs []respEvent, end string) (string, []any) {
	t.Helper()
	types := eventTypes(evs)
	head := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	tail := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", end}
	if len(types) < len(head)+len(tail) || fmt.Sprint(types[:len(head)]) != fmt.Sprint(head) || fmt.Sprint(types[len(types)-len(tail):]) != fmt.Sprint(tail) {
		t.Fatalf("events %v", types)
	}
	item := evs[2].Data["item"].(map[string]any)
	if item["type"] != "message" || item["status"] != "in_progress" || len(item["content"].([]any)) != 0 {
		t.Errorf("output_item.added %s", evs[2].Raw)
	}
	created := evs[0].Data["response"].(map[string]any)
	if created["status"] != "in_progress" || len(created["output"].([]any)) != 0 || created["usage"] != nil || created["id"] != evs[len(evs)-1].Data["response"].(map[string]any)["id"] {
		t.Errorf("response.created %s", evs[0].Raw)
	}
	var text strings.Builder
	var lps []any
	for _, e := range evs[3 : len(evs)-1] {
		if e.Type == "response.output_item.done" {
			continue
		}
		if e.Data["item_id"] != item["id"] || e.Data["output_index"] != 0.0 || e.Data["content_index"] != 0.0 {
			t.Errorf("%s: routing %s", e.Type, e.Raw)
		}
		if e.Type == "response.output_text.delta" {
			text.WriteString(e.Data["delta"].(string))
			lps = append(lps, e.Data["logprobs"].([]any)...)
		}
	}
	if done := evs[len(evs)-4].Data["text"]; done != text.String() {
		t.Errorf("output_text.done %q, deltas %q", done, text.String())
	}
	return text.String(), lps
}

// chatOf posts a chat completion and returns its text, finish reason and
// usage.
func chatOf(t testing.TB, url, body string) (string, string, usage) {
	t.Helper()
	c := postJSON(t, url+"/v1/chat/completions", body)
	return c.text(0), c.Choices[0].FinishReason, c.Usage
}

// TestResponsesMatchesChat: a Responses request is the chat completion of
// the same conversation: instructions as a system message first, message
// items as messages (text parts joined, developer as system, an assistant
// turn's output_text), max_output_tokens as max_completion_tokens, the
// sampling extensions as in chat. Greedy and seeded: the same text, the
// same usage, status incomplete exactly when the chat finishes on length.
func TestResponsesMatchesChat(t *testing.T) {
	var reqlog bytes.Buffer
	var mu sync.Mutex
	ts := newGotinyServer(t, 128, 8, func(c *Config) { c.RequestLog = &lockedWriter{mu: &mu, w: &reqlog} })
	for _, c := range []struct {
		name, resp, chat string
	}{
		{"string input",
			`"input":"func main() {"`,
			`"messages":[{"role":"user","content":"func main() {"}]`},
		{"instructions and a message list",
			`"instructions":"You write Go.","input":[{"role":"user","content":"Write a loop."},{"role":"assistant","content":[{"type":"output_text","text":"for {}","annotations":[]}],"id":"msg_1","status":"completed","type":"message"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Now "},{"type":"input_text","text":"a map."}]}]`,
			`"messages":[{"role":"system","content":"You write Go."},{"role":"user","content":"Write a loop."},{"role":"assistant","content":"for {}"},{"role":"user","content":"Now a map."}]`},
		{"developer message",
			`"input":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"input_text","text":"hi"}]}]`,
			`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`},
	} {
		for _, sampling := range []string{`"temperature":0`, `"temperature":0.9,"top_p":0.95,"top_k":40,"min_p":0.02,"repetition_penalty":1.1,"seed":7`} {
			r := postResponse(t, ts.url, `{"model":"gotiny",`+c.resp+`,"max_output_tokens":24,`+sampling+`}`)
			text, finish, u := chatOf(t, ts.url, `{"model":"gotiny",`+c.chat+`,"max_completion_tokens":24,`+sampling+`}`)
			where := c.name + " " + sampling
			if r.text() != text || text == "" {
				t.Errorf("%s: responses %q, chat %q", where, r.text(), text)
			}
			if r.Usage.InputTokens != u.PromptTokens || r.Usage.OutputTokens != u.CompletionTokens || r.Usage.TotalTokens != u.TotalTokens {
				t.Errorf("%s: usage %+v, chat %+v", where, *r.Usage, u)
			}
			if (r.Status == "incomplete") != (finish == "length") || (r.Status != "completed" && r.Status != "incomplete") {
				t.Errorf("%s: status %q, chat finish %q", where, r.Status, finish)
			}
			if len(r.Output) != 1 || r.Output[0].Status != r.Status {
				t.Errorf("%s: output %+v for status %q", where, r.Output, r.Status)
			}
		}
	}
	// The echoed settings.
	r := postResponse(t, ts.url, `{"model":"gotiny","input":"a","instructions":"b","max_output_tokens":2,"temperature":0.5,"top_p":0.9,"parallel_tool_calls":false,"metadata":{"k":"v"},"store":false,"user":"u1","truncation":"disabled","service_tier":"auto","prompt_cache_key":"x","background":false,"reasoning":null}`)
	if r.Instructions == nil || *r.Instructions != "b" || *r.MaxOutputTokens != 2 || r.Temperature != 0.5 || r.TopP != 0.9 || r.ParallelToolCalls ||
		r.Metadata["k"] != "v" || string(r.ToolChoice) != `"auto"` || len(r.Tools) != 0 || string(r.Text) != `{"format":{"type":"text"},"verbosity":null}` {
		t.Errorf("echo: %+v", r)
	}
	d := postResponse(t, ts.url, `{"model":"gotiny","input":"a","max_output_tokens":2}`)
	if d.Temperature != 1 || d.TopP != 1 || !d.ParallelToolCalls || d.Instructions != nil || len(d.Metadata) != 0 {
		t.Errorf("defaults: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(reqlog.String(), " responses choices=1 "); n != 8 {
		t.Errorf("%d request log lines of endpoint responses, want 8:\n%s", n, reqlog.String())
	}
}

// lockedWriter serializes writes to w (the request log is written from
// handlers and read by the test).
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestResponsesStream: a streamed response is the whole one as events, in
// order, with sequence numbers from 0: the deltas spell the text, their
// log probabilities are the whole response's, and the last event's
// response (completed or incomplete) has the whole response's output and
// usage.
func TestResponsesStream(t *testing.T) {
	ts := newGotinyServer(t, 128, 8, nil)
	for _, c := range []struct {
		body, end string
	}{
		{`"input":"func main() {","max_output_tokens":24,"temperature":0`, "response.incomplete"},
		{`"instructions":"Go.","input":[{"role":"user","content":"a loop"}],"max_output_tokens":40,"temperature":1,"seed":3,"include":["message.output_text.logprobs"],"top_logprobs":2`, ""},
		{`"input":"package main","max_output_tokens":30,"temperature":0,"stop":["\n"]`, "response.completed"},
	} {
		whole := postResponse(t, ts.url, `{"model":"gotiny",`+c.body+`}`)
		evs := postResponseStream(t, ts.url, `{"model":"gotiny",`+c.body+`,"stream":true}`)
		end := c.end
		if end == "" {
			end = map[string]string{"completed": "response.completed", "incomplete": "response.incomplete"}[whole.Status]
		}
		text, lps := checkMessageStream(t, evs, end)
		final := lastResponse(t, evs)
		if text != whole.text() || final.text() != whole.text() {
			t.Errorf("%s: streamed %q (final %q), whole %q", c.body, text, final.text(), whole.text())
		}
		if final.Status != whole.Status || *final.Usage != *whole.Usage || len(final.Output) != 1 || final.Output[0].Status != whole.Output[0].Status {
			t.Errorf("%s: final %+v, whole %+v", c.body, final, whole)
		}
		a, b, f := normJSON(lps), normJSON(whole.Output[0].Content[0].Logprobs), normJSON(final.Output[0].Content[0].Logprobs)
		if a != b || f != b {
			t.Errorf("%s: streamed logprobs %.300s, final %.300s, whole %.300s", c.body, a, f, b)
		}
		if strings.Contains(c.body, "logprobs") {
			var spelled []byte
			for _, lp := range whole.Output[0].Content[0].Logprobs {
				for _, x := range lp.Bytes {
					spelled = append(spelled, byte(x))
				}
				if len(lp.TopLogprobs) != 2 || lp.Logprob > 0 {
					t.Errorf("logprob %+v", lp)
				}
			}
			if string(spelled) != whole.text() || len(whole.Output[0].Content[0].Logprobs) != whole.Usage.OutputTokens {
				t.Errorf("%d logprobs spell %q for %d tokens of %q", len(whole.Output[0].Content[0].Logprobs), spelled, whole.Usage.OutputTokens, whole.text())
			}
		}
	}
}

// normJSON is v's JSON with objects' keys sorted (v marshalled, read back
// as generic values, marshalled again).
func normJSON(v any) string {
	b, _ := json.Marshal(v)
	var g any
	_ = json.Unmarshal(b, &g)
	if g == nil {
		g = []any{}
	}
	out, _ := json.Marshal(g)
	return string(out)
}

// TestResponsesIncomplete: max_output_tokens cuts the answer: status
// incomplete with reason max_output_tokens, the message incomplete.
func TestResponsesIncomplete(t *testing.T) {
	ts := newGotinyServer(t, 64, 4, nil)
	r := postResponse(t, ts.url, `{"model":"gotiny","input":"func main() {","max_output_tokens":3,"temperature":0}`)
	if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" ||
		r.Usage.OutputTokens != 3 || len(r.Output) != 1 || r.Output[0].Status != "incomplete" || r.text() == "" {
		t.Errorf("%+v", r)
	}
	evs := postResponseStream(t, ts.url, `{"model":"gotiny","input":"func main() {","max_output_tokens":3,"temperature":0,"stream":true}`)
	checkMessageStream(t, evs, "response.incomplete")
	if f := lastResponse(t, evs); f.Status != "incomplete" || f.IncompleteDetails == nil || f.IncompleteDetails.Reason != "max_output_tokens" || f.text() != r.text() {
		t.Errorf("streamed: %+v", f)
	}
	// A complete answer has no incomplete_details.
	c := postResponse(t, ts.url, `{"model":"gotiny","input":"package main","max_output_tokens":30,"temperature":0,"stop":["\n"]}`)
	if c.Status != "completed" || c.IncompleteDetails != nil || c.Output[0].Status != "completed" {
		t.Errorf("stopped: %+v", c)
	}
}

// TestResponsesJSONSchema: text.format json_schema constrains the output
// (the chat path's grammar): the text matches the schema, whole and
// streamed, and equals the chat completion's with response_format;
// json_object gives a JSON object.
func TestResponsesJSONSchema(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	user := `"input":[{"role":"user","content":"Give me JSON"}]`
	format := `"text":{"format":{"type":"json_schema","name":"thing","strict":true,"schema":` + formatSchema + `}}`
	r := postResponse(t, ts.url, `{"model":"tiny",`+user+`,"max_output_tokens":120,"temperature":0,`+format+`}`)
	if r.Status != "completed" {
		t.Fatalf("status %s: %q", r.Status, r.text())
	}
	if err := checkFormatDoc(r.text()); err != nil {
		t.Errorf("%q: %v", r.text(), err)
	}
	var echo struct {
		Format responsesFormat `json:"format"`
	}
	if err := json.Unmarshal(r.Text, &echo); err != nil || echo.Format.Type != "json_schema" || echo.Format.Name != "thing" || !*echo.Format.Strict || !json.Valid(echo.Format.Schema) {
		t.Errorf("text echoed as %s", r.Text)
	}
	text, _, _ := chatOf(t, ts.url, `{"model":"tiny","messages":[{"role":"user","content":"Give me JSON"}],"max_completion_tokens":120,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"thing","strict":true,"schema":`+formatSchema+`}}}`)
	if text != r.text() {
		t.Errorf("responses %q, chat %q", r.text(), text)
	}
	for seed := range 3 {
		body := fmt.Sprintf(`{"model":"tiny",%s,"max_output_tokens":120,"temperature":1,"seed":%d,%s,"stream":true}`, user, seed, format)
		evs := postResponseStream(t, ts.url, body)
		streamed, _ := checkMessageStream(t, evs, "response.completed")
		if err := checkFormatDoc(streamed); err != nil {
			t.Errorf("seed %d streamed %q: %v", seed, streamed, err)
		}
	}
	o := postResponse(t, ts.url, `{"model":"tiny",`+user+`,"max_output_tokens":60,"temperature":1,"seed":5,"text":{"format":{"type":"json_object"}}}`)
	var obj map[string]any
	if o.Status == "completed" && json.Unmarshal([]byte(o.text()), &obj) != nil {
		t.Errorf("json_object: %q", o.text())
	}
	if !strings.HasPrefix(strings.TrimSpace(o.text()), "{") {
		t.Errorf("json_object: %q", o.text())
	}
}

const respTools = `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":6}},"required":["city"]}},` +
	`{"type":"function","name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},"strict":true}]`

// TestResponsesToolRoundTrip: a named tool_choice gives a function_call
// item (whole and streamed, with the function call events), "required"
// with parallel_tool_calls false one call; the call goes back as input
// items (the response's own output, then a function_call_output) and the
// answer is the chat completion's for the same conversation with
// tool_calls and a tool message; an assistant message right before the
// calls is the same chat turn as its content.
func TestResponsesToolRoundTrip(t *testing.T) {
	ts := newGotinyServer(t, 128, 8, nil)
	user := `{"role":"user","content":"Weather in Paris?"}`
	named := postResponse(t, ts.url, `{"model":"gotiny","input":[`+user+`],`+respTools+`,"tool_choice":{"type":"function","name":"get_weather"},"max_output_tokens":60,"temperature":0}`)
	calls := named.calls()
	if named.Status != "completed" || len(named.Output) != 1 || len(calls) != 1 || calls[0].Name != "get_weather" {
		t.Fatalf("named: %+v", named)
	}
	var args struct {
		City *string `json:"city"`
	}
	if json.Unmarshal([]byte(calls[0].Arguments), &args) != nil || args.City == nil || utf8.RuneCountInString(*args.City) > 6 {
		t.Errorf("arguments %s do not match the schema", calls[0].Arguments)
	}
	if len(named.Tools) != 2 || named.Tools[0].Name != "get_weather" || *named.Tools[0].Strict || !*named.Tools[1].Strict || string(named.ToolChoice) != `{"name":"get_weather","type":"function"}` {
		t.Errorf("echo: tools %+v, tool_choice %s", named.Tools, named.ToolChoice)
	}
	// Streamed: the function call's events, the same arguments.
	evs := postResponseStream(t, ts.url, `{"model":"gotiny","input":[`+user+`],`+respTools+`,"tool_choice":{"type":"function","name":"get_weather"},"max_output_tokens":60,"temperature":0,"stream":true}`)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if fmt.Sprint(eventTypes(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v", eventTypes(evs))
	}
	added := evs[2].Data["item"].(map[string]any)
	doneItem := evs[5].Data["item"].(map[string]any)
	if added["type"] != "function_call" || added["arguments"] != "" || added["status"] != "in_progress" || added["id"] != doneItem["id"] || added["call_id"] != doneItem["call_id"] ||
		evs[3].Data["delta"] != calls[0].Arguments || evs[4].Data["arguments"] != calls[0].Arguments || doneItem["arguments"] != calls[0].Arguments ||
		evs[3].Data["item_id"] != added["id"] || evs[4].Data["item_id"] != added["id"] || evs[3].Data["output_index"] != 0.0 {
		t.Errorf("function call events:\n%s\n%s\n%s\n%s", evs[2].Raw, evs[3].Raw, evs[4].Raw, evs[5].Raw)
	}
	if f := lastResponse(t, evs); len(f.calls()) != 1 || f.calls()[0].Arguments != calls[0].Arguments || f.calls()[0].CallID != added["call_id"] {
		t.Errorf("final: %+v", f)
	}
	// "required", at most one call.
	req := postResponse(t, ts.url, `{"model":"gotiny","input":[`+user+`],`+respTools+`,"tool_choice":"required","parallel_tool_calls":false,"max_output_tokens":200,"temperature":0}`)
	if len(req.calls()) != 1 || req.text() != "" || req.Status != "completed" {
		t.Errorf("required: %+v", req)
	}
	// The round trip: the response's output goes back with the result.
	item, _ := json.Marshal(named.Output[0])
	callID := calls[0].CallID
	result := `{"type":"function_call_output","call_id":"` + callID + `","output":"sunny"}`
	chatCall := `{"id":"` + callID + `","type":"function","function":{"name":"get_weather","arguments":` + string(jsonString(calls[0].Arguments)) + `}}`
	for _, c := range []struct {
		name, input, messages string
	}{
		{"calls alone",
			user + `,` + string(item) + `,` + result,
			user + `,{"role":"assistant","content":null,"tool_calls":[` + chatCall + `]},{"role":"tool","tool_call_id":"` + callID + `","content":"sunny"}`},
		{"a message, then its calls, then a result in parts",
			user + `,{"role":"assistant","content":"Let me look."},` + string(item) + `,{"type":"function_call_output","call_id":"` + callID + `","output":[{"type":"input_text","text":"sun"},{"type":"input_text","text":"ny"}]},{"role":"user","content":"Thanks."}`,
			user + `,{"role":"assistant","content":"Let me look.","tool_calls":[` + chatCall + `]},{"role":"tool","tool_call_id":"` + callID + `","content":"sunny"},{"role":"user","content":"Thanks."}`},
	} {
		f := postResponse(t, ts.url, `{"model":"gotiny","input":[`+c.input+`],`+respTools+`,"tool_choice":"none","max_output_tokens":16,"temperature":0}`)
		text, _, u := chatOf(t, ts.url, `{"model":"gotiny","messages":[`+c.messages+`],"tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":"none","max_completion_tokens":16,"temperature":0}`)
		if len(f.Output) != 1 || f.Output[0].Type != "message" || f.text() != text || f.Usage.InputTokens != u.PromptTokens {
			t.Errorf("%s: responses %q (%d input tokens), chat %q (%d)", c.name, f.text(), f.Usage.InputTokens, text, u.PromptTokens)
		}
	}
	// Without tool_choice "none" the tools reach the template: gotiny's
	// does not show them, so "auto" (the default) is refused as in chat.
	code, b := post(t, t.Context(), ts.url+"/v1/responses", `{"model":"gotiny","input":"hi",`+respTools+`}`)
	if _, param, _, msg := apiErr(t, b); code != 400 || param != "tools" || !strings.Contains(msg, "does not show the model its tools") {
		t.Errorf("auto without a tool template: %d %s", code, b)
	}
}

// TestResponsesRefused: what the server cannot honour is a 400 naming the
// parameter (OpenAI's error object), never silently ignored; what cannot
// change the answer is accepted.
func TestResponsesRefused(t *testing.T) {
	ts := newGotinyServer(t, 64, 4, nil)
	in := `"model":"gotiny","input":"hi","max_output_tokens":2`
	for _, c := range []struct {
		body, param, code string
	}{
		{`"previous_response_id":"resp_1"`, "previous_response_id", "unsupported_parameter"},
		{`"conversation":"conv_1"`, "conversation", "unsupported_parameter"},
		{`"conversation":{"id":"conv_1"}`, "conversation", "unsupported_parameter"},
		{`"background":true`, "background", "unsupported_parameter"},
		{`"reasoning":{"effort":"high"}`, "reasoning", "unsupported_parameter"},
		{`"reasoning":"high"`, "reasoning", "unsupported_parameter"},
		{`"prompt":{"id":"pmpt_1"}`, "prompt", "unsupported_parameter"},
		{`"truncation":"auto"`, "truncation", "unsupported_value"},
		{`"truncation":"sometimes"`, "truncation", "invalid_value"},
		{`"text":{"verbosity":"low"}`, "text.verbosity", "unsupported_parameter"},
		{`"text":{"format":{"type":"xml"}}`, "text.format.type", "invalid_value"},
		{`"text":{"format":{"type":"json_schema","name":"x"}}`, "text.format.schema", "missing_required_parameter"},
		{`"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"string","format":"email"}}}`, "text.format.schema", "unsupported_schema_keyword"},
		{`"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"nope"}}}`, "text.format.schema", "invalid_schema"},
		{`"include":["file_search_call.results"]`, "include[0]", "unsupported_value"},
		{`"top_logprobs":3`, "top_logprobs", ""},
		{`"include":["message.output_text.logprobs"],"top_logprobs":21`, "top_logprobs", "integer_out_of_range"},
		{`"tools":[{"type":"web_search"}]`, "tools[0].type", "unsupported_value"},
		{`"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]`, "tools[0].type", "unsupported_value"},
		{`"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`, "tools[0].type", "unsupported_value"},
		{`"tools":[{"type":"function","name":"bad name"}]`, "tools[0].name", "invalid_value"},
		{`"tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]`, "tools[1].name", "invalid_value"},
		{`"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"e":{"type":"string","pattern":"a+"}}}}],"tool_choice":{"type":"function","name":"f"}`, "tools[0].parameters", "unsupported_schema_keyword"},
		{`"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}`, "tool_choice.name", "invalid_value"},
		{`"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"web_search_preview"}`, "tool_choice.type", "unsupported_value"},
		{`"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`, "tool_choice.type", "unsupported_value"},
		{`"tool_choice":"required"`, "tool_choice", ""},
		{`"tool_choice":"sometimes"`, "tool_choice", "invalid_value"},
		{`"max_output_tokens":0`, "max_output_tokens", "integer_below_min_value"},
		{`"max_output_tokens":100000`, "input", "context_length_exceeded"},
		{`"temperature":3`, "temperature", "decimal_out_of_range"},
		{`"top_k":-2`, "top_k", "integer_below_min_value"},
		{`"stop":["a","b","c","d","e"]`, "stop", "array_above_max_length"},
		{`"kv_tiers":"h100"`, "kv_tiers", "unsupported_parameter"},
		{`"stream_options":{"include_obfuscation":false}`, "stream_options", ""},
		{`"n":2`, "n", "unknown_parameter"},
		{`"messages":[]`, "messages", "unknown_parameter"},
		{`"metadata":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10","k":"11","l":"12","m":"13","n":"14","o":"15","p":"16","q":"17"}`, "metadata", "object_above_max_properties"},
		{`"metadata":{"k":"` + strings.Repeat("v", 513) + `"}`, "metadata.k", "string_above_max_length"},
		{`"metadata":{"k":null}`, "metadata.k", "invalid_type"},
	} {
		body := "{" + in + "," + c.body + "}"
		code, b := post(t, t.Context(), ts.url+"/v1/responses", body)
		typ, param, ecode, msg := apiErr(t, b)
		if code != 400 || typ != "invalid_request_error" || param != c.param || ecode != c.code || msg == "" {
			t.Errorf("%s: %d %s %q %q, want 400 %q %q: %s", c.body, code, typ, param, ecode, c.param, c.code, msg)
		}
		// The message speaks of the Responses request's fields, not of
		// the chat request it became.
		for _, chat := range []string{"response_format", "max_completion_tokens", "messages", ".function."} {
			if strings.Contains(msg, chat) && c.param != chat {
				t.Errorf("%s: the message names %q: %s", c.body, chat, msg)
			}
		}
	}
	for _, c := range []struct {
		input, param, code string
	}{
		{`[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"}]}]`, "input[0].content[0].type", "unsupported_content"},
		{`[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]`, "input[0].content[0].type", "unsupported_content"},
		{`[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`, "input[0].content[0].type", "unsupported_content"},
		{`[{"role":"user","content":[{"type":"output_text","text":"x"}]}]`, "input[0].content[0].type", "invalid_value"},
		{`[{"role":"user","content":[{"type":"text","text":"x"}]}]`, "input[0].content[0].type", "invalid_value"},
		{`[{"role":"user","content":"a"},{"type":"item_reference","id":"msg_1"}]`, "input[1].type", "unsupported_value"},
		{`[{"type":"reasoning","id":"rs_1","summary":[]}]`, "input[0].type", "unsupported_value"},
		{`[{"type":"web_search_call","id":"ws_1","status":"completed"}]`, "input[0].type", "unsupported_value"},
		{`[{"role":"tool","content":"a"}]`, "input[0].role", "invalid_value"},
		{`[{"type":"function_call_output","call_id":"call_9","output":"x"}]`, "input[0].call_id", "invalid_value"},
		{`[{"type":"function_call","name":"f","arguments":"{}"}]`, "input[0].call_id", "missing_required_parameter"},
		{`[{"type":"function_call","call_id":"c","arguments":"{}"}]`, "input[0].name", "missing_required_parameter"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]`, "input[0].arguments", "invalid_type"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]`, "input[1].output[0].type", "unsupported_content"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c"}]`, "input[1].output", "missing_required_parameter"},
	} {
		body := `{"model":"gotiny","max_output_tokens":2,"input":` + c.input + `}`
		code, b := post(t, t.Context(), ts.url+"/v1/responses", body)
		_, param, ecode, msg := apiErr(t, b)
		if code != 400 || param != c.param || ecode != c.code || msg == "" {
			t.Errorf("%s: %d %q %q, want 400 %q %q: %s", c.input, code, param, ecode, c.param, c.code, msg)
		}
	}
	// The model is checked as at the other endpoints.
	code, b := post(t, t.Context(), ts.url+"/v1/responses", `{"model":"gpt-4o","input":"hi"}`)
	if _, param, ecode, _ := apiErr(t, b); code != 404 || param != "model" || ecode != "model_not_found" {
		t.Errorf("unknown model: %d %s", code, b)
	}
	// Accepted: what cannot change the answer, and the null or false forms
	// of the refused fields.
	for _, extra := range []string{`"store":true`, `"store":false`, `"background":false`, `"reasoning":null`, `"reasoning":{"effort":null}`,
		`"previous_response_id":null`, `"conversation":null`, `"truncation":"disabled"`, `"user":"u"`, `"safety_identifier":"s"`, `"service_tier":"auto"`,
		`"prompt_cache_key":"k"`, `"prompt_cache_retention":"24h"`, `"max_tool_calls":3`, `"include":[]`, `"top_logprobs":0`, `"text":{"format":{"type":"text"},"verbosity":null}`,
		`"tool_choice":"auto"`, `"tool_choice":"none"`, `"tools":[]`, `"stream":false`, `"instructions":null`, `"metadata":null`, `"input":[{"type":"message","role":"user","content":"x","status":"completed","id":"msg_1"}]`} {
		body := "{" + in + "," + extra + "}"
		if code, b := post(t, t.Context(), ts.url+"/v1/responses", body); code != 200 {
			t.Errorf("%s: %d %s", extra, code, b)
		}
	}
}

// TestResponsesHostile: malformed requests (wrong types, nulls, huge or
// deep arrays) are 400s in OpenAI's error shape, never 500s, and parsing
// stays within the parse budget.
func TestResponsesHostile(t *testing.T) {
	ts := newTestServer(t, 40, 4) // a 64 KiB body limit
	url := ts.url + "/v1/responses"
	for _, c := range []struct {
		body, param string
	}{
		{``, ""},
		{`[]`, ""},
		{`"hi"`, ""},
		{`{"model":"tiny"`, ""},
		{`{"model":"tiny"}`, "input"},
		{`{"model":"tiny","input":null}`, "input"},
		{`{"model":"tiny","input":5}`, "input"},
		{`{"model":"tiny","input":{}}`, "input"},
		{`{"model":"tiny","input":[]}`, "input"},
		{`{"model":"tiny","input":[null]}`, "input[0]"},
		{`{"model":"tiny","input":[5]}`, "input[0]"},
		{`{"model":"tiny","input":["hi"]}`, "input[0]"},
		{`{"model":"tiny","input":[[]]}`, "input[0]"},
		{`{"model":"tiny","input":[{}]}`, "input[0].type"},
		{`{"model":"tiny","input":[{"role":"user"}]}`, "input[0].content"},
		{`{"model":"tiny","input":[{"role":"user","content":null}]}`, "input[0].content"},
		{`{"model":"tiny","input":[{"role":"user","content":5}]}`, "input[0].content"},
		{`{"model":"tiny","input":[{"role":"user","content":[null]}]}`, "input[0].content[0]"},
		{`{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text"},
		{`{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text","text":5}]}]}`, "input[0].content[0].text"},
		{`{"model":"tiny","input":[{"role":5,"content":"x"}]}`, "input[0].role"},
		{`{"model":"tiny","input":[{"type":7}]}`, "input[0].type"},
		{`{"model":"tiny","input":[{"type":"function_call","call_id":5,"name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{`{"model":"tiny","input":"x","instructions":5}`, "instructions"},
		{`{"model":"tiny","input":"x","max_output_tokens":"5"}`, "max_output_tokens"},
		{`{"model":"tiny","input":"x","max_output_tokens":-9223372036854775808}`, "max_output_tokens"},
		{`{"model":"tiny","input":"x","max_output_tokens":9223372036854775807}`, "input"},
		{`{"model":"tiny","input":"x","max_output_tokens":1e30}`, "max_output_tokens"},
		{`{"model":"tiny","input":"x","temperature":"hot"}`, "temperature"},
		{`{"model":"tiny","input":"x","stream":"yes"}`, "stream"},
		{`{"model":"tiny","input":"x","metadata":[]}`, "metadata"},
		{`{"model":"tiny","input":"x","metadata":{"k":5}}`, "metadata"},
		{`{"model":"tiny","input":"x","tools":{}}`, "tools"},
		{`{"model":"tiny","input":"x","tools":[null]}`, "tools[0]"},
		{`{"model":"tiny","input":"x","tools":["f"]}`, "tools[0]"},
		{`{"model":"tiny","input":"x","tools":[{"type":"function","name":"f","parameters":"x"}]}`, "tools[0].parameters"},
		{`{"model":"tiny","input":"x","tools":[{"type":"function","name":5}]}`, "tools[0].name"},
		{`{"model":"tiny","input":"x","tool_choice":5}`, "tool_choice"},
		{`{"model":"tiny","input":"x","tool_choice":[]}`, "tool_choice"},
		{`{"model":"tiny","input":"x","tool_choice":{"type":"function"}}`, "tool_choice.name"},
		{`{"model":"tiny","input":"x","text":"json"}`, "text"},
		{`{"model":"tiny","input":"x","text":{"format":"json"}}`, "text.format"},
		{`{"model":"tiny","input":"x","text":{"format":{}}}`, "text.format.type"},
		{`{"model":"tiny","input":"x","include":"all"}`, "include"},
		{`{"model":"tiny","input":"x","include":[null]}`, "include[0]"},
		{`{"model":"tiny","input":"x","parallel_tool_calls":"no"}`, "parallel_tool_calls"},
		{`{"model":"tiny","input":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`, ""},
	} {
		code, b := post(t, t.Context(), url, c.body)
		if code != 400 {
			t.Errorf("%.80s: status %d, want 400: %.300s", c.body, code, b)
			continue
		}
		if _, param, _, _ := apiErr(t, b); param != c.param {
			t.Errorf("%.80s: param %q, want %q: %.300s", c.body, param, c.param, b)
		}
	}
	// Long inputs: 1,500 messages render and are refused for the context;
	// 4,000 invalid items stop at the first.
	var many []string
	for range 1500 {
		many = append(many, `{"role":"user","content":"x"}`)
	}
	code, b := post(t, t.Context(), url, `{"model":"tiny","input":[`+strings.Join(many, ",")+`]}`)
	if _, param, ecode, _ := apiErr(t, b); code != 400 || param != "input" || ecode != "context_length_exceeded" {
		t.Errorf("1,500 messages: %d %.300s", code, b)
	}
	code, b = post(t, t.Context(), url, `{"model":"tiny","input":[`+strings.Repeat(`{"type":"x"},`, 4000)+`{}]}`)
	if _, param, _, _ := apiErr(t, b); code != 400 || param != "input[0].type" {
		t.Errorf("4,000 invalid items: %d %.300s", code, b)
	}
	// Over the body limit: 413, as everywhere.
	code, b = post(t, t.Context(), url, `{"model":"tiny","input":"`+strings.Repeat("x", 70<<10)+`"}`)
	if _, _, ecode, _ := apiErr(t, b); code != 413 || ecode != "request_too_large" {
		t.Errorf("70 KiB body: %d %.300s", code, b)
	}
	// Many long inputs at once parse within the budget (twice the body
	// limit) and each is answered.
	body := `{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text","text":"` + strings.Repeat("x", 60<<10) + `"}]}]}`
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			code, b := post(t, context.Background(), url, body)
			if _, _, ecode, _ := apiErr(t, b); code != 400 || ecode != "context_length_exceeded" {
				t.Errorf("status %d, %.300s", code, b)
			}
		})
	}
	wg.Wait()
	bb := ts.srv.parsing
	bb.mu.Lock()
	used := bb.used
	bb.mu.Unlock()
	if peak := bb.peakUsed(); peak < int64(len(body)) || peak > 128<<10 || used != 0 {
		t.Errorf("peak %d bytes parsed at once (budget %d), %d in use after", peak, 128<<10, used)
	}
	// The server still answers.
	if r := postResponse(t, ts.url, `{"model":"tiny","input":"x","max_output_tokens":2}`); r.Usage.OutputTokens != 2 {
		t.Errorf("after: %+v", r)
	}
}

// TestResponsesStored: nothing is stored, so the endpoints of stored
// responses answer 404 saying so; the wrong method on /v1/responses is 405.
func TestResponsesStored(t *testing.T) {
	ts := newTestServer(t, 40, 4)
	for _, c := range []struct {
		method, path, code string
	}{
		{http.MethodGet, "/v1/responses/resp_1", "response_not_found"},
		{http.MethodDelete, "/v1/responses/resp_1", "response_not_found"},
		{http.MethodGet, "/v1/responses/resp_1/input_items", "response_not_found"},
		{http.MethodPost, "/v1/responses/resp_1/cancel", "response_not_found"},
		{http.MethodPost, "/v1/responses/input_tokens", "unsupported_endpoint"},
	} {
		req, _ := http.NewRequest(c.method, ts.url+c.path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if _, _, ecode, msg := apiErr(t, b); resp.StatusCode != 404 || ecode != c.code || (c.code == "response_not_found" && !strings.Contains(msg, "does not store responses")) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(ts.url + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET /v1/responses: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	var m bytes.Buffer
	ts.srv.Metrics().write(&m, ts.sched.Stats(), 0)
	if !strings.Contains(m.String(), `bitdecode_http_requests_total{endpoint="responses",code="404"} 5`) {
		t.Errorf("metrics:\n%s", m.String())
	}
}

// TestResponsesAbort: clients that leave mid-stream cancel their
// generations, as chat streams do: the others finish with their text
// alone, and no block stays in use.
func TestResponsesAbort(t *testing.T) {
	ts := newGotinyServer(t, 256, 16, nil)
	body := `{"model":"gotiny","input":"func main() {","max_output_tokens":48,"temperature":0,"ignore_eos":true`
	solo := postResponse(t, ts.url, body+`}`).text()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/responses", strings.NewReader(body+`,"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			var text strings.Builder
			for sc.Scan() {
				d, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var e struct {
					Type  string `json:"type"`
					Delta string `json:"delta"`
				}
				if json.Unmarshal([]byte(d), &e) != nil {
					t.Errorf("event %s", d)
					return
				}
				if e.Type == "response.output_text.delta" {
					if i%4 == 3 {
						return // leave after the first delta
					}
					text.WriteString(e.Delta)
				}
			}
			if text.String() != solo {
				t.Errorf("stream %d: %q, alone %q", i, text.String(), solo)
			}
		})
	}
	wg.Wait()
	ts.waitIdle(t)
	if st := ts.sched.Stats(); st.Cancelled == 0 {
		t.Errorf("no stream was cancelled: %+v", st)
	}
}

// TestResponsesFailedStream: a stream whose generation ends in an error
// (here the server's shutdown cutting it at the end of its drain) ends
// with response.failed: status failed, the error, the partial message
// incomplete.
func TestResponsesFailedStream(t *testing.T) {
	ts := newTestServer(t, 60, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve(ctx, ln, 50*time.Millisecond) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"tiny","input":"drain me","max_output_tokens":1200,"temperature":0,"stream":true,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var head bytes.Buffer
	for range 3 { // the first event: its lines and the blank one
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		head.WriteString(line)
	}
	cancel() // SIGTERM
	evs := readResponseEvents(t, io.MultiReader(&head, br))
	last := evs[len(evs)-1]
	f := lastResponse(t, evs)
	if last.Type != "response.failed" || f.Status != "failed" || f.Error == nil || f.Error.Code != "server_error" || !strings.Contains(f.Error.Message, "shut down") {
		t.Fatalf("last event %s", last.Raw)
	}
	for _, it := range f.Output {
		if it.Type == "message" && it.Status != "incomplete" {
			t.Errorf("the partial message is %q", it.Status)
		}
	}
	for _, e := range evs {
		if e.Type == "response.completed" || e.Type == "response.incomplete" {
			t.Errorf("a cut stream sent %s", e.Type)
		}
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if ts.cache.FreeBlocks() != ts.cache.TotalBlocks() {
		t.Errorf("leak: %d of %d blocks free", ts.cache.FreeBlocks(), ts.cache.TotalBlocks())
	}
}

// TestResponsesBuilderAutoCall feeds an answer in the Hermes form, text
// then a call cut across chunks, through the builder as tool_choice "auto"
// reads it: the stream sends the text as the message (the marker held
// back), then the call as a function_call item; the whole response built
// from the same chunks has the same output.
func TestResponsesBuilderAutoCall(t *testing.T) {
	s := &Server{cfg: Config{WriteTimeout: time.Second, Log: log.New(io.Discard, "", 0)}}
	mode := &toolMode{choice: toolAuto, names: map[string]bool{"get_weather": true}, markers: []string{"<tool_call>"}}
	chunks := []string{"Let me", " check. <tool_", `call>{"name": "get_weather", "arguments": {"city": `, `"Oslo"}}</tool_call>`}
	build := func(stream bool) (respObject, []respEvent) {
		resp := &responseObject{ID: "resp_x", Object: "response", Status: "in_progress", Output: []any{}}
		b := &responseBuilder{s: s, j: &job{tools: mode}, resp: resp, gate: &toolGate{m: mode}}
		rec := httptest.NewRecorder()
		if stream {
			b.sse = newSSEWriter(s, rec)
		}
		for i, c := range chunks {
			if !b.add(engine.Chunk{Text: c, Done: i == len(chunks)-1}) {
				t.Fatal("add failed")
			}
		}
		if !b.finish(engine.Result{FinishReason: engine.FinishStop, PromptTokens: 5, CompletionTokens: 9}) {
			t.Fatal("finish failed")
		}
		raw, _ := json.Marshal(resp)
		var r respObject
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if !stream {
			return r, nil
		}
		return r, readResponseEvents(t, rec.Body)
	}
	whole, _ := build(false)
	streamed, evs := build(true)
	for _, r := range []respObject{whole, streamed} {
		if len(r.Output) != 2 || r.text() != "Let me check." || r.Output[0].Status != "completed" || len(r.calls()) != 1 ||
			r.calls()[0].Name != "get_weather" || r.calls()[0].Arguments != `{"city":"Oslo"}` || r.Status != "completed" || r.Usage.TotalTokens != 14 {
			t.Errorf("output %+v", r)
		}
	}
	want := []string{"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if fmt.Sprint(eventTypes(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v", eventTypes(evs))
	}
	if evs[2].Data["delta"] != "Let me" || evs[3].Data["delta"] != " check." || evs[7].Data["output_index"] != 1.0 || evs[8].Data["output_index"] != 1.0 {
		t.Errorf("deltas %q %q, call at output %v", evs[2].Data["delta"], evs[3].Data["delta"], evs[7].Data["output_index"])
	}
}

// TestResponsesToolsAutoTemplate serves a model whose template shows its
// tools: with "auto" (the default) the Responses request renders the same
// prompt as the chat request with the same functions (the tools converted
// to the chat form field for field), answers the same, and streams what it
// answers whole.
func TestResponsesToolsAutoTemplate(t *testing.T) {
	ts := startTestServerWith(t, func(be backend.Backend, cfg *model.Config) (kvcache.Cache, int64, error) {
		pc, err := kvcache.NewPaged(be, cfg, kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 4, Blocks: 200})
		if err != nil {
			return nil, 0, err
		}
		return pc, pc.BlockBytes(), nil
	}, func(c *Config) {
		tok, err := c.Tokenizer.WithChatTemplate(toolTemplate)
		if err != nil {
			t.Fatal(err)
		}
		c.Tokenizer = tok
	})
	input := `"input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"role":"user","content":"And Oslo?"}]`
	msgs := `"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"And Oslo?"}]`
	rtools := `"tools":[{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	ctools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	r := postResponse(t, ts.url, `{"model":"tiny",`+input+`,`+rtools+`,"max_output_tokens":12,"temperature":0}`)
	text, _, u := chatOf(t, ts.url, `{"model":"tiny",`+msgs+`,`+ctools+`,"max_completion_tokens":12,"temperature":0}`)
	none := postResponse(t, ts.url, `{"model":"tiny",`+input+`,`+rtools+`,"tool_choice":"none","max_output_tokens":12,"temperature":0}`)
	if r.Usage.InputTokens != u.PromptTokens || r.text() != text || r.Usage.InputTokens <= none.Usage.InputTokens+10 {
		t.Errorf("responses %q (%d input tokens; %d with tool_choice none), chat %q (%d)", r.text(), r.Usage.InputTokens, none.Usage.InputTokens, text, u.PromptTokens)
	}
	evs := postResponseStream(t, ts.url, `{"model":"tiny",`+input+`,`+rtools+`,"max_output_tokens":12,"temperature":0,"stream":true}`)
	if f := lastResponse(t, evs); f.text() != r.text() || len(f.Output) != len(r.Output) {
		t.Errorf("streamed %+v, whole %+v", f.Output, r.Output)
	}
}

// FuzzParseResponses feeds arbitrary bodies to the Responses parser: it
// never panics; an error is an OpenAI error with a 4xx status; an accepted
// request is a chat job with a prompt of valid token ids that fits the
// context, valid sampling, and a response object to echo. Run with
//
//	go test ./server -run '^$' -fuzz FuzzParseResponses
func FuzzParseResponses(f *testing.F) {
	ts := newTestServer(f, 40, 4)
	for _, s := range []string{
		`{"model":"tiny","input":"hi"}`,
		`{"model":"tiny","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"role":"assistant","content":[{"type":"output_text","text":"b"}]}],"max_output_tokens":4}`,
		`{"model":"tiny","input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}],"tools":[{"type":"function","name":"f"}],"tool_choice":"none"}`,
		`{"model":"tiny","input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`,
		`{"model":"tiny","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}},"metadata":{"a":"b"}}`,
		`{"model":"tiny","input":"x","include":["message.output_text.logprobs"],"top_logprobs":2,"temperature":0.5,"top_k":3,"seed":1,"stream":true}`,
		`{"model":"tiny","input":[{"type":"item_reference","id":"x"}],"previous_response_id":"r","truncation":"auto"}`,
	} {
		f.Add(s)
	}
	limit := ts.sched.ContextLimit()
	vocab := 258
	f.Fuzz(func(t *testing.T, body string) {
		j, resp, e := ts.srv.parseResponses([]byte(body))
		if e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" || e.Type == "" {
				t.Fatalf("body %q: error %+v", body, e)
			}
			return
		}
		if !j.chat || j.n != 1 || j.endpoint != "responses" || resp == nil || resp.Model != "tiny" || resp.Output == nil || resp.Status != "in_progress" {
			t.Fatalf("body %q: job %+v, response %+v", body, j, resp)
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
		if _, err := json.Marshal(resp); err != nil {
			t.Fatalf("body %q: the response does not marshal: %v", body, err)
		}
	})
}

// TestResponsesRequestID: the X-Request-Id header is the response's id,
// whole and streamed, and an error's answer has one too.
func TestResponsesRequestID(t *testing.T) {
	ts := newGotinyServer(t, 64, 4, nil)
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"model":"gotiny","input":"a","max_output_tokens":2}`, 200},
		{`{"model":"gotiny","input":"a","max_output_tokens":2,"stream":true}`, 200},
		{`{"model":"gotiny","input":"a","max_output_tokens":0}`, 400},
	} {
		resp, err := http.Post(ts.url+"/v1/responses", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("X-Request-Id")
		if resp.StatusCode != c.code || !strings.HasPrefix(id, "resp_") {
			t.Errorf("%s: %d, X-Request-Id %q", c.body, resp.StatusCode, id)
			continue
		}
		if c.code == 200 && !bytes.Contains(b, []byte(`"id":"`+id+`"`)) {
			t.Errorf("%s: X-Request-Id %q is not the response's id: %.300s", c.body, id, b)
		}
	}
}

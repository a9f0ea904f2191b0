package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/engine"
)

// The request bodies below are what the official clients send: openai-
// python 1.x (client.chat.completions.create / client.completions.create)
// serializes its keyword arguments as given, omitting NOT_GIVEN ones;
// openai-node 4.x does the same with its params object. Both send
// "stream": true with stream_options when asked, max_completion_tokens
// (newer) or max_tokens, stop as a string or a list, and content either as
// a string or as a list of {"type": "text", "text": ...} parts.
var clientFixtures = []struct {
	name, path, body string
	chat, stream     bool
	usageChunk       bool
}{
	{"python chat", "/v1/chat/completions",
		`{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi"}],"model":"tiny","max_completion_tokens":12,"seed":7,"stop":["\n\n"],"temperature":0}`,
		true, false, false},
	{"python chat parts stream usage", "/v1/chat/completions",
		`{"messages":[{"role":"developer","content":[{"type":"text","text":"Be"},{"type":"text","text":" brief."}]},{"role":"user","content":[{"type":"text","text":"Say hi"}]}],"model":"tiny","max_tokens":12,"stream":true,"stream_options":{"include_usage":true},"temperature":0,"top_p":1,"n":1,"user":"u-1","metadata":{"k":"v"},"store":false,"parallel_tool_calls":true,"frequency_penalty":0,"presence_penalty":0}`,
		true, true, true},
	{"node chat stream", "/v1/chat/completions",
		`{"model":"tiny","messages":[{"role":"user","content":"Say hi"},{"role":"assistant","content":"hi"},{"role":"user","content":"again"}],"stream":true,"max_tokens":10,"temperature":0,"stop":"zz","tool_choice":"none","tools":[],"response_format":{"type":"text"},"logprobs":false}`,
		true, true, false},
	{"python completion", "/v1/completions",
		`{"model":"tiny","prompt":"func main() {","max_tokens":10,"temperature":0,"seed":3,"stop":null,"echo":false,"n":1,"best_of":1}`,
		false, false, false},
	{"python completion stream usage", "/v1/completions",
		`{"model":"tiny","prompt":["func main() {"],"max_tokens":10,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`,
		false, true, true},
	{"node completion token ids", "/v1/completions",
		`{"model":"tiny","prompt":[256,102,117,110,99],"max_tokens":6,"temperature":0}`,
		false, false, false},
}

// TestClientFixtures sends each fixture and checks every field the official
// clients read from the response (id, object, created, model, choices with
// index, message/delta/text and finish_reason, usage), the SSE framing
// (data lines, a role chunk first, finish_reason on the last choice chunk,
// "usage": null on chunks and a final usage chunk with empty choices when
// include_usage is set, [DONE] at the end), and that a streamed greedy text
// equals the same request not streamed.
func TestClientFixtures(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	for _, f := range clientFixtures {
		t.Run(f.name, func(t *testing.T) {
			url := ts.url + f.path
			if !f.stream {
				code, b := post(t, context.Background(), url, f.body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, b)
				}
				var r map[string]any
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatal(err)
				}
				checkCompletion(t, r, f.chat)
				return
			}
			text, chunks := streamText(t, url, f.body, f.chat)
			if len(chunks) < 2 {
				t.Fatalf("%d chunks", len(chunks))
			}
			finishes := 0
			for i, c := range chunks {
				where := fmt.Sprintf("chunk %d", i)
				need(t, where, c, "id", "string")
				need(t, where, c, "created", "number")
				if c["model"] != "tiny" {
					t.Fatalf("%s: model %v", where, c["model"])
				}
				want := "text_completion"
				if f.chat {
					want = "chat.completion.chunk"
				}
				if c["object"] != want || c["id"] != chunks[0]["id"] {
					t.Fatalf("%s: object %v id %v", where, c["object"], c["id"])
				}
				choices := need(t, where, c, "choices", "array").([]any)
				last := f.usageChunk && i == len(chunks)-1
				if last {
					if len(choices) != 0 {
						t.Fatalf("usage chunk has choices %v", choices)
					}
					checkUsage(t, where, need(t, where, c, "usage", "object").(map[string]any))
					continue
				}
				if f.usageChunk {
					need(t, where, c, "usage", "null")
				} else if _, ok := c["usage"]; ok {
					t.Fatalf("%s: usage present without include_usage", where)
				}
				if len(choices) != 1 {
					t.Fatalf("%s: %d choices", where, len(choices))
				}
				ch := choices[0].(map[string]any)
				need(t, where, ch, "index", "number")
				if f.chat {
					d := need(t, where, ch, "delta", "object").(map[string]any)
					if i == 0 && d["role"] != "assistant" {
						t.Fatalf("first chunk's delta %v lacks the role", d)
					}
				} else {
					need(t, where, ch, "text", "string")
				}
				if fr, ok := ch["finish_reason"].(string); ok {
					finishes++
					if fr != "stop" && fr != "length" {
						t.Fatalf("finish_reason %q", fr)
					}
				} else {
					need(t, where, ch, "finish_reason", "null")
				}
			}
			if finishes != 1 {
				t.Fatalf("%d chunks carry a finish_reason, want 1", finishes)
			}
			// The same request without streaming gives the same text.
			var body map[string]any
			_ = json.Unmarshal([]byte(f.body), &body)
			delete(body, "stream")
			delete(body, "stream_options")
			nb, _ := json.Marshal(body)
			code, b := post(t, context.Background(), url, string(nb))
			if code != 200 {
				t.Fatalf("status %d: %s", code, b)
			}
			if whole := content(t, b, f.chat); whole != text {
				t.Fatalf("streamed %q, whole %q", text, whole)
			}
		})
	}
}

func checkCompletion(t *testing.T, r map[string]any, chat bool) {
	t.Helper()
	id := need(t, "response", r, "id", "string").(string)
	need(t, "response", r, "created", "number")
	if r["model"] != "tiny" {
		t.Fatalf("model %v", r["model"])
	}
	wantObj, prefix := "text_completion", "cmpl-"
	if chat {
		wantObj, prefix = "chat.completion", "chatcmpl-"
	}
	if r["object"] != wantObj || !strings.HasPrefix(id, prefix) {
		t.Fatalf("object %v id %v", r["object"], id)
	}
	choices := need(t, "response", r, "choices", "array").([]any)
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	ch := choices[0].(map[string]any)
	if ch["index"] != 0.0 {
		t.Fatalf("index %v", ch["index"])
	}
	if fr := need(t, "choice", ch, "finish_reason", "string"); fr != "stop" && fr != "length" {
		t.Fatalf("finish_reason %v", fr)
	}
	if chat {
		msg := need(t, "choice", ch, "message", "object").(map[string]any)
		if msg["role"] != "assistant" {
			t.Fatalf("role %v", msg["role"])
		}
		need(t, "message", msg, "content", "string")
	} else {
		need(t, "choice", ch, "text", "string")
	}
	checkUsage(t, "usage", need(t, "response", r, "usage", "object").(map[string]any))
}

// TestErrors checks that invalid, unsupported, oversized and misrouted
// requests get the OpenAI error object with the right status, type, param
// and code, and that the server keeps serving.
// negativeCount matches a negative token count in an error message (the
// context error once said "-3986 in the completion").
var negativeCount = regexp.MustCompile(`-\d+ (tokens|in the)`)

func TestErrors(t *testing.T) {
	ts := newTestServer(t, 40, 4)
	chat, comp := ts.url+"/v1/chat/completions", ts.url+"/v1/completions"
	user := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, url, body string
		status          int
		typ, param      string
		code            string
		msg             string // substring of the message
	}{
		{"bad json", chat, `{"model":"tiny",`, 400, "invalid_request_error", "", "", "parse the JSON"},
		{"empty body", chat, ``, 400, "invalid_request_error", "", "", "empty"},
		{"no model", chat, `{` + user + `}`, 400, "invalid_request_error", "model", "", "model parameter"},
		{"unknown model", chat, `{"model":"gpt-4o",` + user + `}`, 404, "invalid_request_error", "model", "model_not_found", "gpt-4o"},
		{"messages missing", chat, `{"model":"tiny"}`, 400, "invalid_request_error", "messages", "missing_required_parameter", "Missing required parameter: 'messages'"},
		{"no messages", chat, `{"model":"tiny","messages":[]}`, 400, "invalid_request_error", "messages", "empty_array", "empty array"},
		{"n 0", chat, `{"model":"tiny","n":0,` + user + `}`, 400, "invalid_request_error", "n", "integer_below_min_value", ">= 1"},
		{"n 17", chat, `{"model":"tiny","n":17,` + user + `}`, 400, "invalid_request_error", "n", "integer_above_max_value", "<= 16"},
		{"top_logprobs 21", chat, `{"model":"tiny","logprobs":true,"top_logprobs":21,` + user + `}`, 400, "invalid_request_error", "top_logprobs", "integer_out_of_range", "between 0 and 20"},
		{"top_logprobs alone", chat, `{"model":"tiny","top_logprobs":2,` + user + `}`, 400, "invalid_request_error", "top_logprobs", "", "needs 'logprobs'"},
		{"unknown field", chat, `{"model":"tiny","guided_json":{},` + user + `}`, 400, "invalid_request_error", "guided_json", "unknown_parameter", "Unrecognized request argument supplied: guided_json"},
		{"top_k", chat, `{"model":"tiny","top_k":-2,` + user + `}`, 400, "invalid_request_error", "top_k", "integer_below_min_value", "top_k"},
		{"min_p", chat, `{"model":"tiny","min_p":1.5,` + user + `}`, 400, "invalid_request_error", "min_p", "decimal_out_of_range", "min_p"},
		{"repetition_penalty", chat, `{"model":"tiny","repetition_penalty":0,` + user + `}`, 400, "invalid_request_error", "repetition_penalty", "decimal_out_of_range", "repetition_penalty"},
		{"logit_bias key", chat, `{"model":"tiny","logit_bias":{"x":1},` + user + `}`, 400, "invalid_request_error", "logit_bias", "invalid_value", "token id"},
		{"logit_bias range", chat, `{"model":"tiny","logit_bias":{"5":101},` + user + `}`, 400, "invalid_request_error", "logit_bias", "decimal_out_of_range", "between -100 and 100"},
		{"presence_penalty", chat, `{"model":"tiny","presence_penalty":3,` + user + `}`, 400, "invalid_request_error", "presence_penalty", "decimal_out_of_range", "between -2 and 2"},
		{"tool type", chat, `{"model":"tiny","tools":[{"type":"retrieval","function":{"name":"f"}}],` + user + `}`, 400, "invalid_request_error", "tools[0].type", "invalid_value", "retrieval"},
		{"tool name", chat, `{"model":"tiny","tools":[{"type":"function","function":{"name":"a b"}}],` + user + `}`, 400, "invalid_request_error", "tools[0].function.name", "invalid_value", "a b"},
		{"tool twice", chat, `{"model":"tiny","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],` + user + `}`, 400, "invalid_request_error", "tools[1].function.name", "invalid_value", "twice"},
		{"tool_choice unknown", chat, `{"model":"tiny","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}},` + user + `}`, 400, "invalid_request_error", "tool_choice.function.name", "invalid_value", "no tool named 'g'"},
		{"tool_choice without tools", chat, `{"model":"tiny","tool_choice":"required",` + user + `}`, 400, "invalid_request_error", "tool_choice", "", "needs 'tools'"},
		{"tool params keyword", chat, `{"model":"tiny","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","pattern":"x"}}}}}],"tool_choice":"required",` + user + `}`, 400, "invalid_request_error", "tools[0].function.parameters", "unsupported_schema_keyword", "pattern"},
		{"functions", chat, `{"model":"tiny","functions":[{"name":"f"}],` + user + `}`, 400, "invalid_request_error", "functions", "unsupported_parameter", "tools"},
		{"image part", chat, `{"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "invalid_request_error", "messages.[0].content.[0].type", "unsupported_content", "image_url"},
		{"bad role", chat, `{"model":"tiny","messages":[{"role":"wizard","content":"x"}]}`, 400, "invalid_request_error", "messages.[0].role", "invalid_value", "wizard"},
		{"tool result without id", chat, `{"model":"tiny","messages":[{"role":"user","content":"x"},{"role":"tool","content":"x"}]}`, 400, "invalid_request_error", "messages.[1].tool_call_id", "missing_required_parameter", "tool_call_id"},
		{"tool calls on a user", chat, `{"model":"tiny","messages":[{"role":"user","content":"x","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400, "invalid_request_error", "messages.[0].tool_calls", "", "Only assistant"},
		{"function role", chat, `{"model":"tiny","messages":[{"role":"function","content":"x","name":"f"}]}`, 400, "invalid_request_error", "messages.[0].role", "unsupported_value", "function"},
		{"temperature range", chat, `{"model":"tiny","temperature":3,` + user + `}`, 400, "invalid_request_error", "temperature", "decimal_out_of_range", "between 0 and 2"},
		{"temperature type", chat, `{"model":"tiny","temperature":"hot",` + user + `}`, 400, "invalid_request_error", "temperature", "invalid_type", "temperature"},
		{"top_p range", chat, `{"model":"tiny","top_p":1.5,` + user + `}`, 400, "invalid_request_error", "top_p", "decimal_out_of_range", "top_p"},
		{"max_completion_tokens 0", chat, `{"model":"tiny","max_completion_tokens":0,` + user + `}`, 400, "invalid_request_error", "max_completion_tokens", "integer_below_min_value", "Invalid 'max_completion_tokens'"},
		{"max_tokens 2^63-1", chat, `{"model":"tiny","max_tokens":9223372036854775807,` + user + `}`, 400, "invalid_request_error", "messages", "context_length_exceeded", "you requested 92233720368547758"},
		{"messages fill the context", chat, `{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`, 400, "invalid_request_error", "messages", "context_length_exceeded", "However, your messages resulted in 20"},
		{"stop too long", chat, `{"model":"tiny","stop":["a","` + strings.Repeat("x", 257) + `"],` + user + `}`, 400, "invalid_request_error", "stop", "string_above_max_length", "stop sequence 1 is 257 bytes"},
		{"modalities type", chat, `{"model":"tiny","modalities":"text",` + user + `}`, 400, "invalid_request_error", "modalities", "invalid_type", "expected an array, got a JSON string"},
		{"logit_bias type", chat, `{"model":"tiny","logit_bias":[1],` + user + `}`, 400, "invalid_request_error", "logit_bias", "invalid_type", "expected an object, got a JSON array"},
		{"message role type", chat, `{"model":"tiny","messages":[{"role":1,"content":"x"}]}`, 400, "invalid_request_error", "messages.[0].role", "invalid_type", "Invalid type for 'messages.[0].role': expected a string, got a JSON number"},
		{"message not an object", chat, `{"model":"tiny","messages":["hi"]}`, 400, "invalid_request_error", "messages.[0]", "invalid_type", "expected an object, got a JSON string"},
		{"second message name type", chat, `{"model":"tiny","messages":[{"role":"user","content":"x"},{"role":"user","content":"y","name":5}]}`, 400, "invalid_request_error", "messages.[1].name", "invalid_type", "expected a string"},
		{"body not an object", chat, `[{"model":"tiny"}]`, 400, "invalid_request_error", "", "", "must be a JSON object, got a JSON array"},
		{"max_tokens 0", chat, `{"model":"tiny","max_tokens":0,` + user + `}`, 400, "invalid_request_error", "max_tokens", "integer_below_min_value", ">= 1"},
		{"five stops", chat, `{"model":"tiny","stop":["a","b","c","d","e"],` + user + `}`, 400, "invalid_request_error", "stop", "array_above_max_length", "maximum length 4"},
		{"stream_options alone", chat, `{"model":"tiny","stream_options":{"include_usage":true},` + user + `}`, 400, "invalid_request_error", "stream_options", "", "only allowed when 'stream'"},
		{"format type", chat, `{"model":"tiny","response_format":{"type":"yaml"},` + user + `}`, 400, "invalid_request_error", "response_format.type", "invalid_value", "yaml"},
		{"schema missing", chat, `{"model":"tiny","response_format":{"type":"json_schema","json_schema":{"name":"x"}},` + user + `}`, 400, "invalid_request_error", "response_format.json_schema.schema", "missing_required_parameter", "schema"},
		{"schema keyword", chat, `{"model":"tiny","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}},` + user + `}`, 400, "invalid_request_error", "response_format.json_schema.schema", "unsupported_schema_keyword", "/properties/d: keyword \"format\""},
		{"schema invalid", comp, `{"model":"tiny","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"strung"}}}}`, 400, "invalid_request_error", "response_format.json_schema.schema", "invalid_schema", "unknown type"},
		{"schema without a finite document", comp, `{"model":"tiny","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}},"$ref":"#/$defs/a"}}}}`, 400, "invalid_request_error", "response_format.json_schema.schema", "invalid_schema", "no finite document"},
		{"llama json_schema", comp, `{"model":"tiny","prompt":"x","json_schema":{"type":"integer","minimum":0}}`, 400, "invalid_request_error", "json_schema", "unsupported_schema_keyword", "minimum"},
		{"context too long", chat, `{"model":"tiny","max_tokens":5000,` + user + `}`, 400, "invalid_request_error", "messages", "context_length_exceeded", "maximum context length is 1311 tokens"},
		{"prompt too long", comp, `{"model":"tiny","prompt":"` + strings.Repeat("x", 2000) + `"}`, 400, "invalid_request_error", "prompt", "context_length_exceeded", "(2001 in the prompt, 16 in the completion)"},
		{"no prompt", comp, `{"model":"tiny"}`, 400, "invalid_request_error", "prompt", "", "prompt parameter"},
		{"prompts times n", comp, `{"model":"tiny","n":16,"prompt":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, 400, "invalid_request_error", "n", "unsupported_value", "272 choices"},
		{"empty prompt array", comp, `{"model":"tiny","prompt":[]}`, 400, "invalid_request_error", "prompt", "empty_array", "empty array"},
		{"empty prompt in a batch", comp, `{"model":"tiny","prompt":[[1,2],[]]}`, 400, "invalid_request_error", "prompt", "", "Prompt 1 is empty"},
		{"bad token id", comp, `{"model":"tiny","prompt":[1,99999]}`, 400, "invalid_request_error", "prompt", "invalid_value", "99999"},
		{"null in a prompt", comp, `{"model":"tiny","prompt":["a", null]}`, 400, "invalid_request_error", "prompt", "invalid_type", "'prompt[1]': expected a string or an integer, got null"},
		{"null token id", comp, `{"model":"tiny","prompt":[[1,2],[3, null]]}`, 400, "invalid_request_error", "prompt", "invalid_type", "'prompt[1][1]'"},
		{"null logit_bias", chat, `{"model":"tiny","logit_bias":{"5":null},` + user + `}`, 400, "invalid_request_error", "logit_bias", "invalid_type", "'logit_bias.5': expected a number, got null"},
		{"prompt object", comp, `{"model":"tiny","prompt":{"a":1}}`, 400, "invalid_request_error", "prompt", "invalid_type", "Invalid type for 'prompt'"},
		{"suffix", comp, `{"model":"tiny","prompt":"a","suffix":"b"}`, 400, "invalid_request_error", "suffix", "unsupported_parameter", "suffix"},
		{"completion logprobs 6", comp, `{"model":"tiny","prompt":"a","logprobs":6}`, 400, "invalid_request_error", "logprobs", "integer_out_of_range", "between 0 and 5"},
		{"completion max_tokens 0 without echo", comp, `{"model":"tiny","prompt":"a","max_tokens":0}`, 400, "invalid_request_error", "max_tokens", "integer_below_min_value", ">= 1"},
		{"echo max_tokens -1", comp, `{"model":"tiny","prompt":"a","max_tokens":-1,"echo":true}`, 400, "invalid_request_error", "max_tokens", "integer_below_min_value", ">= 0"},
		{"best_of", comp, `{"model":"tiny","prompt":"a","best_of":3}`, 400, "invalid_request_error", "best_of", "unsupported_value", "best_of"},
		{"too large", chat, `{"model":"tiny",` + user + `,"user":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "invalid_request_error", "", "request_too_large", "exceeds the limit"},
		{"unknown url", ts.url + "/v1/assistants", `{}`, 404, "invalid_request_error", "", "", "Invalid URL"},
		{"embeddings", ts.url + "/v1/embeddings", `{}`, 404, "invalid_request_error", "", "unsupported_endpoint", "Embeddings"},
	}
	for _, tc := range tests {
		code, b := post(t, context.Background(), tc.url, tc.body)
		var e struct {
			Error *struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
			t.Errorf("%s: status %d, body %s is not an error object", tc.name, code, b)
			continue
		}
		param, ecode := "", ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if e.Error.Code != nil {
			ecode = *e.Error.Code
		}
		if code != tc.status || e.Error.Type != tc.typ || param != tc.param || ecode != tc.code || !strings.Contains(e.Error.Message, tc.msg) ||
			negativeCount.MatchString(e.Error.Message) {

			t.Errorf("%s: status %d type %q param %q code %q message %q; want %d %q %q %q ~%q",
				tc.name, code, e.Error.Type, param, ecode, e.Error.Message, tc.status, tc.typ, tc.param, tc.code, tc.msg)
		}
		// Both keys are present (null when unset), as clients expect.
		var raw map[string]map[string]any
		_ = json.Unmarshal(b, &raw)
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := raw["error"][k]; !ok {
				t.Errorf("%s: error object lacks %q", tc.name, k)
			}
		}
	}
	// Wrong method.
	resp, err := http.Get(chat)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET chat: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	code, b := post(t, context.Background(), ts.url+"/metrics", `{}`)
	if typ, _, _, _ := apiErr(t, b); code != 405 || typ != "invalid_request_error" {
		t.Errorf("POST /metrics: %d, %s", code, b)
	}
	// Models.
	resp, err = http.Get(ts.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list modelList
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "tiny" || list.Data[0].Object != "model" || list.Data[0].OwnedBy == "" {
		t.Errorf("/v1/models = %+v", list)
	}
	for path, want := range map[string]int{"/v1/models/tiny": 200, "/v1/models/other": 404, "/health": 200} {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestGenerationError: a generation that fails because the request's
// constraint cannot be spelled by the vocabulary is the request's fault (a
// 400), a shutdown a 503, anything else the server's (500).
func TestGenerationError(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		typ    string
	}{
		{fmt.Errorf("step: %w", engine.ErrConstraint), 400, "invalid_request_error"},
		{engine.ErrClosed, 503, "server_error"},
		{errors.New("backend: out of memory"), 500, "server_error"},
	} {
		if e := generationError(c.err); e.Status != c.status || e.Type != c.typ || e.Message == "" {
			t.Errorf("%v: %d %s %q, want %d %s", c.err, e.Status, e.Type, e.Message, c.status, c.typ)
		}
	}
}

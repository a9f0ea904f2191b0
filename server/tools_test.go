package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

func testToolMode(choice string, markers ...string) *toolMode {
	return &toolMode{choice: choice, named: "get_weather", names: map[string]bool{"get_weather": true, "add": true}, markers: markers}
}

// TestToolRead reads the text forms of calls the common templates teach,
// and leaves text that is no call as content.
func TestToolRead(t *testing.T) {
	type call struct{ name, args string }
	hermes := testToolMode(toolAuto, "<tool_call>")
	for _, c := range []struct {
		name    string
		m       *toolMode
		text    string
		content string
		calls   []call
	}{
		{"hermes two calls", hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
			"Let me check.", []call{{"get_weather", `{"city":"Paris"}`}, {"add", `{"a":1,"b":2}`}}},
		{"hermes unterminated", hermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}", "", []call{{"add", `{"a":1}`}}},
		{"hermes unknown tool", hermes, "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", nil},
		{"hermes bad JSON", hermes, "<tool_call>{\"name\": \"add\", </tool_call>", "<tool_call>{\"name\": \"add\", </tool_call>", nil},
		{"plain text", hermes, "The weather is fine, 3 < 4.", "The weather is fine, 3 < 4.", nil},
		{"mistral array, marker skipped", testToolMode(toolAuto, "[TOOL_CALLS]"), ` [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}]`,
			"", []call{{"add", `{"a":1,"b":2}`}, {"get_weather", `{"city":"Oslo"}`}}},
		{"mistral marker in text", testToolMode(toolAuto, "[TOOL_CALLS]"), `[TOOL_CALLS] [{"name": "add", "arguments": {}}]`, "", []call{{"add", `{}`}}},
		{"llama parameters, two", testToolMode(toolAuto, "<|python_tag|>"), `{"name": "add", "parameters": {"a": 1}}; {"name": "get_weather", "parameters": {"city": "Rome"}}`,
			"", []call{{"add", `{"a":1}`}, {"get_weather", `{"city":"Rome"}`}}},
		{"granite", testToolMode(toolAuto, "<|tool_call|>"), `<|tool_call|>[{"name": "add", "arguments": {"a": 2}}]`, "", []call{{"add", `{"a":2}`}}},
		{"JSON that is no call", hermes, `{"city": "Paris"}`, `{"city": "Paris"}`, nil},
		{"named", testToolMode(toolNamed), `{ "city" : "Lima" }`, "", []call{{"get_weather", `{"city":"Lima"}`}}},
		{"named cut", testToolMode(toolNamed), `{ "city" : "Li`, `{ "city" : "Li`, nil},
		{"required", testToolMode(toolRequired), `[{"name": "add", "parameters": {"a": 5}}]`, "", []call{{"add", `{"a":5}`}}},
	} {
		content, calls, ok := c.m.read(c.text)
		if ok != (len(c.calls) > 0) || content != c.content || len(calls) != len(c.calls) {
			t.Errorf("%s: content %q, %d calls (ok %v), want %q and %d", c.name, content, len(calls), ok, c.content, len(c.calls))
			continue
		}
		for i, want := range c.calls {
			if calls[i].name != want.name || string(calls[i].args) != want.args {
				t.Errorf("%s: call %d is %s(%s), want %s(%s)", c.name, i, calls[i].name, calls[i].args, want.name, want.args)
			}
		}
	}
}

// TestToolGate streams answers byte by byte through the gate: what it lets
// through is the content up to the first call, nothing of a call goes out,
// and text that only looked like a call's start comes out in the end.
func TestToolGate(t *testing.T) {
	for _, c := range []struct {
		name, text, streamed, rest string
		calls                      int
	}{
		{"content then a call", "Sure. <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>", "Sure.", "", 1},
		{"a call alone", "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>", "", "", 1},
		{"text with <", "a <b> and <tool", "a <b> and", " <tool", 0},
		{"spaces before a call", "  Hi  \n <tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>", "  Hi", "", 1},
		{"trailing spaces without a call", "Hi  \n", "Hi", "  \n", 0},
		{"bare JSON call", "  {\"name\": \"add\", \"arguments\": {}}", "", "", 1},
		{"JSON that is no call", "{\"x\": 1}", "", "{\"x\": 1}", 0},
		{"plain", "hello world", "hello world", "", 0},
	} {
		g := &toolGate{m: testToolMode(toolAuto, "<tool_call>")}
		var out strings.Builder
		for _, b := range []byte(c.text) {
			out.WriteString(g.add(string(b)))
		}
		rest, calls := g.finish()
		if out.String() != c.streamed || rest != c.rest || len(calls) != c.calls {
			t.Errorf("%s: streamed %q then %q with %d calls, want %q, %q, %d", c.name, out.String(), rest, len(calls), c.streamed, c.rest, c.calls)
		}
	}
}

// TestToolCallsHTTP sends tool requests through HTTP: tool_choice
// "required" and a named function constrain the answer to calls, which
// come back as tool_calls (stream and not) with JSON arguments; "auto"
// needs a template that shows the tools; tool messages render.
func TestToolCallsHTTP(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	chat := ts.url + "/v1/chat/completions"
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":6}},"required":["city"]}}},` +
		`{"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}]`
	msgs := `"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"And Oslo?"}]`
	for _, c := range []struct {
		name, choice string
		want         string // the one function called, "" for any
	}{
		{"named", `{"type":"function","function":{"name":"get_weather"}}`, "get_weather"},
		{"required", `"required","parallel_tool_calls":false`, ""},
	} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"tiny","max_tokens":200,"temperature":0,"tool_choice":` + c.choice + `,` + tools + `,` + msgs
			if stream {
				body += `,"stream":true`
			}
			body += `}`
			var calls []toolCallOut
			var finish, content string
			if !stream {
				var r struct {
					Choices []struct {
						Message struct {
							Content   *string       `json:"content"`
							ToolCalls []toolCallOut `json:"tool_calls"`
						} `json:"message"`
						FinishReason string `json:"finish_reason"`
					} `json:"choices"`
				}
				code, b := post(t, t.Context(), chat, body)
				if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
					t.Fatalf("%s: status %d, %s", c.name, code, b)
				}
				calls, finish = r.Choices[0].Message.ToolCalls, r.Choices[0].FinishReason
				if r.Choices[0].Message.Content != nil {
					content = *r.Choices[0].Message.Content
				}
			} else {
				code, b := post(t, t.Context(), chat, body)
				if code != 200 {
					t.Fatalf("%s stream: status %d, %s", c.name, code, b)
				}
				for _, ev := range sseEvents(t, bytes.NewReader(b)) {
					var ch struct {
						Choices []struct {
							Delta        chunkDelta `json:"delta"`
							FinishReason *string    `json:"finish_reason"`
						} `json:"choices"`
					}
					if json.Unmarshal([]byte(ev), &ch) != nil || len(ch.Choices) == 0 {
						continue
					}
					d := ch.Choices[0]
					calls = append(calls, d.Delta.ToolCalls...)
					if d.Delta.Content != nil {
						content += *d.Delta.Content
					}
					if d.FinishReason != nil {
						finish = *d.FinishReason
					}
				}
			}
			name := c.name
			if stream {
				name += " stream"
			}
			if finish == "length" {
				t.Errorf("%s: the constrained call was cut at max_tokens (content %q)", name, content)
				continue
			}
			if len(calls) == 0 || content != "" {
				t.Errorf("%s: %d calls, content %q, finish %q", name, len(calls), content, finish)
				continue
			}
			wantFinish := "tool_calls"
			if c.want != "" {
				wantFinish = "stop" // as OpenAI answers a forced function
			}
			if finish != wantFinish {
				t.Errorf("%s: finish %q, want %q", name, finish, wantFinish)
			}
			for _, call := range calls {
				var args map[string]any
				if call.Type != "function" || !strings.HasPrefix(call.ID, "call_") || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil ||
					(call.Function.Name != "get_weather" && call.Function.Name != "add") || (c.want != "" && call.Function.Name != c.want) {
					t.Errorf("%s: call %+v", name, call)
				}
				if call.Function.Name == "get_weather" {
					if city, ok := args["city"].(string); !ok || utf8.RuneCountInString(city) > 6 {
						t.Errorf("%s: arguments %s do not match the schema", name, call.Function.Arguments)
					}
				}
			}
			t.Logf("%s: %d calls, first %s(%s)", name, len(calls), calls[0].Function.Name, calls[0].Function.Arguments)
		}
	}
	// "auto" needs a template that shows the model its tools: the tiny
	// model's has none.
	code, b := post(t, t.Context(), chat, `{"model":"tiny",`+tools+`,`+msgs+`}`)
	if code != 400 || !strings.Contains(string(b), "does not show the model its tools") {
		t.Errorf("auto without a tool template: status %d, %s", code, b)
	}
}

// toolTemplate is a small ChatML template in the form Qwen2.5's and
// Hermes' take tools: listed in the system turn, calls in <tool_call> tags.
const toolTemplate = `{%- if tools %}<|im_start|>system
You may call these functions:
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
Answer a call as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" and message.tool_calls %}<|im_start|>assistant
{%- for call in message.tool_calls %}
<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestToolsAutoTemplate serves a model whose template shows tools: "auto"
// renders them into the prompt (more prompt tokens than without) and a
// tool conversation renders; the answer, from a random model, is content.
func TestToolsAutoTemplate(t *testing.T) {
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
	chat := ts.url + "/v1/chat/completions"
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	msgs := `"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`
	promptTokens := func(body string) int {
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		code, b := post(t, t.Context(), chat, body)
		if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
			t.Fatalf("status %d, %s", code, b)
		}
		if f := r.Choices[0].FinishReason; f != "stop" && f != "length" && f != "tool_calls" {
			t.Errorf("finish %q", f)
		}
		return r.Usage.PromptTokens
	}
	with := promptTokens(`{"model":"tiny","max_tokens":8,` + tools + `,` + msgs + `}`)
	none := promptTokens(`{"model":"tiny","max_tokens":8,"tool_choice":"none",` + tools + `,` + msgs + `}`)
	if with <= none+20 {
		t.Errorf("the tools did not reach the prompt: %d prompt tokens with them, %d with tool_choice none", with, none)
	}
}

// TestRebaseRefs moves a schema's local references under the pointer where
// tool_choice "required" embeds it, and nothing else: not a $ref that is a
// property's name or inside a const, enum, default or example value, not
// an external reference, not the key order.
func TestRebaseRefs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"$ref":"#"}`, `{"$ref":"#/$defs/tool3"}`},
		{`{"type":"object","properties":{"z":{"$ref":"#/$defs/Unit"},"a":{"type":"array","items":{"$ref":"#"}}},"$defs":{"Unit":{"enum":["c","f"]}}}`,
			`{"type":"object","properties":{"z":{"$ref":"#/$defs/tool3/$defs/Unit"},"a":{"type":"array","items":{"$ref":"#/$defs/tool3"}}},"$defs":{"Unit":{"enum":["c","f"]}}}`},
		{`{"anyOf":[{"$ref":"#/definitions/A"},{"type":"null"}],"definitions":{"A":{"$ref":"#/definitions/B"},"B":{"type":"integer"}}}`,
			`{"anyOf":[{"$ref":"#/$defs/tool3/definitions/A"},{"type":"null"}],"definitions":{"A":{"$ref":"#/$defs/tool3/definitions/B"},"B":{"type":"integer"}}}`},
		{`{"properties":{"$ref":{"const":{"$ref":"#"}},"enum":{"enum":[{"$ref":"#/x"}]},"d":{"default":{"$ref":"#"},"examples":[{"$ref":"#"}],"type":"string"}}}`,
			`{"properties":{"$ref":{"const":{"$ref":"#"}},"enum":{"enum":[{"$ref":"#/x"}]},"d":{"default":{"$ref":"#"},"examples":[{"$ref":"#"}],"type":"string"}}}`},
		{`{"$ref":"http://example.com/s.json","x":[1,2.50,-3e2,true,null,"\u003c"]}`, `{"$ref":"http://example.com/s.json","x":[1,2.50,-3e2,true,null,"\u003c"]}`},
	} {
		got, err := rebaseRefs([]byte(c.in), "#/$defs/tool3")
		if err != nil || string(got) != c.want {
			t.Errorf("rebaseRefs(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"a":`, `{} {}`, `[1,]`} {
		if got, err := rebaseRefs([]byte(bad), "#/$defs/tool0"); err == nil {
			t.Errorf("rebaseRefs(%s) = %s, want an error", bad, got)
		}
	}
}

// TestToolRequiredRefs: tool_choice "required" with parameters that use
// $defs and recursion (as pydantic and zod write nested models) was refused
// ("#/$defs/Unit does not resolve") because the parameters were embedded in
// the call array's schema, where their references meant something else.
// The call must now be made and match the tool's own schema; a tool whose
// parameters cannot be enforced is named in the error.
func TestToolRequiredRefs(t *testing.T) {
	ts := newTestServer(t, 200, 8)
	chat := ts.url + "/v1/chat/completions"
	weather := `{"type":"function","function":{"name":"weather","parameters":{"type":"object","$defs":{"Unit":{"type":"string","enum":["c","f"]}},` +
		`"properties":{"unit":{"$ref":"#/$defs/Unit"}},"required":["unit"],"additionalProperties":false}}}`
	tree := `{"type":"function","function":{"name":"tree","parameters":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"},"maxItems":1}},"required":["kids"]}}}`
	for _, tools := range []string{weather, tree, weather + "," + tree} {
		body := `{"model":"tiny","messages":[{"role":"user","content":"go"}],"max_tokens":300,"temperature":0,"tool_choice":"required","parallel_tool_calls":false,"tools":[` + tools + `]}`
		code, b := post(t, t.Context(), chat, body)
		var r struct {
			Choices []struct {
				Message struct {
					ToolCalls []toolCallOut `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
			t.Fatalf("tools %s: status %d, %s", tools, code, b)
		}
		calls := r.Choices[0].Message.ToolCalls
		if r.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 {
			t.Fatalf("tools %s: finish %q, calls %+v", tools, r.Choices[0].FinishReason, calls)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil {
			t.Fatalf("tools %s: arguments %q: %v", tools, calls[0].Function.Arguments, err)
		}
		switch calls[0].Function.Name {
		case "weather":
			if u, ok := args["unit"].(string); !ok || (u != "c" && u != "f") || len(args) != 1 {
				t.Errorf("weather(%s) does not match its schema", calls[0].Function.Arguments)
			}
		case "tree":
			if !isTree(args) {
				t.Errorf("tree(%s) does not match its schema", calls[0].Function.Arguments)
			}
		default:
			t.Errorf("tools %s: call to %q", tools, calls[0].Function.Name)
		}
	}
	bad := `{"type":"function","function":{"name":"when","parameters":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}`
	code, b := post(t, t.Context(), chat, `{"model":"tiny","messages":[{"role":"user","content":"go"}],"tool_choice":"required","tools":[`+weather+`,`+bad+`]}`)
	if typ, param, ecode, msg := apiErr(t, b); code != 400 || typ != "invalid_request_error" || param != "tools[1].function.parameters" ||
		ecode != "unsupported_schema_keyword" || !strings.Contains(msg, `keyword "format"`) {
		t.Errorf("an unenforceable tool: status %d, %s", code, b)
	}
	// Tools fine alone but over constrain.MaxSchemaBytes together are
	// refused for the call array, saying why.
	big := newGuardedServer(t, func(c *Config) { c.MaxBodyBytes = 1 << 20 })
	var props, tools []string
	for i := range 1100 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
	}
	for i := range 12 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"f%d","parameters":{"type":"object","properties":{%s}}}}`, i, strings.Join(props, ",")))
	}
	code, b = post(t, t.Context(), big.url+"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"go"}],"tool_choice":"required","tools":[`+strings.Join(tools, ",")+`]}`)
	if _, param, ecode, msg := apiErr(t, b); code != 400 || param != "tools" || ecode != "invalid_schema" || !strings.Contains(msg, "every tool's parameters make one schema") {
		t.Errorf("tools too large together: status %d, %s", code, b)
	}
}

// isTree reports whether v matches TestToolRequiredRefs' recursive tree
// schema: {"kids": [at most one tree]}, other properties allowed.
func isTree(v any) bool {
	o, ok := v.(map[string]any)
	if !ok {
		return false
	}
	kids, ok := o["kids"].([]any)
	if !ok || len(kids) > 1 {
		return false
	}
	for _, k := range kids {
		if !isTree(k) {
			return false
		}
	}
	return true
}

// FuzzToolText reads arbitrary answers (a client can force any text with
// logit_bias) in every tool mode, whole and streamed through the gate in
// pieces: no panic; every call names a tool and has JSON arguments; an
// answer without calls is all content; the stream finds the same calls and
// the same content as the whole answer.
// Run with
//
//	go test ./server -run '^$' -fuzz FuzzToolText
func FuzzToolText(f *testing.F) {
	f.Add("Sure. <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>", uint8(3))
	f.Add(`[{"name": "add", "parameters": {"a": 5}}]`, uint8(1))
	f.Add(`<|python_tag|>{"name": "add", "parameters": {"a": 1}}; {"name": "get_weather", "parameters": {"city": "Rome"}}`, uint8(2))
	f.Add(`[TOOL_CALLS] [{"name": "add", "arguments": {}}]`, uint8(5))
	f.Add(`  {"name": "add", "arguments": "{\"a\": 1}"}`, uint8(7))
	f.Fuzz(func(t *testing.T, text string, split uint8) {
		modes := []*toolMode{
			testToolMode(toolAuto, "<tool_call>"), testToolMode(toolAuto, "[TOOL_CALLS]"), testToolMode(toolAuto, "<|python_tag|>"),
			testToolMode(toolAuto, "<|tool_call|>", "<tool_call>"), testToolMode(toolRequired), testToolMode(toolNamed),
		}
		for mi, m := range modes {
			for _, single := range []bool{false, true} {
				m.single = single
				content, calls, ok := m.read(text)
				for _, c := range calls {
					if !m.names[c.name] || !json.Valid(c.args) {
						t.Fatalf("mode %d: call %s(%s)", mi, c.name, c.args)
					}
				}
				if !ok && content != text {
					t.Fatalf("mode %d: no call but content %q != text", mi, content)
				}
				g := &toolGate{m: m}
				var out strings.Builder
				step := int(split%7) + 1
				for i := 0; i < len(text); i += step {
					out.WriteString(g.add(text[i:min(i+step, len(text))]))
				}
				rest, gcalls := g.finish()
				if len(gcalls) != len(calls) {
					t.Fatalf("mode %d single %v: stream %d calls, whole %d (text %q)", mi, single, len(gcalls), len(calls), text)
				}
				if streamed := out.String() + rest; streamed != content {
					t.Fatalf("mode %d single %v: streamed content %q, whole %q (text %q)", mi, single, streamed, content, text)
				}
			}
		}
	})
}

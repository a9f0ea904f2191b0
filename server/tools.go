package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/bitdecode/bitdecode/constrain"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Tool calling (chat completions' tools, tool_choice and tool messages).
//
// The tools go to the checkpoint's chat template as transformers passes
// them (the OpenAI array, one JSON schema per function), so the model sees
// them in the form it was trained on. What it writes back is read by
// toolMode.read, which knows the forms the common templates teach:
//
//	Hermes, Qwen2.5, Qwen3  <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//	Mistral                 [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//	Llama 3.1-3.3           <|python_tag|>{"name": ..., "parameters": {...}} (;-separated)
//	Granite, Phi-4-mini     <|tool_call|>[{"name": ..., "arguments": {...}}]
//
// Special tokens are not part of the streamed text (the decoder skips
// them), so a call whose marker is a special token arrives as bare JSON:
// an answer that is a JSON object or array of calls to the given tools,
// and nothing else, is read as those calls. tool_choice "required" and a
// named function constrain decoding instead (package constrain, as vLLM
// does): the answer is then a JSON array of {"name", "parameters"} or the
// named function's arguments, whatever form the model would have used.

// toolDef is one entry of a request's tools array.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// toolNameRe is OpenAI's rule for function names.
var toolNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// maxTools bounds a request's tools array.
const maxTools = 128

// Tool choices.
const (
	toolAuto     = "auto"     // the model decides; its answer is parsed
	toolRequired = "required" // at least one call, constrained
	toolNamed    = "function" // the named function's arguments, constrained
)

// toolMode is a chat request's tools: how its answer is read.
type toolMode struct {
	choice string          // toolAuto, toolRequired or toolNamed
	single bool            // parallel_tool_calls false: at most one call
	named  string          // the function's name for toolNamed
	names  map[string]bool // the tools' names
	// markers are the opening markers of a call in the model's text form
	// (toolMode.read) that the template shows.
	markers []string
}

// toolMarkers are the openings of a call in the text forms read reads; a
// template that writes one teaches the model that form.
var toolMarkers = []string{"<tool_call>", "[TOOL_CALLS]", "<|tool_call|>", "<|python_tag|>"}

// parseTools validates tools and tool_choice. It returns the tools for the
// template (nil: none), how to read the answer (nil: as plain content) and,
// for "required" or a named function, the constraint on decoding.
func (s *Server) parseTools(r *chatRequest) ([]json.RawMessage, *toolMode, *constrain.Grammar, *apiError) {
	if len(bytes.TrimSpace(r.Functions)) > 0 && string(bytes.TrimSpace(r.Functions)) != "null" {
		return nil, nil, nil, invalid("functions", "unsupported_parameter", "'functions' (deprecated) is not supported; use 'tools'.")
	}
	var raws []json.RawMessage
	if t := bytes.TrimSpace(r.Tools); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &raws); err != nil {
			return nil, nil, nil, invalid("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools.")
		}
	}
	if len(raws) > maxTools {
		return nil, nil, nil, invalid("tools", "array_above_max_length", "Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", maxTools, len(raws))
	}
	defs := make([]toolDef, len(raws))
	names := map[string]bool{}
	for i, raw := range raws {
		p := fmt.Sprintf("tools[%d]", i)
		if err := json.Unmarshal(raw, &defs[i]); err != nil || defs[i].Function == nil {
			return nil, nil, nil, invalid(p, "", "Invalid '%s': expected an object {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}.", p)
		}
		if defs[i].Type != "function" {
			return nil, nil, nil, invalid(p+".type", "invalid_value", "Invalid value for '%s.type': '%s'. Supported values are: 'function'.", p, defs[i].Type)
		}
		name := defs[i].Function.Name
		if !toolNameRe.MatchString(name) {
			return nil, nil, nil, invalid(p+".function.name", "invalid_value", "Invalid '%s.function.name': '%s' does not match '^[a-zA-Z0-9_-]{1,64}$'.", p, name)
		}
		if names[name] {
			return nil, nil, nil, invalid(p+".function.name", "invalid_value", "Invalid '%s.function.name': '%s' is given twice.", p, name)
		}
		names[name] = true
		if pr := bytes.TrimSpace(defs[i].Function.Parameters); len(pr) > 0 && pr[0] != '{' && string(pr) != "null" {
			return nil, nil, nil, invalid(p+".function.parameters", "invalid_type", "Invalid type for '%s.function.parameters': expected a JSON Schema object.", p)
		}
	}
	choice, named, e := parseToolChoice(r.ToolChoice, names)
	if e != nil {
		return nil, nil, nil, e
	}
	if choice == "none" || len(raws) == 0 {
		return nil, nil, nil, nil
	}
	m := &toolMode{choice: choice, named: named, names: names, single: r.ParallelToolCalls != nil && !*r.ParallelToolCalls}
	src := s.cfg.Tokenizer.ChatTemplateSource(true)
	if choice == toolAuto && !strings.Contains(src, "tools") {
		return nil, nil, nil, invalid("tools", "unsupported_value", "The model's chat template does not show the model its tools, so it cannot choose to call them ('tool_choice' \"auto\"); 'required' or a named function still work: they constrain the answer to a call.")
	}
	for _, mk := range toolMarkers {
		if strings.Contains(src, mk) {
			m.markers = append(m.markers, mk)
		}
	}
	if len(m.markers) == 0 {
		m.markers = []string{"<tool_call>"} // the most common form, for templates that show none
	}
	var g *constrain.Grammar
	switch choice {
	case toolNamed:
		for i, d := range defs {
			if d.Function.Name == named {
				if g, e = s.compileSchema(paramsSchema(d), strictOf(d), fmt.Sprintf("tools[%d].function.parameters", i), ""); e != nil {
					return nil, nil, nil, e
				}
			}
		}
	case toolRequired:
		if g, e = s.requiredGrammar(defs, m.single); e != nil {
			return nil, nil, nil, e
		}
	}
	return raws, m, g, nil
}

// requiredGrammar compiles tool_choice "required": a JSON array of at least
// one (at most one when single) {"name", "parameters"} call to the tools.
// Each tool's parameters go under the array schema's $defs, as tool<i>, with
// their local $refs rebased there ("#/$defs/X" becomes "#/$defs/tool<i>/$defs/X"),
// so that a schema with $defs (as pydantic and zod write nested models)
// means what it meant alone.
func (s *Server) requiredGrammar(defs []toolDef, single bool) (*constrain.Grammar, *apiError) {
	var params, alts []string
	for i, d := range defs {
		p := fmt.Sprintf("tools[%d].function.parameters", i)
		base := fmt.Sprintf("#/$defs/tool%d", i)
		rebased, err := rebaseRefs(paramsSchema(d), base)
		if err != nil {
			return nil, invalid(p, "invalid_schema", "Invalid '%s': %v.", p, err)
		}
		params = append(params, fmt.Sprintf(`"tool%d":%s`, i, rebased))
		name, _ := json.Marshal(d.Function.Name)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},"parameters":{"$ref":%q}},"required":["name","parameters"],"additionalProperties":false}`, name, base))
	}
	most := ""
	if single {
		most = `"maxItems":1,`
	}
	schema := `{"$defs":{` + strings.Join(params, ",") + `},"type":"array","minItems":1,` + most + `"items":{"anyOf":[` + strings.Join(alts, ",") + `]}}`
	g, e := s.compileSchema(json.RawMessage(schema), false, "tools", "")
	if e == nil {
		return g, nil
	}
	// Name the tool whose parameters are at fault where one is.
	for i, d := range defs {
		if _, err := constrain.JSONSchema(paramsSchema(d), constrain.SchemaOptions{}); err != nil {
			return nil, schemaError(err, fmt.Sprintf("tools[%d].function.parameters", i), "")
		}
	}
	// Each is fine alone; together they are not (too large, most likely).
	e.Message = "With tool_choice \"required\" every tool's parameters make one schema, the call array's. " + e.Message + " Send fewer tools, or name one in tool_choice."
	return nil, e
}

// schemaLiterals are the keywords whose values are JSON values, not
// schemas; schemaMaps those whose values map names to schemas.
var (
	schemaLiterals = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}
	schemaMaps     = map[string]bool{"properties": true, "$defs": true, "definitions": true, "patternProperties": true, "dependentSchemas": true}
)

// rebaseRefs returns schema with its local references ("#", "#/...") made
// relative to base, the JSON pointer (as a "#/..." reference) where the
// schema is embedded in a larger one. Key order is kept (it is the order
// in which constrained decoding writes properties); values of const, enum,
// default and examples are copied as they are.
func rebaseRefs(schema []byte, base string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	var out bytes.Buffer
	if err := rebaseValue(d, &out, base, inSchema); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("not one JSON value")
	}
	return out.Bytes(), nil
}

// What a JSON value is to rebaseValue.
const (
	inSchema  = iota // a schema (or an array of them): its $ref is rebased
	inMap            // an object of schemas by name (properties, $defs)
	inLiteral        // a JSON value, copied as it is
)

func rebaseValue(d *json.Decoder, out *bytes.Buffer, base string, kind int) error {
	if kind == inLiteral {
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return err
		}
		out.Write(raw)
		return nil
	}
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('['):
		out.WriteByte('[')
		for i := 0; d.More(); i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := rebaseValue(d, out, base, kind); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case json.Delim('{'):
		out.WriteByte('{')
		for i := 0; d.More(); i++ {
			kt, err := d.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if i > 0 {
				out.WriteByte(',')
			}
			writeScalar(out, key)
			out.WriteByte(':')
			child := kind
			switch {
			case kind == inMap:
				child = inSchema
			case schemaLiterals[key]:
				child = inLiteral
			case schemaMaps[key]:
				child = inMap
			case key == "$ref":
				var ref string
				var raw json.RawMessage
				if err := d.Decode(&raw); err != nil {
					return err
				}
				if json.Unmarshal(raw, &ref) == nil && (ref == "#" || strings.HasPrefix(ref, "#/")) {
					writeScalar(out, base+ref[1:])
				} else {
					out.Write(raw) // not a local reference: the compiler says why
				}
				continue
			}
			if err := rebaseValue(d, out, base, child); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	default:
		writeScalar(out, t)
		return nil
	}
	_, err = d.Token() // the closing delimiter
	return err
}

// writeScalar writes a string, number, boolean or null as JSON.
func writeScalar(out *bytes.Buffer, v any) {
	b, _ := json.Marshal(v)
	out.Write(b)
}

// paramsSchema is a tool's parameters schema ({"type": "object"} when it
// has none).
func paramsSchema(d toolDef) json.RawMessage {
	if p := bytes.TrimSpace(d.Function.Parameters); len(p) > 0 && string(p) != "null" {
		return p
	}
	return json.RawMessage(`{"type":"object"}`)
}

func strictOf(d toolDef) bool { return d.Function.Strict != nil && *d.Function.Strict }

// parseToolChoice reads tool_choice: "none", "auto", "required" or
// {"type": "function", "function": {"name": NAME}}; absent is "auto" with
// tools and "none" without.
func parseToolChoice(raw json.RawMessage, names map[string]bool) (choice, named string, e *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if len(names) > 0 {
			return toolAuto, "", nil
		}
		return "none", "", nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "none":
			return "none", "", nil
		case toolAuto, toolRequired:
			if len(names) == 0 {
				return "", "", invalid("tool_choice", "", "Invalid value for 'tool_choice': '%s' needs 'tools'.", str)
			}
			return str, "", nil
		}
		return "", "", invalid("tool_choice", "invalid_value", "Invalid value for 'tool_choice': '%s'. Supported values are: 'none', 'auto', 'required' or a named function.", str)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return "", "", invalid("tool_choice", "", "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
	}
	if !names[obj.Function.Name] {
		return "", "", invalid("tool_choice.function.name", "invalid_value", "Invalid 'tool_choice': no tool named '%s' in 'tools'.", obj.Function.Name)
	}
	return toolNamed, obj.Function.Name, nil
}

// chatToolCalls converts an assistant message's tool_calls (arguments as
// the JSON text OpenAI sends) for the chat template.
func chatToolCalls(i int, raw json.RawMessage) ([]tokenizer.ToolCall, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	p := fmt.Sprintf("messages.[%d].tool_calls", i)
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, invalid(p, "invalid_type", "Invalid type for '%s': expected an array of tool calls.", p)
	}
	out := make([]tokenizer.ToolCall, len(calls))
	for j, c := range calls {
		if c.Function == nil || c.Function.Name == "" || (c.Type != "" && c.Type != "function") {
			return nil, invalid(fmt.Sprintf("%s.[%d]", p, j), "", "Invalid '%s.[%d]': expected {\"id\": ..., \"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}.", p, j)
		}
		args := bytes.TrimSpace(c.Function.Arguments)
		// OpenAI sends the arguments as a string of JSON: the template gets
		// the object it holds (a string that is not JSON stays a string).
		var text string
		if json.Unmarshal(args, &text) == nil {
			if t := bytes.TrimSpace([]byte(text)); json.Valid(t) && len(t) > 0 {
				args = t
			}
		}
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		out[j] = tokenizer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}

// toolCallOut is a call in a response: the arguments as JSON text.
type toolCallOut struct {
	Index    *int   `json:"index,omitempty"` // in stream deltas
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// newToolCallID returns an id in OpenAI's form ("call_" and 24 characters).
func newToolCallID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "call_" + string(b)
}

// parsedCall is a call read from the model's answer.
type parsedCall struct {
	name string
	args json.RawMessage
}

// toOut makes response calls of parsed ones.
func toOut(calls []parsedCall, indexed bool) []toolCallOut {
	out := make([]toolCallOut, len(calls))
	for i, c := range calls {
		out[i] = toolCallOut{ID: newToolCallID(), Type: "function"}
		out[i].Function.Name, out[i].Function.Arguments = c.name, string(c.args)
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

// read splits a whole answer into its content and its calls: for a named
// function the answer is the arguments; for "required" the array of
// {"name", "parameters"}; for "auto" the text forms the templates teach.
// ok is false when the answer holds no call (it is all content).
func (m *toolMode) read(text string) (content string, calls []parsedCall, ok bool) {
	content, calls, ok = m.readAll(text)
	if m.single && len(calls) > 1 {
		calls = calls[:1] // parallel_tool_calls false: the first call
	}
	return content, calls, ok
}

// readAll is read without parallel_tool_calls' limit.
func (m *toolMode) readAll(text string) (content string, calls []parsedCall, ok bool) {
	switch m.choice {
	case toolNamed:
		if json.Valid([]byte(text)) {
			return "", []parsedCall{{m.named, compact(text)}}, true
		}
		return text, nil, false
	case toolRequired:
		if calls, ok := m.jsonCalls(text); ok {
			return "", calls, true
		}
		return text, nil, false
	}
	at := m.markerAt(text)
	if at >= 0 {
		if calls, ok := m.markedCalls(text[at:]); ok {
			return strings.TrimRight(text[:at], " \t\r\n"), calls, true
		}
	}
	// Bare JSON: a marker that was a special token, skipped in the text.
	if calls, ok := m.jsonCalls(text); ok {
		return "", calls, true
	}
	return text, nil, false
}

// markerAt is the index of the first marker in text, -1 if none.
func (m *toolMode) markerAt(text string) int {
	at := -1
	for _, mk := range m.markers {
		if i := strings.Index(text, mk); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// markedCalls reads the calls of text, which starts with a marker: every
// <tool_call>...</tool_call> block (the last may be unterminated), or the
// JSON after [TOOL_CALLS], <|tool_call|> or <|python_tag|>.
func (m *toolMode) markedCalls(text string) ([]parsedCall, bool) {
	if strings.HasPrefix(text, "<tool_call>") {
		var calls []parsedCall
		for rest := text; ; {
			i := strings.Index(rest, "<tool_call>")
			if i < 0 {
				break
			}
			if strings.TrimSpace(rest[:i]) != "" && len(calls) > 0 {
				return nil, false // text between calls: not a run of calls
			}
			rest = rest[i+len("<tool_call>"):]
			body := rest
			if j := strings.Index(rest, "</tool_call>"); j >= 0 {
				body, rest = rest[:j], rest[j+len("</tool_call>"):]
			} else {
				rest = ""
			}
			c, ok := m.jsonCalls(body)
			if !ok {
				return nil, false
			}
			calls = append(calls, c...)
		}
		return calls, len(calls) > 0
	}
	for _, mk := range []string{"[TOOL_CALLS]", "<|tool_call|>", "<|python_tag|>"} {
		if strings.HasPrefix(text, mk) {
			body := strings.TrimSuffix(strings.TrimSpace(text[len(mk):]), "<|/tool_call|>")
			return m.jsonCalls(body)
		}
	}
	return nil, false
}

// jsonCalls reads text that is wholly JSON calls: an object {"name",
// "arguments" or "parameters"}, an array of them, or Llama's objects
// separated by ";". Every name must be one of the tools'.
func (m *toolMode) jsonCalls(text string) ([]parsedCall, bool) {
	text = strings.TrimSpace(text)
	if text == "" || (text[0] != '{' && text[0] != '[') {
		return nil, false
	}
	var objs []json.RawMessage
	if text[0] == '[' {
		if json.Unmarshal([]byte(text), &objs) != nil {
			return nil, false
		}
	} else {
		d := json.NewDecoder(strings.NewReader(text))
		for {
			var o json.RawMessage
			if err := d.Decode(&o); err != nil {
				return nil, false
			}
			objs = append(objs, o)
			rest := strings.TrimSpace(text[d.InputOffset():])
			if rest == "" {
				break
			}
			if !strings.HasPrefix(rest, ";") {
				return nil, false
			}
			text = strings.TrimSpace(rest[1:])
			d = json.NewDecoder(strings.NewReader(text))
		}
	}
	if len(objs) == 0 {
		return nil, false
	}
	calls := make([]parsedCall, 0, len(objs))
	for _, o := range objs {
		var c struct {
			Name       string          `json:"name"`
			Arguments  json.RawMessage `json:"arguments"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(o, &c) != nil || !m.names[c.Name] {
			return nil, false
		}
		args := c.Arguments
		if len(args) == 0 {
			args = c.Parameters
		}
		var s string
		if json.Unmarshal(args, &s) == nil && json.Valid([]byte(s)) {
			args = json.RawMessage(s) // arguments given as a string of JSON
		}
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = json.RawMessage(`{}`)
		}
		calls = append(calls, parsedCall{c.Name, compact(string(args))})
	}
	return calls, true
}

// compact returns JSON text without insignificant whitespace.
func compact(s string) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return json.RawMessage(s)
	}
	return b.Bytes()
}

// toolGate holds back, while a choice streams, the text that may be a tool
// call: from the first marker (or a text that could still become one) to
// the end, and the whole answer when it starts as JSON (bare calls) or
// when decoding is constrained to calls. What it lets through is content:
// with finish's rest, exactly the content read would give the whole answer
// (whitespace before a call is not content, so trailing whitespace waits
// for what follows it).
type toolGate struct {
	m     *toolMode
	text  strings.Builder // everything so far
	sent  int             // bytes of text already let through
	held  bool            // from a marker (or the JSON start) on, nothing more goes out
	first bool            // a non-space byte was seen
}

// add takes the next text of the choice and returns the content to send.
func (g *toolGate) add(s string) string {
	g.text.WriteString(s)
	if g.held || g.m.choice != toolAuto {
		g.held = true
		return ""
	}
	t := g.text.String()
	if !g.first {
		if trimmed := strings.TrimLeft(t, " \t\r\n"); trimmed != "" {
			g.first = true
			if trimmed[0] == '{' || trimmed[0] == '[' {
				g.held = true
				return ""
			}
		} else {
			return "" // leading whitespace waits for what follows it
		}
	}
	if at := g.m.markerAt(t[g.sent:]); at >= 0 {
		out := strings.TrimRight(t[g.sent:g.sent+at], " \t\r\n")
		g.sent += len(out) // the whitespace before the marker waits for finish
		g.held = true
		return out
	}
	// Keep back a tail that a marker may start with, and the whitespace
	// before it (not content if a call follows).
	end := len(t)
	for _, mk := range g.m.markers {
		for k := min(len(mk)-1, len(t)-g.sent); k > 0; k-- {
			if strings.HasSuffix(t, mk[:k]) {
				end = min(end, len(t)-k)
				break
			}
		}
	}
	end = max(g.sent, len(strings.TrimRight(t[:end], " \t\r\n")))
	out := t[g.sent:end]
	g.sent = end
	return out
}

// finish reads the whole answer and returns the content not yet sent and
// the calls (none: the held text is content after all).
func (g *toolGate) finish() (string, []parsedCall) {
	t := g.text.String()
	_, calls, ok := g.m.read(t)
	if !ok {
		return t[g.sent:], nil
	}
	if g.m.choice == toolAuto {
		if at := g.m.markerAt(t); at >= g.sent {
			return strings.TrimRight(t[g.sent:at], " \t\r\n"), calls
		}
	}
	return "", calls
}

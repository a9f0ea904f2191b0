package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/engine"
)

// This file holds the OpenAI API shapes: request bodies as the official
// clients (openai-python, openai-node) send them, the responses and stream
// chunks they parse, and the error object. Every sampling parameter is
// honoured: temperature, top_p, seed, presence_penalty, frequency_penalty,
// logit_bias, n, logprobs and top_logprobs, and vLLM's top_k, min_p and
// repetition_penalty. Fields that cannot change the answer are accepted and
// ignored (ignoredFields: user, metadata, store, ...). response_format's
// json_object and json_schema (and llama.cpp's json_schema field)
// constrain decoding to JSON (package constrain; format.go). tools,
// tool_choice and tool messages go to the checkpoint's chat template and
// the answer's calls come back as tool_calls (tools.go). Anything else, a
// field this server does not know or one whose meaning it cannot honour
// (image or audio content, suffix), is
// refused with a 400 naming the parameter, so a client never gets a
// silently different answer. Completions with echo and logprobs score the
// prompt (engine.Request.PromptLogprobs).

// apiError is the OpenAI error object with its HTTP status.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid returns a 400 invalid_request_error for param.
func invalid(param, code, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, a...), Type: "invalid_request_error", Param: strp(param), Code: strp(code)}
}

// errorBody is what an error response holds.
type errorBody struct {
	Error *apiError `json:"error"`
}

// chatMessage is one message of a chat request. Content is a string or an
// array of content parts; only text parts are supported.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
	// ToolCalls are an assistant turn's calls; ToolCallID is the call a
	// "tool" message answers.
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// commonRequest holds the fields shared by chat and text completions.
type commonRequest struct {
	Model            string              `json:"model"`
	MaxTokens        *int                `json:"max_tokens"`
	Temperature      *float64            `json:"temperature"`
	TopP             *float64            `json:"top_p"`
	N                *int                `json:"n"`
	Stream           bool                `json:"stream"`
	StreamOptions    *streamOptions      `json:"stream_options"`
	Stop             json.RawMessage     `json:"stop"`
	Seed             *int64              `json:"seed"`
	FrequencyPenalty *float64            `json:"frequency_penalty"`
	PresencePenalty  *float64            `json:"presence_penalty"`
	LogitBias        map[string]*float64 `json:"logit_bias"` // nil values: null, refused
	// TopK, MinP and RepetitionPenalty are vLLM's sampling extensions
	// (top_k -1 or 0: off; repetition_penalty 1: off).
	TopK              *int     `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	// IgnoreEOS is vLLM's extension: keep generating through the model's
	// stop tokens (stop strings still apply), for benchmarks.
	IgnoreEOS bool `json:"ignore_eos"`
	// KVTiers is bitdecode's extension for a bw KV cache: the request's
	// own tier policy (engine.Request.KVTiers), e.g. "h20:m40:l40". Null
	// or "" keeps the server's. OpenAI clients send it with extra_body.
	KVTiers *string `json:"kv_tiers"`
	// ResponseFormat is OpenAI's response_format (text, json_object,
	// json_schema), on both endpoints as vLLM accepts it.
	ResponseFormat *responseFormat `json:"response_format"`
	// JSONSchema is llama.cpp's server extension: a JSON Schema the output
	// must match (as response_format json_schema, strict off).
	JSONSchema json.RawMessage `json:"json_schema"`
}

// responseFormat is OpenAI's response_format object.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	commonRequest
	Messages            []json.RawMessage `json:"messages"` // chatMessages, read one by one (decodeAt)
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Logprobs            *bool             `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	Tools               json.RawMessage   `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"` // false: at most one call
	Functions           json.RawMessage   `json:"functions"`
	Modalities          []string          `json:"modalities"`
	Audio               json.RawMessage   `json:"audio"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	commonRequest
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
	Logprobs *int            `json:"logprobs"`
	BestOf   *int            `json:"best_of"`
}

// decodeJSON parses body into v, turning JSON errors into OpenAI errors
// that name the field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "", "The request body is empty; send a JSON object (Content-Type: application/json).")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return invalid("", "", "The request body must be a JSON object, got a JSON %s.", te.Value)
		}
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "commonRequest.")
			return invalid(field, "invalid_type", "Invalid type for '%s': expected %s, got a JSON %s.", field, jsonKind(te.Type.String()), te.Value)
		}
		return invalid("", "", "We could not parse the JSON body of your request (%v). The OpenAI API expects a JSON payload.", err)
	}
	return nil
}

// decodeAt parses raw, the value of param in the body, into v: a type
// error names the field under param ("messages.[2].role").
func decodeAt(raw []byte, v any, param string) *apiError {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return invalid(param, "", "Invalid '%s': %v.", param, err)
	}
	field := param
	if te.Field != "" {
		field += "." + te.Field
	}
	return invalid(field, "invalid_type", "Invalid type for '%s': expected %s, got a JSON %s.", field, jsonKind(te.Type.String()), te.Value)
}

func jsonKind(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case goType == "string":
		return "a string"
	}
	return "an object"
}

// maxStops is the OpenAI limit on stop sequences.
const maxStops = 4

// parseStop reads stop: null, a string or an array of up to 4 strings of at
// most engine.MaxStopBytes bytes each; empty strings are dropped.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var many []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		many = []string{one}
	} else if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("stop", "invalid_type", "Invalid type for 'stop': expected a string or an array of strings.")
	}
	if len(many) > maxStops {
		return nil, invalid("stop", "array_above_max_length", "Invalid 'stop': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", maxStops, len(many))
	}
	var out []string
	for i, s := range many {
		if len(s) > engine.MaxStopBytes {
			return nil, invalid("stop", "string_above_max_length", "Invalid 'stop': stop sequence %d is %d bytes long; at most %d bytes are supported.", i, len(s), engine.MaxStopBytes)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// messageText returns a message's content as text: a string, or the
// concatenated text of an array of {type: "text"} parts.
func messageText(i int, m chatMessage) (string, *apiError) {
	param := fmt.Sprintf("messages.[%d].content", i)
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid(param, "", "Invalid value for '%s': a %s message needs content.", param, m.Role)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "invalid_type", "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", invalid(fmt.Sprintf("%s.[%d].type", param, j), "unsupported_content", "Content parts of type '%s' are not supported by this model; only 'text' parts are.", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// usage is the OpenAI usage object.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details,omitempty"`
}

type tokenDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type assistantMessage struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"` // null when the answer is only tool calls
	Refusal   *string       `json:"refusal"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int              `json:"index"`
	Message      assistantMessage `json:"message"`
	Logprobs     *chatLogprobs    `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             usage        `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chunkDelta struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int           `json:"index"`
	Delta        chunkDelta    `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is present (null until the last chunk) when the request set
	// stream_options.include_usage.
	Usage *usage `json:"usage,omitempty"`
}

type textChoice struct {
	Text         string        `json:"text"`
	Index        int           `json:"index"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type textResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the context limit (prompt plus completion), as vLLM
	// reports it.
	MaxModelLen int `json:"max_model_len"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// maxChoices bounds n: every choice is a sequence of its own in the KV
// cache (sharing the prompt's packed blocks where the cache shares
// prefixes).
const maxChoices = 16

// maxCompletionLogprobs is the legacy completions endpoint's limit on
// logprobs (OpenAI's).
const maxCompletionLogprobs = 5

// checkSampling validates the sampling fields shared by both endpoints and
// returns them as engine options (seed aside) and the number of choices.
func checkSampling(c *commonRequest, vocab int) (engine.SampleOptions, int, *apiError) {
	o := engine.SampleOptions{Temperature: 1, TopP: 1} // OpenAI's defaults
	if c.Model == "" {
		return o, 0, invalid("model", "", "You must provide a model parameter.")
	}
	n := 1
	if c.N != nil {
		n = *c.N
		if n < 1 {
			return o, 0, invalid("n", "integer_below_min_value", "Invalid 'n': integer below minimum value. Expected a value >= 1, but got %d instead.", n)
		}
		if n > maxChoices {
			return o, 0, invalid("n", "integer_above_max_value", "Invalid 'n': integer above maximum value. Expected a value <= %d, but got %d instead.", maxChoices, n)
		}
	}
	if t := c.Temperature; t != nil {
		if *t < 0 || *t > 2 || math.IsNaN(*t) {
			return o, 0, invalid("temperature", "decimal_out_of_range", "Invalid 'temperature': expected a value between 0 and 2, but got %g instead.", *t)
		}
		o.Temperature = *t
	}
	if p := c.TopP; p != nil {
		if *p < 0 || *p > 1 || math.IsNaN(*p) {
			return o, 0, invalid("top_p", "decimal_out_of_range", "Invalid 'top_p': expected a value between 0 and 1, but got %g instead.", *p)
		}
		o.TopP = *p
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"frequency_penalty", c.FrequencyPenalty, &o.FrequencyPenalty}, {"presence_penalty", c.PresencePenalty, &o.PresencePenalty}} {
		if f.v == nil {
			continue
		}
		if *f.v < -2 || *f.v > 2 || math.IsNaN(*f.v) {
			return o, 0, invalid(f.name, "decimal_out_of_range", "Invalid '%s': expected a value between -2 and 2, but got %g instead.", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if k := c.TopK; k != nil {
		if *k < -1 {
			return o, 0, invalid("top_k", "integer_below_min_value", "Invalid 'top_k': expected -1 (off), 0 (off) or a positive count, but got %d instead.", *k)
		}
		o.TopK = max(*k, 0)
	}
	if p := c.MinP; p != nil {
		if *p < 0 || *p > 1 || math.IsNaN(*p) {
			return o, 0, invalid("min_p", "decimal_out_of_range", "Invalid 'min_p': expected a value between 0 and 1, but got %g instead.", *p)
		}
		o.MinP = *p
	}
	if p := c.RepetitionPenalty; p != nil {
		if !(*p > 0 && *p <= 10) {
			return o, 0, invalid("repetition_penalty", "decimal_out_of_range", "Invalid 'repetition_penalty': expected a value in (0, 10] (1 is off), but got %g instead.", *p)
		}
		o.RepeatPenalty = *p
	}
	if len(c.LogitBias) > 0 {
		if len(c.LogitBias) > maxLogitBias {
			return o, 0, invalid("logit_bias", "", "Invalid 'logit_bias': %d entries, at most %d.", len(c.LogitBias), maxLogitBias)
		}
		o.LogitBias = make(map[int]float64, len(c.LogitBias))
		keys := make([]string, 0, len(c.LogitBias))
		for key := range c.LogitBias {
			keys = append(keys, key)
		}
		sort.Strings(keys) // the same error for the same request
		for _, key := range keys {
			id, err := strconv.Atoi(key)
			if err != nil || id < 0 || id >= vocab {
				return o, 0, invalid("logit_bias", "invalid_value", "Invalid key %q in 'logit_bias': expected a token id in [0, %d).", key, vocab)
			}
			if c.LogitBias[key] == nil {
				return o, 0, invalid("logit_bias", "invalid_type", "Invalid type for 'logit_bias.%s': expected a number, got null.", key)
			}
			b := *c.LogitBias[key]
			if b < -100 || b > 100 || math.IsNaN(b) {
				return o, 0, invalid("logit_bias", "decimal_out_of_range", "Invalid value for token %d in 'logit_bias': expected a value between -100 and 100, but got %g instead.", id, b)
			}
			o.LogitBias[id] = b
		}
	}
	if c.StreamOptions != nil && !c.Stream {
		return o, 0, invalid("stream_options", "", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	return o, n, nil
}

// maxLogitBias bounds logit_bias's entries (OpenAI allows 300).
const maxLogitBias = 300

// ignoredFields are request fields that cannot change the answer: they are
// accepted and ignored. (stream_options and kv_tiers are handled.)
var ignoredFields = map[string]bool{"user": true, "metadata": true, "store": true, "service_tier": true,
	"prompt_cache_key": true, "safety_identifier": true}

// checkFields returns a 400 naming the first field of body that the request
// type v does not declare and that is not in ignoredFields. A field whose
// value is null is not checked: null asks for the default, which is what
// this server does without the field (the official Python client sends
// null for every parameter a caller passes as None: function_call=None,
// reasoning_effort=None, ...).
func checkFields(body []byte, v any) *apiError {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil // decodeJSON reported it
	}
	known := jsonFields(reflect.TypeOf(v))
	names := make([]string, 0, len(keys))
	for k, v := range keys {
		if string(v) != "null" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] && !ignoredFields[k] {
			return invalid(k, "unknown_parameter", "Unrecognized request argument supplied: %s. This server does not support it, and ignoring it could change the answer.", k)
		}
	}
	return nil
}

// jsonFields returns the JSON names of a struct type's fields, those of
// embedded structs included.
func jsonFields(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			for k := range jsonFields(f.Type) {
				out[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// checkChatOnly refuses the chat features this server does not have.
func checkChatOnly(r *chatRequest) *apiError {
	if t := r.TopLogprobs; t != nil {
		if *t < 0 || *t > engine.MaxTopLogprobs {
			return invalid("top_logprobs", "integer_out_of_range", "Invalid 'top_logprobs': expected a value between 0 and %d, but got %d instead.", engine.MaxTopLogprobs, *t)
		}
		if r.Logprobs == nil || !*r.Logprobs {
			return invalid("top_logprobs", "", "'top_logprobs' needs 'logprobs' set to true.")
		}
	}
	if s := strings.TrimSpace(string(r.Audio)); s != "" && s != "null" {
		return invalid("audio", "unsupported_parameter", "audio is not supported by this server.")
	}
	for _, m := range r.Modalities {
		if m != "text" {
			return invalid("modalities", "unsupported_parameter", "modality '%s' is not supported; only 'text' is.", m)
		}
	}
	return nil
}

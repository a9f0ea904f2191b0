package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bitdecode/bitdecode/engine"
)

// The Responses API: POST /v1/responses, OpenAI's newer interface to the
// same generation (client.responses.create and client.responses.stream in
// the official clients).
//
// A request becomes the chat request it is equivalent to, and that request
// goes through the chat completions path (chatJob): instructions become a
// system message first; input (a string, or a list of items) becomes the
// messages: message items with their text parts, function_call items as
// the assistant turn's tool_calls and function_call_output items as tool
// messages; max_output_tokens is max_completion_tokens; text.format is
// response_format; tools and tool_choice are the chat forms of the same
// functions. So the chat template, sampling, stop handling, constrained
// decoding (package constrain), tool-call parsing and usage are the chat
// endpoint's, and the same conversation gives the same tokens at either
// endpoint. What the output is made into differs: a "response" object with
// output items (a "message" with "output_text", "function_call" items), and
// a stream of typed events (response.created, response.output_text.delta,
// ..., response.completed) instead of chat chunks.
//
// The server stores nothing: a response cannot be retrieved, deleted or
// continued (GET /v1/responses/{id}, previous_response_id and conversation
// are refused with errors that say so), and store is accepted and ignored.
// Built-in tools, image, file and audio inputs, reasoning options, prompt
// templates, background mode and truncation "auto" are refused with a 400
// naming the parameter, as are fields this server does not know.

// responsesRequest is the body of POST /v1/responses.
type responsesRequest struct {
	Model             string             `json:"model"`
	Input             json.RawMessage    `json:"input"`
	Instructions      *string            `json:"instructions"`
	MaxOutputTokens   *int               `json:"max_output_tokens"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	Tools             json.RawMessage    `json:"tools"`
	ToolChoice        json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls *bool              `json:"parallel_tool_calls"`
	Text              *responsesText     `json:"text"`
	Stream            bool               `json:"stream"`
	StreamOptions     *struct{}          `json:"stream_options"` // include_obfuscation: nothing is obfuscated
	Metadata          map[string]*string `json:"metadata"`
	User              *string            `json:"user"`
	Store             *bool              `json:"store"` // accepted; nothing is stored
	Truncation        *string            `json:"truncation"`
	Include           []string           `json:"include"`
	TopLogprobs       *int               `json:"top_logprobs"`
	// MaxToolCalls bounds calls to built-in tools, which this server has
	// none of: accepted and echoed.
	MaxToolCalls *int `json:"max_tool_calls"`
	// PromptCacheRetention cannot change the answer (the prefix cache is
	// the server's own): accepted and ignored.
	PromptCacheRetention *string `json:"prompt_cache_retention"`

	// Refused unless null (or false): they need stored state, a reasoning
	// model or prompt templates.
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         *bool           `json:"background"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Prompt             json.RawMessage `json:"prompt"`

	// The chat endpoint's sampling fields beyond OpenAI's Responses API
	// (vLLM's and bitdecode's extensions, and chat's penalties and stop),
	// sent with extra_body by the official clients.
	Seed              *int64              `json:"seed"`
	TopK              *int                `json:"top_k"`
	MinP              *float64            `json:"min_p"`
	RepetitionPenalty *float64            `json:"repetition_penalty"`
	FrequencyPenalty  *float64            `json:"frequency_penalty"`
	PresencePenalty   *float64            `json:"presence_penalty"`
	LogitBias         map[string]*float64 `json:"logit_bias"`
	Stop              json.RawMessage     `json:"stop"`
	IgnoreEOS         bool                `json:"ignore_eos"`
	KVTiers           *string             `json:"kv_tiers"`
}

// responsesText is the request's text configuration.
type responsesText struct {
	Format    *responsesFormat `json:"format"`
	Verbosity *string          `json:"verbosity"`
}

// responsesFormat is text.format: {"type": "text"}, {"type":
// "json_object"} or {"type": "json_schema", "name", "schema", "strict"}.
type responsesFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesInputItem is one item of a list input. Fields of other item
// kinds (id, status, annotations, ...) are not read.
type responsesInputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesPart is one content part of an input message or of a function
// call's output.
type responsesPart struct {
	Type    string  `json:"type"`
	Text    *string `json:"text"`
	Refusal *string `json:"refusal"`
}

// responsesTool is one entry of the request's tools (function tools only).
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responsesUsage is the Response object's usage.
type responsesUsage struct {
	InputTokens         int          `json:"input_tokens"`
	InputTokensDetails  tokenDetails `json:"input_tokens_details"`
	OutputTokens        int          `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responsesError is a failed response's error.
type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// responseObject is the Response object: the request's settings echoed
// (what the official clients type as required), the status, the output
// items and the usage.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responsesError    `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          *struct{}          `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               responsesText      `json:"text"`
	ToolChoice         any                `json:"tool_choice"`
	Tools              []responsesTool    `json:"tools"`
	TopLogprobs        int                `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responsesUsage    `json:"usage"`
	User               *string            `json:"user,omitempty"`
	Metadata           map[string]string  `json:"metadata"`
}

// outputMessage is a "message" output item.
type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

// outputText is an "output_text" content part.
type outputText struct {
	Type        string             `json:"type"`
	Text        string             `json:"text"`
	Annotations []struct{}         `json:"annotations"`
	Logprobs    []chatTokenLogprob `json:"logprobs"`
}

// functionCallItem is a "function_call" output item.
type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Limits on metadata, as OpenAI's.
const (
	maxMetadataKeys     = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// responsesInclude is the one include value served: the output text's
// log probabilities.
const responsesInclude = "message.output_text.logprobs"

// responses serves POST /v1/responses. The response's id goes out first as
// the X-Request-Id header (the official clients' request_id), errors
// included, so that a client's failure can be found in the request log.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var j *job
	var resp *responseObject
	id, ok := s.admit(w, r, "resp_", func(body []byte) (e *apiError) {
		j, resp, e = s.parseResponses(body)
		return e
	})
	if !ok {
		return
	}
	resp.ID = id
	s.runResponse(w, r, j, resp)
}

// responsesStored answers the endpoints of stored responses (GET and
// DELETE /v1/responses/{id}, its input_items, cancel) and the others under
// /v1/responses/: 404, since this server keeps no response.
func (s *Server) responsesStored(w http.ResponseWriter, r *http.Request) {
	rest := r.PathValue("rest")
	id, _, _ := strings.Cut(rest, "/")
	if id == "input_tokens" || id == "compact" {
		writeError(w, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("%s /v1/responses/%s is not supported by this server.", r.Method, rest),
			Type: "invalid_request_error", Code: strp("unsupported_endpoint")})
		return
	}
	writeError(w, &apiError{Status: http.StatusNotFound,
		Message: fmt.Sprintf("No response with id '%s': this server does not store responses (store is ignored), so they cannot be retrieved, deleted, cancelled or listed; send the whole conversation as input instead.", id),
		Type:    "invalid_request_error", Code: strp("response_not_found")})
}

// parseResponses validates a Responses request and builds its job (the
// equivalent chat request's) and the response object its settings echo.
func (s *Server) parseResponses(body []byte) (*job, *responseObject, *apiError) {
	var req responsesRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, nil, e
	}
	if e := checkFields(body, &req); e != nil {
		return nil, nil, e
	}
	if e := s.checkModel(req.Model); e != nil {
		return nil, nil, e
	}
	if e := checkResponsesRefused(&req); e != nil {
		return nil, nil, e
	}
	resp := &responseObject{Object: "response", Status: "in_progress", Model: s.cfg.ModelName, Output: []any{},
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, MaxToolCalls: req.MaxToolCalls,
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, Temperature: 1, TopP: 1,
		Truncation: "disabled", User: req.User, Metadata: map[string]string{}, Tools: []responsesTool{}, ToolChoice: "auto"}
	if req.Temperature != nil {
		resp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		resp.TopP = *req.TopP
	}
	if req.TopLogprobs != nil {
		resp.TopLogprobs = *req.TopLogprobs
	}
	md, e := checkMetadata(req.Metadata)
	if e != nil {
		return nil, nil, e
	}
	resp.Metadata = md

	cr := chatRequest{commonRequest: commonRequest{Model: req.Model, Temperature: req.Temperature, TopP: req.TopP, Stream: req.Stream,
		Stop: req.Stop, Seed: req.Seed, FrequencyPenalty: req.FrequencyPenalty, PresencePenalty: req.PresencePenalty, LogitBias: req.LogitBias,
		TopK: req.TopK, MinP: req.MinP, RepetitionPenalty: req.RepetitionPenalty, IgnoreEOS: req.IgnoreEOS, KVTiers: req.KVTiers},
		MaxCompletionTokens: req.MaxOutputTokens, ParallelToolCalls: req.ParallelToolCalls}
	if req.StreamOptions != nil && !req.Stream {
		return nil, nil, invalid("stream_options", "", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if cr.Messages, e = responsesMessages(req.Instructions, req.Input); e != nil {
		return nil, nil, e
	}
	if cr.Tools, resp.Tools, e = responsesTools(req.Tools); e != nil {
		return nil, nil, e
	}
	if cr.ToolChoice, resp.ToolChoice, e = responsesToolChoice(req.ToolChoice, len(resp.Tools)); e != nil {
		return nil, nil, e
	}
	if cr.ResponseFormat, resp.Text, e = responsesFormatOf(req.Text); e != nil {
		return nil, nil, e
	}
	if cr.Logprobs, cr.TopLogprobs, e = responsesLogprobs(req.Include, req.TopLogprobs); e != nil {
		return nil, nil, e
	}
	j, e := s.chatJob(cr)
	if e != nil {
		return nil, nil, responsesParam(e)
	}
	j.endpoint = "responses"
	return j, resp, nil
}

// checkResponsesRefused refuses the features that need what this server
// does not have: stored responses, a reasoning model, prompt templates,
// background runs, truncation.
func checkResponsesRefused(req *responsesRequest) *apiError {
	set := func(raw json.RawMessage) bool {
		t := bytes.TrimSpace(raw)
		return len(t) > 0 && string(t) != "null"
	}
	switch {
	case set(req.PreviousResponseID):
		return invalid("previous_response_id", "unsupported_parameter", "'previous_response_id' is not supported: this server does not store responses. Send the earlier turns in 'input' (the previous response's output items are valid input items).")
	case set(req.Conversation):
		return invalid("conversation", "unsupported_parameter", "'conversation' is not supported: this server does not store conversations. Send the earlier turns in 'input'.")
	case req.Background != nil && *req.Background:
		return invalid("background", "unsupported_parameter", "'background' mode is not supported: this server does not store responses, so a background response could never be retrieved. Use 'stream' for long generations.")
	case set(req.Prompt):
		return invalid("prompt", "unsupported_parameter", "'prompt' (a stored prompt template) is not supported by this server; send the prompt in 'instructions' and 'input'.")
	case set(req.Reasoning) && !allNull(req.Reasoning):
		return invalid("reasoning", "unsupported_parameter", "'reasoning' options are not supported: the served model is not a reasoning model.")
	case req.Text != nil && req.Text.Verbosity != nil:
		return invalid("text.verbosity", "unsupported_parameter", "'text.verbosity' is not supported by this model.")
	}
	if t := req.Truncation; t != nil {
		switch *t {
		case "disabled":
		case "auto":
			return invalid("truncation", "unsupported_value", "truncation 'auto' is not supported: this server never drops part of the conversation. An input longer than the context is refused (context_length_exceeded) instead; use 'disabled' (the default).")
		default:
			return invalid("truncation", "invalid_value", "Invalid value for 'truncation': '%s'. Supported values are: 'disabled' and 'auto'.", *t)
		}
	}
	return nil
}

// allNull reports whether raw is a JSON object whose members are all null
// ({} included): reasoning options that ask for nothing.
func allNull(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, v := range m {
		if string(bytes.TrimSpace(v)) != "null" {
			return false
		}
	}
	return true
}

// checkMetadata validates metadata (at most 16 pairs, keys of at most 64
// characters, string values of at most 512) and returns it for the echo.
func checkMetadata(md map[string]*string) (map[string]string, *apiError) {
	if len(md) > maxMetadataKeys {
		return nil, invalid("metadata", "object_above_max_properties", "Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got %d instead.", maxMetadataKeys, len(md))
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		switch {
		case utf8.RuneCountInString(k) > maxMetadataKeyLen:
			return nil, invalid("metadata", "invalid_value", "Invalid 'metadata': the key '%.64s...' is longer than %d characters.", k, maxMetadataKeyLen)
		case v == nil:
			return nil, invalid("metadata."+k, "invalid_type", "Invalid type for 'metadata.%s': expected a string, got null.", k)
		case utf8.RuneCountInString(*v) > maxMetadataValueLen:
			return nil, invalid("metadata."+k, "string_above_max_length", "Invalid 'metadata.%s': string too long. Expected a string with maximum length %d.", k, maxMetadataValueLen)
		}
		out[k] = *v
	}
	return out, nil
}

// responsesMessages converts instructions and input into chat messages:
// instructions as a system message first, a string input as one user
// message, a list input item by item. A function_call item joins the
// assistant turn right before it (a message item, or the calls before it),
// as a chat assistant message holds its content and its tool_calls; a
// function_call_output item is a tool message answering an earlier call.
func responsesMessages(instructions *string, input json.RawMessage) ([]json.RawMessage, *apiError) {
	raw := bytes.TrimSpace(input)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	var msgs []chatMessage
	if instructions != nil && *instructions != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: jsonString(*instructions)})
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return marshalMessages(append(msgs, chatMessage{Role: "user", Content: jsonString(text)}))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input", "invalid_type", "Invalid type for 'input': expected a string or an array of input items.")
	}
	if len(items) == 0 {
		return nil, invalid("input", "empty_array", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	calls := map[string]bool{}  // the call ids seen
	var turn []map[string]any   // the tool_calls of the last message, an assistant turn
	joinable := false           // the last message is an assistant turn that calls may join
	flush := func() *apiError { // writes turn's calls into the last message
		if len(turn) == 0 {
			return nil
		}
		b, err := json.Marshal(turn)
		if err != nil {
			return invalid("input", "", "Invalid 'input': %v.", err)
		}
		msgs[len(msgs)-1].ToolCalls = b
		turn = nil
		return nil
	}
	for i, rawItem := range items {
		p := fmt.Sprintf("input[%d]", i)
		if t := bytes.TrimSpace(rawItem); len(t) == 0 || t[0] != '{' {
			return nil, invalid(p, "invalid_type", "Invalid type for '%s': expected an input item object, got %s.", p, jsonValueKind(t))
		}
		var it responsesInputItem
		if e := decodeAt(rawItem, &it, p); e != nil {
			return nil, e
		}
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			text, e := responsesContent(p, it.Role, it.Content)
			if e != nil {
				return nil, e
			}
			if e := flush(); e != nil {
				return nil, e
			}
			msgs = append(msgs, chatMessage{Role: it.Role, Content: jsonString(text)})
			joinable = it.Role == "assistant"
		case "function_call":
			id, e := callID(p, it.CallID)
			if e != nil {
				return nil, e
			}
			if it.Name == nil || *it.Name == "" {
				return nil, invalid(p+".name", "missing_required_parameter", "Missing required parameter: '%s.name'.", p)
			}
			args := bytes.TrimSpace(it.Arguments)
			if len(args) == 0 || string(args) == "null" {
				return nil, invalid(p+".arguments", "missing_required_parameter", "Missing required parameter: '%s.arguments'.", p)
			}
			var argText string
			if json.Unmarshal(args, &argText) != nil {
				return nil, invalid(p+".arguments", "invalid_type", "Invalid type for '%s.arguments': expected a string (the arguments as JSON text).", p)
			}
			if !joinable {
				if e := flush(); e != nil {
					return nil, e
				}
				msgs = append(msgs, chatMessage{Role: "assistant"}) // content null: only calls
				joinable = true
			}
			turn = append(turn, map[string]any{"id": id, "type": "function", "function": map[string]string{"name": *it.Name, "arguments": argText}})
			calls[id] = true
		case "function_call_output":
			id, e := callID(p, it.CallID)
			if e != nil {
				return nil, e
			}
			if !calls[id] {
				return nil, invalid(p+".call_id", "invalid_value", "No tool call found for function call output with call_id '%s': a function_call_output answers a function_call item earlier in 'input'.", id)
			}
			out, e := responsesCallOutput(p+".output", it.Output)
			if e != nil {
				return nil, e
			}
			if e := flush(); e != nil {
				return nil, e
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(out)})
			joinable = false
		case "":
			return nil, invalid(p+".type", "missing_required_parameter", "Missing required parameter: '%s.type' (or a message's 'role').", p)
		default:
			return nil, invalid(p+".type", "unsupported_value", "Input items of type '%s' are not supported by this server; it takes 'message', 'function_call' and 'function_call_output' items (it stores nothing, so item references cannot resolve, and it has no built-in tools or reasoning items).", typ)
		}
	}
	if e := flush(); e != nil {
		return nil, e
	}
	return marshalMessages(msgs)
}

// callID reads a function_call or function_call_output item's call_id.
func callID(p string, id *string) (string, *apiError) {
	if id == nil || *id == "" {
		return "", invalid(p+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", p)
	}
	return *id, nil
}

// responsesContent returns an input message's text: a string, or its text
// parts joined (input_text; output_text and refusal in assistant turns).
func responsesContent(p, role string, content json.RawMessage) (string, *apiError) {
	switch role {
	case "user", "system", "developer", "assistant":
	case "":
		return "", invalid(p+".role", "missing_required_parameter", "Missing required parameter: '%s.role'.", p)
	default:
		return "", invalid(p+".role", "invalid_value", "Invalid value for '%s.role': '%s'. Supported values are: 'user', 'assistant', 'system' and 'developer'.", p, role)
	}
	return partsText(p+".content", content, role == "assistant")
}

// responsesCallOutput returns a function_call_output's output as text: a
// string, or its input_text parts joined.
func responsesCallOutput(p string, output json.RawMessage) (string, *apiError) {
	return partsText(p, output, false)
}

// partsText reads content at param p: a string or an array of text parts.
// assistant allows the parts of an earlier response's message (output_text,
// refusal).
func partsText(p string, content json.RawMessage, assistant bool) (string, *apiError) {
	raw := bytes.TrimSpace(content)
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid(p, "missing_required_parameter", "Missing required parameter: '%s'.", p)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", invalid(p, "invalid_type", "Invalid type for '%s': expected a string or an array of content parts.", p)
	}
	var b strings.Builder
	for j, rawPart := range parts {
		pp := fmt.Sprintf("%s[%d]", p, j)
		if t := bytes.TrimSpace(rawPart); len(t) == 0 || t[0] != '{' {
			return "", invalid(pp, "invalid_type", "Invalid type for '%s': expected a content part object, got %s.", pp, jsonValueKind(t))
		}
		var part responsesPart
		if e := decodeAt(rawPart, &part, pp); e != nil {
			return "", e
		}
		text := part.Text
		switch part.Type {
		case "input_text":
		case "output_text":
			if !assistant {
				return "", invalid(pp+".type", "invalid_value", "Invalid value for '%s.type': 'output_text' parts belong to assistant messages; use 'input_text'.", pp)
			}
		case "refusal":
			if !assistant {
				return "", invalid(pp+".type", "invalid_value", "Invalid value for '%s.type': 'refusal' parts belong to assistant messages.", pp)
			}
			text = part.Refusal
		case "input_image", "input_file", "input_audio":
			return "", invalid(pp+".type", "unsupported_content", "Content parts of type '%s' are not supported: the served model reads text only ('input_text' parts).", part.Type)
		case "":
			return "", invalid(pp+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", pp)
		default:
			return "", invalid(pp+".type", "invalid_value", "Invalid value for '%s.type': '%s'. Supported values are: 'input_text' (and, in assistant messages, 'output_text' and 'refusal').", pp, part.Type)
		}
		if text == nil {
			field := "text"
			if part.Type == "refusal" {
				field = "refusal"
			}
			return "", invalid(pp+"."+field, "missing_required_parameter", "Missing required parameter: '%s.%s'.", pp, field)
		}
		b.WriteString(*text)
	}
	return b.String(), nil
}

// jsonValueKind names the kind of a JSON value, for type errors.
func jsonValueKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func marshalMessages(msgs []chatMessage) ([]json.RawMessage, *apiError) {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, invalid("input", "", "Invalid 'input': %v.", err)
		}
		out[i] = b
	}
	return out, nil
}

// responsesTools converts function tools into the chat form
// ({"type": "function", "function": {...}}) and returns them for the echo.
// Built-in tools are refused.
func responsesTools(raw json.RawMessage) (json.RawMessage, []responsesTool, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, []responsesTool{}, nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(raw, &raws) != nil {
		return nil, nil, invalid("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools.")
	}
	if len(raws) > maxTools {
		return nil, nil, invalid("tools", "array_above_max_length", "Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", maxTools, len(raws))
	}
	tools := make([]responsesTool, len(raws))
	chat := make([]chatTool, len(raws))
	for i, r := range raws {
		p := fmt.Sprintf("tools[%d]", i)
		if t := bytes.TrimSpace(r); len(t) == 0 || t[0] != '{' {
			return nil, nil, invalid(p, "invalid_type", "Invalid type for '%s': expected a tool object, got %s.", p, jsonValueKind(t))
		}
		var t responsesTool
		if e := decodeAt(r, &t, p); e != nil {
			return nil, nil, e
		}
		switch t.Type {
		case "function":
		case "":
			return nil, nil, invalid(p+".type", "missing_required_parameter", "Missing required parameter: '%s.type'.", p)
		default:
			return nil, nil, invalid(p+".type", "unsupported_value", "Tools of type '%s' are not supported by this server: it has no built-in tools; only 'function' tools, which the client runs, are.", t.Type)
		}
		// The chat tool has the fields given, no others, in the order of
		// OpenAI's documentation: the template renders what a chat client
		// sending the same function would get.
		chat[i] = chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
		if t.Strict == nil {
			f := false // chat completions' default (OpenAI's Responses API defaults to true)
			t.Strict = &f
		}
		tools[i] = t
	}
	b, err := json.Marshal(chat)
	if err != nil {
		// A parameters value that is not valid JSON cannot get here
		// (decodeAt checked it); say what happened anyway.
		return nil, nil, invalid("tools", "", "Invalid 'tools': %v.", err)
	}
	return b, tools, nil
}

// chatTool is a function tool in the chat form.
type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesToolChoice converts tool_choice ("none", "auto", "required" or
// {"type": "function", "name": ...}) into the chat form and returns what
// the response echoes ("auto" when absent, as OpenAI does).
func responsesToolChoice(raw json.RawMessage, tools int) (json.RawMessage, any, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "auto", nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if str == "auto" && tools == 0 {
			return nil, str, nil // nothing to choose from: no tools, as without tool_choice
		}
		return raw, str, nil // chat validates it
	}
	var obj struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return nil, nil, invalid("tool_choice", "invalid_type", "Invalid type for 'tool_choice': expected 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}.")
	}
	switch obj.Type {
	case "function":
	case "":
		return nil, nil, invalid("tool_choice.type", "missing_required_parameter", "Missing required parameter: 'tool_choice.type'.")
	default:
		return nil, nil, invalid("tool_choice.type", "unsupported_value", "tool_choice of type '%s' is not supported by this server; it takes 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}.", obj.Type)
	}
	if obj.Name == nil {
		return nil, nil, invalid("tool_choice.name", "missing_required_parameter", "Missing required parameter: 'tool_choice.name'.")
	}
	chat, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": *obj.Name}})
	return chat, map[string]string{"type": "function", "name": *obj.Name}, nil
}

// responsesFormatOf converts text.format into response_format and returns
// the text configuration the response echoes.
func responsesFormatOf(t *responsesText) (*responseFormat, responsesText, *apiError) {
	echo := responsesText{Format: &responsesFormat{Type: "text"}}
	if t == nil || t.Format == nil {
		return nil, echo, nil
	}
	f := t.Format
	switch f.Type {
	case "text":
		return nil, echo, nil
	case "json_object":
		echo.Format = &responsesFormat{Type: "json_object"}
		return &responseFormat{Type: "json_object"}, echo, nil
	case "json_schema":
		if s := bytes.TrimSpace(f.Schema); len(s) == 0 || string(s) == "null" {
			return nil, echo, invalid("text.format.schema", "missing_required_parameter", "Missing required parameter: 'text.format.schema'.")
		}
		rf := &responseFormat{Type: "json_schema"}
		rf.JSONSchema = &struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		}{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
		g := *f
		if g.Strict == nil {
			no := false
			g.Strict = &no
		}
		echo.Format = &g
		return rf, echo, nil
	case "":
		return nil, echo, invalid("text.format.type", "missing_required_parameter", "Missing required parameter: 'text.format.type'.")
	}
	return nil, echo, invalid("text.format.type", "invalid_value", "Invalid value for 'text.format.type': '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", f.Type)
}

// responsesLogprobs reads include and top_logprobs: the output text's log
// probabilities are returned when include lists
// "message.output_text.logprobs", with top_logprobs alternatives.
func responsesLogprobs(include []string, top *int) (*bool, *int, *apiError) {
	on := false
	for i, v := range include {
		if v != responsesInclude {
			return nil, nil, invalid(fmt.Sprintf("include[%d]", i), "unsupported_value", "Invalid value for 'include[%d]': '%s'. This server can include only '%s'.", i, v, responsesInclude)
		}
		on = true
	}
	if top != nil && *top > 0 && !on {
		return nil, nil, invalid("top_logprobs", "", "'top_logprobs' needs 'include' to list '%s'.", responsesInclude)
	}
	if !on {
		return nil, nil, nil
	}
	return &on, top, nil
}

// toolFunctionParam matches a chat error's tools[i].function.X parameter.
var toolFunctionParam = regexp.MustCompile(`^tools\[(\d+)\]\.function\.`)

// responsesParam renames the parameter of an error from the chat path to
// the Responses request's own (max_completion_tokens is max_output_tokens,
// messages are input, response_format is text.format, a tool's
// function.parameters its parameters, ...), in the message too.
func responsesParam(e *apiError) *apiError {
	if e == nil {
		return nil
	}
	if e.Param != nil {
		old := *e.Param
		p := old
		switch {
		case old == "max_completion_tokens":
			p = "max_output_tokens"
		case old == "messages" || strings.HasPrefix(old, "messages."):
			p = "input"
		case old == "response_format.json_schema.schema":
			p = "text.format.schema"
		case strings.HasPrefix(old, "response_format"):
			p = "text.format"
		case old == "tool_choice.function.name":
			p = "tool_choice.name"
		case toolFunctionParam.MatchString(old):
			p = toolFunctionParam.ReplaceAllString(old, "tools[$1].")
		}
		if p != old {
			e.Message = strings.ReplaceAll(e.Message, old, p)
			e.Param = &p
		}
	}
	e.Message = chatNames.Replace(e.Message)
	return e
}

// chatNames renames the chat request's fields in error messages.
var chatNames = strings.NewReplacer("response_format", "text.format", "max_completion_tokens", "max_output_tokens")

// runResponse submits the job and writes the response object (resp, its
// id set), or streams its events.
func (s *Server) runResponse(w http.ResponseWriter, r *http.Request, j *job, resp *responseObject) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the generation if the handler returns early
	start := time.Now()
	streams, err := s.submit(ctx, j)
	if err != nil {
		writeError(w, responsesParam(submitError(err, j.param)))
		return
	}
	st := streams[0] // a Responses request has one choice
	resp.CreatedAt = time.Now().Unix()
	b := &responseBuilder{s: s, j: j, resp: resp}
	if j.tools != nil {
		b.gate = &toolGate{m: j.tools}
	}
	if j.stream {
		b.sse = newSSEWriter(s, w)
		if !b.lifecycle("response.created") || !b.lifecycle("response.in_progress") {
			return
		}
	}
	var res engine.Result
	defer func() { s.logRequest(resp.ID, j, []engine.Result{res}, start) }()
	for {
		ch, err := st.NextChunk(ctx)
		if err != nil {
			return // the client left; the scheduler frees the sequence
		}
		if !b.add(ch) {
			return // the client stopped reading
		}
		if ch.Done {
			break
		}
	}
	res = st.Result()
	switch res.FinishReason {
	case engine.FinishCancelled:
		return
	case engine.FinishError:
		s.cfg.Log.Printf("request %s failed: %v", resp.ID, res.Err)
		if !j.stream {
			writeError(w, responsesParam(generationError(res.Err)))
			return
		}
		b.fail(res)
		return
	}
	if !b.finish(res) {
		return
	}
	if !j.stream {
		s.setWriteDeadline(w)
		writeJSON(w, http.StatusOK, resp)
	}
}

// sseWriter writes server-sent events in the Responses API's form:
// "event: TYPE" and "data: JSON" lines, each event's JSON starting with its
// type and its sequence number (0, 1, 2, ...).
type sseWriter struct {
	s   *Server
	w   http.ResponseWriter
	rc  *http.ResponseController
	seq int
}

func newSSEWriter(s *Server, w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{s: s, w: w, rc: http.NewResponseController(w)}
}

// event writes one event of type typ with fields, a struct marshalled
// after the type and sequence number; false if the client is gone.
func (sw *sseWriter) event(typ string, fields any) bool {
	b, err := json.Marshal(fields)
	if err != nil {
		sw.s.cfg.Log.Printf("response event %s: %v", typ, err)
		return false
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d", typ, typ, sw.seq)
	if len(b) > 2 {
		buf.WriteByte(',')
		buf.Write(b[1:])
	} else {
		buf.WriteByte('}')
	}
	buf.WriteString("\n\n")
	sw.seq++
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.s.cfg.WriteTimeout))
	if _, err := sw.w.Write(buf.Bytes()); err != nil {
		return false
	}
	return sw.rc.Flush() == nil
}

// The fields of the stream's events (after type and sequence_number).
type (
	lifecycleEvent struct {
		Response *responseObject `json:"response"`
	}
	itemEvent struct {
		OutputIndex int `json:"output_index"`
		Item        any `json:"item"`
	}
	partEvent struct {
		ItemID       string     `json:"item_id"`
		OutputIndex  int        `json:"output_index"`
		ContentIndex int        `json:"content_index"`
		Part         outputText `json:"part"`
	}
	textDeltaEvent struct {
		ItemID       string             `json:"item_id"`
		OutputIndex  int                `json:"output_index"`
		ContentIndex int                `json:"content_index"`
		Delta        string             `json:"delta"`
		Logprobs     []chatTokenLogprob `json:"logprobs"`
	}
	textDoneEvent struct {
		ItemID       string             `json:"item_id"`
		OutputIndex  int                `json:"output_index"`
		ContentIndex int                `json:"content_index"`
		Text         string             `json:"text"`
		Logprobs     []chatTokenLogprob `json:"logprobs"`
	}
	argsDeltaEvent struct {
		ItemID      string `json:"item_id"`
		OutputIndex int    `json:"output_index"`
		Delta       string `json:"delta"`
	}
	argsDoneEvent struct {
		ItemID      string `json:"item_id"`
		OutputIndex int    `json:"output_index"`
		Arguments   string `json:"arguments"`
	}
)

// responseBuilder makes the output items of a generation's chunks, and
// with sse set streams them as events. A whole response is built the same
// way, chunk by chunk, so that it is exactly what the stream sends: the
// tool gate lets text out as content while it cannot be a call, and the
// calls are read at the end; the text's log probabilities go with the
// text they spell (those of a call's tokens, and of text held back by a
// stop string, with the last delta if no call follows; else dropped).
type responseBuilder struct {
	s    *Server
	j    *job
	resp *responseObject
	sse  *sseWriter // nil: not streamed
	gate *toolGate  // the answer's calls, with tools

	msg      *outputMessage // the message item, once opened
	msgIndex int
	text     strings.Builder
	logprobs []chatTokenLogprob // the message's
	pending  []chatTokenLogprob // the tokens not yet sent with text
}

func (b *responseBuilder) emit(typ string, fields any) bool {
	return b.sse == nil || b.sse.event(typ, fields)
}

// lifecycle sends the response as it stands in a lifecycle event.
func (b *responseBuilder) lifecycle(typ string) bool {
	return b.emit(typ, lifecycleEvent{Response: b.resp})
}

// add takes the next chunk of the generation.
func (b *responseBuilder) add(ch engine.Chunk) bool {
	if b.j.logprobs && len(ch.Tokens) > 0 {
		b.pending = append(b.pending, chatLogprobsOf(b.s.cfg.Tokenizer, ch.Tokens).Content...)
	}
	piece := ch.Text
	if b.gate != nil {
		piece = b.gate.add(ch.Text)
	}
	if piece == "" {
		return true
	}
	return b.content(piece)
}

// openMessage adds the message item, in progress, with its empty
// output_text part.
func (b *responseBuilder) openMessage() bool {
	if b.msg != nil {
		return true
	}
	b.msg = &outputMessage{ID: newID("msg_"), Type: "message", Status: "in_progress", Role: "assistant", Content: []outputText{}}
	b.msgIndex = len(b.resp.Output)
	b.resp.Output = append(b.resp.Output, b.msg)
	return b.emit("response.output_item.added", itemEvent{OutputIndex: b.msgIndex, Item: b.msg}) &&
		b.emit("response.content_part.added", partEvent{ItemID: b.msg.ID, OutputIndex: b.msgIndex, Part: newOutputText("", nil)})
}

func newOutputText(text string, lp []chatTokenLogprob) outputText {
	if lp == nil {
		lp = []chatTokenLogprob{}
	}
	return outputText{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: lp}
}

// content adds text to the message, with the log probabilities pending.
func (b *responseBuilder) content(piece string) bool {
	if !b.openMessage() {
		return false
	}
	lp := b.pending
	if lp == nil {
		lp = []chatTokenLogprob{}
	}
	b.pending = nil
	b.text.WriteString(piece)
	b.logprobs = append(b.logprobs, lp...)
	return b.emit("response.output_text.delta", textDeltaEvent{ItemID: b.msg.ID, OutputIndex: b.msgIndex, Delta: piece, Logprobs: lp})
}

// finish ends the output after the generation's last chunk: the content
// the tool gate held, the message's end, the calls, and the response's
// status and usage.
func (b *responseBuilder) finish(res engine.Result) bool {
	var calls []parsedCall
	if b.gate != nil {
		var rest string
		rest, calls = b.gate.finish()
		if rest != "" && !b.content(rest) {
			return false
		}
	}
	itemStatus, status := "completed", "completed"
	if res.FinishReason == engine.FinishLength {
		itemStatus, status = "incomplete", "incomplete"
		b.resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	if len(calls) == 0 {
		if !b.openMessage() {
			return false // an empty answer is an empty message
		}
		if len(b.pending) > 0 && !b.content("") {
			return false
		}
	}
	if b.msg != nil {
		part := newOutputText(b.text.String(), b.logprobs)
		b.msg.Content = []outputText{part}
		if !b.emit("response.output_text.done", textDoneEvent{ItemID: b.msg.ID, OutputIndex: b.msgIndex, Text: part.Text, Logprobs: part.Logprobs}) ||
			!b.emit("response.content_part.done", partEvent{ItemID: b.msg.ID, OutputIndex: b.msgIndex, Part: part}) {
			return false
		}
		b.msg.Status = itemStatus
		if !b.emit("response.output_item.done", itemEvent{OutputIndex: b.msgIndex, Item: b.msg}) {
			return false
		}
	}
	for _, c := range calls {
		item := &functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "in_progress", CallID: newToolCallID(), Name: c.name}
		i := len(b.resp.Output)
		b.resp.Output = append(b.resp.Output, item)
		if !b.emit("response.output_item.added", itemEvent{OutputIndex: i, Item: item}) {
			return false
		}
		item.Arguments = string(c.args)
		if !b.emit("response.function_call_arguments.delta", argsDeltaEvent{ItemID: item.ID, OutputIndex: i, Delta: item.Arguments}) ||
			!b.emit("response.function_call_arguments.done", argsDoneEvent{ItemID: item.ID, OutputIndex: i, Arguments: item.Arguments}) {
			return false
		}
		item.Status = "completed"
		if !b.emit("response.output_item.done", itemEvent{OutputIndex: i, Item: item}) {
			return false
		}
	}
	b.resp.Status = status
	b.resp.Usage = responsesUsageOf(res)
	done := time.Now().Unix()
	b.resp.CompletedAt = &done
	if status == "incomplete" {
		return b.lifecycle("response.incomplete")
	}
	return b.lifecycle("response.completed")
}

// fail ends a stream whose generation failed (or whose server shut down)
// with response.failed: the output so far, the open message incomplete,
// and the error.
func (b *responseBuilder) fail(res engine.Result) {
	if b.msg != nil {
		b.msg.Content = []outputText{newOutputText(b.text.String(), b.logprobs)}
		b.msg.Status = "incomplete"
	}
	e := responsesParam(generationError(res.Err))
	code := "server_error"
	if e.Status == http.StatusBadRequest {
		code = "invalid_prompt" // the request's format cannot be met
	}
	b.resp.Status = "failed"
	b.resp.Error = &responsesError{Code: code, Message: e.Message}
	b.resp.Usage = responsesUsageOf(res)
	b.lifecycle("response.failed")
}

func responsesUsageOf(res engine.Result) *responsesUsage {
	u := &responsesUsage{InputTokens: res.PromptTokens, InputTokensDetails: tokenDetails{CachedTokens: res.CachedTokens}, OutputTokens: res.CompletionTokens}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

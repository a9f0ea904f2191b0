package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	randv2 "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// Config configures a Server.
type Config struct {
	// Scheduler runs the generations; the server submits to it and, in
	// Serve, shuts it down.
	Scheduler *engine.Scheduler
	// Tokenizer encodes prompts and renders chat templates.
	Tokenizer *tokenizer.Tokenizer
	// ModelName is the model id clients send and /v1/models lists.
	ModelName string
	// Metrics receives request counts; pass the same Metrics to the
	// scheduler's latency hooks (nil: new metrics without latencies).
	Metrics *Metrics
	// BlockBytes is the size of one KV block, for /metrics (0: not shown).
	BlockBytes int64
	// Fingerprint is the system_fingerprint of responses (e.g. the KV
	// format); "" gives "bitdecode".
	Fingerprint string
	// MaxBodyBytes bounds request bodies (0: 4 MiB); larger ones get 413.
	MaxBodyBytes int64
	// Log receives lifecycle events and one line per failed request (nil:
	// discarded).
	Log *log.Logger
	// RequestLog receives one line per generation request: its id,
	// endpoint, choices, prompt and completion tokens, queue time, time to
	// first token, decode tokens/s and finish reason (nil: none).
	RequestLog io.Writer
	// LogJSON writes RequestLog's lines as JSON objects, one per line.
	LogJSON bool

	// Timeouts (0: the defaults below). BodyTimeout bounds reading a
	// request's headers and body; IdleTimeout a keep-alive connection
	// waiting for its next request; WriteTimeout each write of a response
	// (a whole non-streamed response, or one event of a stream), so a
	// client that stops reading cannot hold a generation's connection.
	BodyTimeout, IdleTimeout, WriteTimeout time.Duration

	// APIKey, when set, is required as "Authorization: Bearer KEY" on the
	// API (compared in constant time); /health and /metrics stay open
	// unless AuthAll.
	APIKey  string
	AuthAll bool
	// AllowedHosts, when set, are the Host header values accepted (a name,
	// or name:port; "*" accepts any): a defense against DNS rebinding of a
	// server bound to loopback. Requests for other hosts get 421.
	AllowedHosts []string
	// CORSOrigins are the browser origins allowed to call the API ("*":
	// any). A request with an Origin header not listed is refused with
	// 403, so a web page cannot make a visitor's browser use the server;
	// listed origins get CORS headers and preflight answers.
	CORSOrigins []string
}

// Timeout defaults.
const (
	DefaultBodyTimeout  = 60 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
	DefaultWriteTimeout = 60 * time.Second
)

// DefaultMaxBodyBytes is the request body limit when Config leaves it 0.
const DefaultMaxBodyBytes = 4 << 20

// defaultCompletionMaxTokens is OpenAI's default max_tokens for
// /v1/completions (chat completions default to the rest of the context).
const defaultCompletionMaxTokens = 16

// Server is the OpenAI-compatible HTTP API over a Scheduler.
type Server struct {
	cfg      Config
	created  int64
	draining atomic.Bool
	mux      *http.ServeMux
	logMu    sync.Mutex // serializes RequestLog lines
	active   sync.WaitGroup
	grammars grammarCache // compiled response_format schemas
	parsing  *byteBudget  // bodies being parsed and tokenized (2 × MaxBodyBytes)
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Scheduler == nil || cfg.Tokenizer == nil {
		return nil, errors.New("server: a scheduler and a tokenizer are required")
	}
	if cfg.ModelName == "" {
		return nil, errors.New("server: a model name is required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Fingerprint == "" {
		cfg.Fingerprint = "bitdecode"
	}
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{cfg: cfg, created: time.Now().Unix(), mux: http.NewServeMux(), parsing: newByteBudget(2 * cfg.MaxBodyBytes)}
	s.mux.HandleFunc("/v1/chat/completions", s.counted("chat", http.MethodPost, s.chat))
	s.mux.HandleFunc("/v1/completions", s.counted("completions", http.MethodPost, s.completions))
	s.mux.HandleFunc("/v1/responses", s.counted("responses", http.MethodPost, s.responses))
	s.mux.HandleFunc("/v1/responses/{rest...}", s.counted("responses", "", s.responsesStored))
	s.mux.HandleFunc("/v1/models", s.counted("models", http.MethodGet, s.models))
	s.mux.HandleFunc("/v1/models/{id...}", s.counted("models", http.MethodGet, s.model))
	s.mux.HandleFunc("/v1/embeddings", s.counted("other", "", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Message: "Embeddings (/v1/embeddings) are not supported by this server: it serves a generative model.",
			Type: "invalid_request_error", Code: strp("unsupported_endpoint")})
	}))
	s.mux.HandleFunc("/health", s.counted("health", http.MethodGet, s.health))
	s.mux.HandleFunc("/metrics", s.metrics)
	s.mux.HandleFunc("/", s.counted("other", "", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error"})
	}))
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.cfg.Metrics }

// Serve serves HTTP on ln until ctx ends, then shuts down gracefully: it
// stops accepting connections, answers new requests on open connections
// with 503, lets running streams finish for up to drain, then ends what is
// left (their blocks are freed) and closes the scheduler.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	// ReadTimeout would also end long streams (the connection's read
	// deadline cancels the request's context): the body's deadline is set
	// per request instead (readBody), then cleared.
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.cfg.BodyTimeout, IdleTimeout: s.cfg.IdleTimeout, ErrorLog: s.cfg.Log}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.cfg.Scheduler.Close()
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	st := s.cfg.Scheduler.Stats()
	s.cfg.Log.Printf("shutting down: draining %d running and %d queued requests (up to %v)", st.Running, st.Queued, drain)
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := hs.Shutdown(dctx)
	if err != nil {
		s.cfg.Log.Printf("drain timed out; ending the remaining streams")
	}
	s.cfg.Scheduler.Close() // ends what is left: each stream gets an error event and [DONE]
	// Let those handlers write their last events before the connections
	// close (each write is bounded by WriteTimeout).
	finished := make(chan struct{})
	go func() { s.active.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(s.cfg.WriteTimeout):
	}
	hs.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	s.cfg.Log.Printf("stopped")
	return nil
}

// statusClientClosed is the status /metrics counts for a request whose
// client left before any response was written (nginx's 499).
const statusClientClosed = 499

// statusWriter records the status code for metrics; Unwrap keeps
// http.ResponseController's Flush working.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// counted wraps a handler with the method check and request metrics.
func (s *Server) counted(endpoint, method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer s.active.Done()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		if allowMethod(sw, r, method) {
			h(sw, r)
		}
		switch {
		case sw.code != 0:
		case r.Context().Err() != nil:
			sw.code = statusClientClosed
		default:
			sw.code = http.StatusOK
		}
		s.cfg.Metrics.observeRequest(endpoint, sw.code, time.Since(start))
	}
}

// allowMethod reports whether r's method is method ("": any; GET allows
// HEAD too); if not, it answers 405 with an Allow header.
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if method == "" || r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("Method %s is not allowed for %s; use %s.", r.Method, r.URL.Path, method), Type: "invalid_request_error"})
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: e})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.cfg.ModelName, Object: "model", Created: s.created, OwnedBy: "bitdecode", MaxModelLen: s.cfg.Scheduler.ContextLimit()}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{s.modelObject()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != s.cfg.ModelName {
		writeError(w, modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

func modelNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id),
		Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found")}
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.cfg.Metrics.write(w, s.cfg.Scheduler.Stats(), s.cfg.BlockBytes)
}

// readBody reads a JSON body under the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	if s.draining.Load() {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Message: "The server is shutting down; retry on another instance.", Type: "server_error", Code: strp("shutting_down")}
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		// Refused before reading: a client that sent "Expect: 100-continue"
		// is not asked for the body.
		w.Header().Set("Connection", "close")
		return nil, bodyTooLarge(s.cfg.MaxBodyBytes)
	}
	// The body must arrive within BodyTimeout; the deadline is cleared
	// once it has (a server-wide ReadTimeout would cut long streams).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		// The rest of the body is not worth waiting for: answer and close
		// the connection (the deadline stays, so draining it cannot hang).
		w.Header().Set("Connection", "close")
	} else {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, bodyTooLarge(mb.Limit)
		}
		return nil, invalid("", "", "Could not read the request body: %v", err)
	}
	return body, nil
}

func bodyTooLarge(limit int64) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("The request body exceeds the limit of %d bytes.", limit),
		Type: "invalid_request_error", Code: strp("request_too_large")}
}

// job is a validated generation request.
type job struct {
	id           string         // the response's id, also its X-Request-Id header
	req          engine.Request // choice 0's; choice i adds i to the seed
	n            int            // choices
	seeded       bool           // the client gave a seed
	chat         bool
	stream       bool
	includeUsage bool
	logprobs     bool // report the sampled tokens' log probabilities
	echoed       bool // completions with echo: each choice's text starts with its prompt's
	// prompts holds a completion's prompts (OpenAI's batch of prompts: choice
	// c is choice c % n of prompt c / n); a chat has one, req.Prompt.
	prompts []jobPrompt
	param   string    // the prompt's parameter name, for context errors
	tools   *toolMode // a chat's tools: its answers' calls are read (nil: none)
	// endpoint names the request log's endpoint when it is not the job's
	// kind ("responses": a chat job from /v1/responses).
	endpoint string
}

// jobPrompt is one prompt of a job.
type jobPrompt struct {
	ids  []int
	text string // the prompt as text, for echo
}

// choices is the job's number of choices: n for each prompt.
func (j *job) choices() int { return max(1, len(j.prompts)) * j.n }

// prompt returns choice c's prompt ids.
func (j *job) prompt(c int) []int {
	if len(j.prompts) == 0 {
		return j.req.Prompt
	}
	return j.prompts[c/j.n].ids
}

// echo returns the text choice c starts with: its prompt's with echo.
func (j *job) echo(c int) string {
	if !j.echoed {
		return ""
	}
	return j.prompts[c/j.n].text
}

// tokenLimit is a request's limit on completion tokens: the value given
// (nil: none), the parameter that gave it, and the least value allowed.
type tokenLimit struct {
	value *int
	param string // "max_tokens" or "max_completion_tokens"
	min   int
}

// prepare fills the engine request from the common fields and checks the
// context length; a limit below lim.min is refused.
func (s *Server) prepare(c *commonRequest, sample engine.SampleOptions, n int, lim tokenLimit, prompt []int, param string) (*job, *apiError) {
	stops, e := parseStop(c.Stop)
	if e != nil {
		return nil, e
	}
	limit := s.cfg.Scheduler.ContextLimit()
	var most int
	if lim.value != nil {
		most = *lim.value
		if most < lim.min {
			return nil, invalid(lim.param, "integer_below_min_value", "Invalid '%s': integer below minimum value. Expected a value >= %d, but got %d instead.", lim.param, lim.min, most)
		}
	} else {
		most = max(limit-len(prompt), 0) // the rest of the context
	}
	// Compared without adding: most may be any int (2^63-1 included).
	if len(prompt) > limit || most > limit-len(prompt) || most < lim.min {
		return nil, contextError(limit, len(prompt), most, param)
	}
	j := &job{n: n, stream: c.Stream, includeUsage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage, param: param}
	j.req = engine.Request{Prompt: prompt, MaxTokens: most, Stop: stops, Sample: sample}
	if c.IgnoreEOS {
		j.req.StopIDs = []int{}
	}
	if c.KVTiers != nil && *c.KVTiers != "" {
		if _, err := s.cfg.Scheduler.ParseKVTiers(*c.KVTiers); err != nil {
			return nil, tiersError(err)
		}
		j.req.KVTiers = *c.KVTiers
	}
	if c.Seed != nil {
		j.req.Sample.Seed, j.seeded = uint64(*c.Seed), true
	} else {
		j.req.Sample.Seed = randv2.Uint64()
	}
	return j, nil
}

// tiersError maps an engine.TiersError to a 400 for kv_tiers.
func tiersError(err error) *apiError {
	var te *engine.TiersError
	if !errors.As(err, &te) {
		return invalid("kv_tiers", "invalid_value", "Invalid 'kv_tiers': %v", err)
	}
	if errors.Is(err, engine.ErrNoTiers) {
		return invalid("kv_tiers", "unsupported_parameter", "'kv_tiers' (a bitdecode extension) needs a bw KV cache: %v.", te.Err)
	}
	return invalid("kv_tiers", "invalid_value", "Invalid 'kv_tiers' %q: %v. Expected a tier policy such as \"h20:m40:l40\": hP, mP, lP, eP (percent of cached tokens read at 16, 8, 4 bits or not at all, summing to 100), wN, sN, rN, kN (the window, sinks, re-tier period and mass sampling).", te.KVTiers, te.Err)
}

// contextError is the 400 for a prompt of prompt tokens and a completion
// of max that do not fit the context limit. max 0 is a request that asked
// for no completion (none given and the prompt fills the context, or echo
// with max_tokens 0): the prompt alone is at fault.
func contextError(limit, prompt, max int, param string) *apiError {
	if max <= 0 {
		leaves := ""
		if prompt <= limit {
			leaves = ", which leaves no room for the completion"
		}
		return invalid(param, "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, your %s resulted in %d tokens%s. Please reduce the length of the %s.",
			limit, param, prompt, leaves, param)
	}
	return invalid(param, "context_length_exceeded",
		"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
		limit, uint64(prompt)+uint64(max), prompt, param, max, param) // in uint64: max may be 2^63-1
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, s.parseChat, true)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, s.parseCompletion, false)
}

// handle reads and parses a generation request and runs it. The response's
// id goes out first as the X-Request-Id header (the official clients'
// request_id, kept for errors too), so that a client's failure can be
// found in the server's log.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, parse func([]byte) (*job, *apiError), chat bool) {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	var j *job
	id, ok := s.admit(w, r, prefix, func(body []byte) (e *apiError) {
		j, e = parse(body)
		return e
	})
	if !ok {
		return
	}
	j.id = id
	s.run(w, r, j, chat)
}

// admit starts a generation request: a new id (prefix and random hex) sent
// at once as the X-Request-Id header, the body read within its limit, and
// parse run on it inside the parse budget (released even if parse
// panics, which net/http recovers: the budget must not leak). It writes
// the error and reports false where the request goes no further (a client
// that left while waiting for the budget gets nothing).
func (s *Server) admit(w http.ResponseWriter, r *http.Request, prefix string, parse func([]byte) *apiError) (string, bool) {
	id := newID(prefix)
	w.Header().Set("X-Request-Id", id)
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return id, false
	}
	release, err := s.parsing.acquire(r.Context(), int64(len(body)))
	if err != nil {
		return id, false // the client left while waiting
	}
	e = func() *apiError {
		defer release()
		return parse(body)
	}()
	if e != nil {
		writeError(w, e)
		return id, false
	}
	return id, true
}

// parseChat validates a chat completion request and builds its job.
func (s *Server) parseChat(body []byte) (*job, *apiError) {
	var req chatRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	if e := checkFields(body, &req); e != nil {
		return nil, e
	}
	return s.chatJob(req)
}

// chatJob validates a decoded chat request and builds its job (the
// Responses API builds a chatRequest too: responses.go).
func (s *Server) chatJob(req chatRequest) (*job, *apiError) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	sample, n, e := checkSampling(&req.commonRequest, s.cfg.Tokenizer.VocabSize())
	if e != nil {
		return nil, e
	}
	if e := checkChatOnly(&req); e != nil {
		return nil, e
	}
	if req.Logprobs != nil && *req.Logprobs {
		sample.Logprobs = true
		if req.TopLogprobs != nil {
			sample.TopLogprobs = *req.TopLogprobs
		}
	}
	if req.Messages == nil {
		return nil, invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	tools, mode, toolGrammar, e := s.parseTools(&req)
	if e != nil {
		return nil, e
	}
	msgs := make([]tokenizer.Message, len(req.Messages))
	for i, raw := range req.Messages {
		var m chatMessage
		if e := decodeAt(raw, &m, fmt.Sprintf("messages.[%d]", i)); e != nil {
			return nil, e
		}
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		case "function":
			return nil, invalid(fmt.Sprintf("messages.[%d].role", i), "unsupported_value", "Messages with role 'function' (deprecated) are not supported; use role 'tool'.")
		default:
			return nil, invalid(fmt.Sprintf("messages.[%d].role", i), "invalid_value", "Invalid value for 'messages.[%d].role': '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.", i, m.Role)
		}
		calls, e := chatToolCalls(i, m.ToolCalls)
		if e != nil {
			return nil, e
		}
		if len(calls) > 0 && role != "assistant" {
			return nil, invalid(fmt.Sprintf("messages.[%d].tool_calls", i), "", "Only assistant messages carry 'tool_calls'.")
		}
		if role == "tool" && m.ToolCallID == "" {
			return nil, invalid(fmt.Sprintf("messages.[%d].tool_call_id", i), "missing_required_parameter", "Missing required parameter: 'messages.[%d].tool_call_id'.", i)
		}
		msg := tokenizer.Message{Role: role, ToolCalls: calls, ToolCallID: m.ToolCallID, Name: m.Name}
		if raw := strings.TrimSpace(string(m.Content)); len(calls) > 0 && (raw == "" || raw == "null") {
			msg.NoContent = true // an assistant turn that only calls tools
		} else if msg.Content, e = messageText(i, m); e != nil {
			return nil, e
		}
		msgs[i] = msg
	}
	prompt, err := s.cfg.Tokenizer.EncodeChat(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, ContentSpecialAsText: true, Tools: tools})
	if err != nil {
		return nil, invalid("messages", "", "The conversation cannot be rendered with the model's chat template: %v", err)
	}
	lim := tokenLimit{value: req.MaxCompletionTokens, param: "max_completion_tokens", min: 1}
	if lim.value == nil {
		lim.value, lim.param = req.MaxTokens, "max_tokens"
	}
	j, e := s.prepare(&req.commonRequest, sample, n, lim, prompt, "messages")
	if e != nil {
		return nil, e
	}
	if j.req.Constraint, e = s.parseFormat(&req.commonRequest); e != nil {
		return nil, e
	}
	if toolGrammar != nil {
		if j.req.Constraint != nil {
			return nil, invalid("tool_choice", "", "A 'tool_choice' that forces a call cannot be combined with 'response_format' or 'json_schema'.")
		}
		j.req.Constraint = toolGrammar
	}
	j.tools = mode
	j.chat, j.logprobs = true, sample.Logprobs
	return j, nil
}

// parseCompletion validates a text completion request and builds its job.
func (s *Server) parseCompletion(body []byte) (*job, *apiError) {
	var req completionRequest
	if e := decodeJSON(body, &req); e != nil {
		return nil, e
	}
	if e := checkFields(body, &req); e != nil {
		return nil, e
	}
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	sample, n, e := checkSampling(&req.commonRequest, s.cfg.Tokenizer.VocabSize())
	if e != nil {
		return nil, e
	}
	switch {
	case req.Suffix != nil && *req.Suffix != "":
		return nil, invalid("suffix", "unsupported_parameter", "suffix (insertion) is not supported by this server.")
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxCompletionLogprobs):
		return nil, invalid("logprobs", "integer_out_of_range", "Invalid 'logprobs': expected a value between 0 and %d, but got %d instead.", maxCompletionLogprobs, *req.Logprobs)
	case req.BestOf != nil && *req.BestOf != n:
		return nil, invalid("best_of", "unsupported_value", "best_of = %d is not supported; only best_of = n (%d) is.", *req.BestOf, n)
	}
	if req.Logprobs != nil {
		sample.Logprobs, sample.TopLogprobs = true, *req.Logprobs
	}
	prompts, e := s.completionPrompts(req.Prompt, n)
	if e != nil {
		return nil, e
	}
	lim := tokenLimit{value: req.MaxTokens, param: "max_tokens", min: 1}
	if lim.value == nil {
		d := defaultCompletionMaxTokens
		lim.value = &d
	}
	// With echo, max_tokens 0 returns the prompt alone (with logprobs, the
	// prompt scored: what evaluation harnesses ask for).
	if req.Echo {
		lim.min = 0
	}
	j, e := s.prepare(&req.commonRequest, sample, n, lim, prompts[0].ids, "prompt")
	if e != nil {
		return nil, e
	}
	for _, p := range prompts[1:] {
		if _, e := s.prepare(&req.commonRequest, sample, n, lim, p.ids, "prompt"); e != nil {
			return nil, e
		}
	}
	if j.req.Constraint, e = s.parseFormat(&req.commonRequest); e != nil {
		return nil, e
	}
	j.prompts, j.logprobs = prompts, sample.Logprobs
	if req.Echo {
		j.echoed = true
		j.req.PromptLogprobs = sample.Logprobs || j.req.MaxTokens == 0
	}
	return j, nil
}

// maxPrompts bounds a completion's batch of prompts, maxBatchChoices its
// choices in all (prompts × n): each is a sequence of its own.
const (
	maxPrompts      = 256
	maxBatchChoices = 256
)

// completionPrompts reads prompt: a string, an array of strings, an array
// of token ids, or an array of token-id arrays (a batch of prompts, each
// with n choices). It returns each prompt's ids and text (for echo).
func (s *Server) completionPrompts(raw json.RawMessage, n int) ([]jobPrompt, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("prompt", "", "You must provide a prompt parameter.")
	}
	if at, ok := nullElement(raw); ok {
		// encoding/json would read it as "" or as token 0.
		return nil, invalid("prompt", "invalid_type", "Invalid type for 'prompt%s': expected a string or an integer, got null.", at)
	}
	// Each form decodes into its own variable: a failed Unmarshal may leave
	// a partial value behind (an id array read as strings: empty ones).
	var strs []string
	var idss [][]int
	var str string
	var ids []int
	var strs1 []string
	var idss1 [][]int
	switch {
	case json.Unmarshal(raw, &str) == nil:
		strs = []string{str}
	case json.Unmarshal(raw, &strs1) == nil:
		strs = strs1
	case json.Unmarshal(raw, &ids) == nil:
		idss = [][]int{ids}
	case json.Unmarshal(raw, &idss1) == nil:
		idss = idss1
	default:
		return nil, invalid("prompt", "invalid_type", "Invalid type for 'prompt': expected a string, an array of strings, an array of integers, or an array of integer arrays.")
	}
	count := len(strs) + len(idss)
	switch {
	case count == 0:
		return nil, invalid("prompt", "empty_array", "Invalid 'prompt': empty array. Expected at least one prompt.")
	case count > maxPrompts:
		return nil, invalid("prompt", "array_above_max_length", "Invalid 'prompt': %d prompts; at most %d are served in one request.", count, maxPrompts)
	case count*n > maxBatchChoices:
		return nil, invalid("n", "unsupported_value", "%d prompts with n = %d make %d choices; at most %d are served in one request.", count, n, count*n, maxBatchChoices)
	}
	prompts := make([]jobPrompt, 0, count)
	vocab := s.cfg.Tokenizer.VocabSize()
	for k, ids := range idss {
		if len(ids) == 0 {
			return nil, invalid("prompt", "", "Prompt %d is empty.", k)
		}
		for i, t := range ids {
			if t < 0 || t >= vocab {
				return nil, invalid("prompt", "invalid_value", "Invalid token id %d at index %d of prompt %d: the vocabulary has %d tokens.", t, i, k, vocab)
			}
		}
		prompts = append(prompts, jobPrompt{ids: ids, text: s.cfg.Tokenizer.DecodeWith(ids, tokenizer.DecodeOptions{SkipSpecial: true})})
	}
	for k, str := range strs {
		ids := s.cfg.Tokenizer.Encode(str, true)
		if len(ids) == 0 {
			return nil, invalid("prompt", "", "Prompt %d is empty.", k)
		}
		prompts = append(prompts, jobPrompt{ids: ids, text: str})
	}
	return prompts, nil
}

// nullElement finds a null inside a JSON array or an array of arrays and
// returns its index path ("[2]", "[0][5]").
func nullElement(raw json.RawMessage) (string, bool) {
	var outer []json.RawMessage
	if json.Unmarshal(raw, &outer) != nil {
		return "", false
	}
	for i, e := range outer {
		if string(e) == "null" {
			return fmt.Sprintf("[%d]", i), true
		}
		var inner []json.RawMessage
		if json.Unmarshal(e, &inner) != nil {
			continue
		}
		for j, f := range inner {
			if string(f) == "null" {
				return fmt.Sprintf("[%d][%d]", i, j), true
			}
		}
	}
	return "", false
}

func (s *Server) checkModel(name string) *apiError {
	if name == "" {
		return invalid("model", "", "You must provide a model parameter.")
	}
	if name != s.cfg.ModelName {
		return modelNotFound(name)
	}
	return nil
}

// submitError maps Submit's errors to API errors.
func submitError(err error, param string) *apiError {
	var ce *engine.ContextError
	var te *engine.TiersError
	switch {
	case errors.As(err, &ce):
		return contextError(ce.Limit, ce.PromptTokens, ce.MaxTokens, param)
	case errors.As(err, &te):
		return tiersError(err)
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Message: "The server is overloaded: too many requests are waiting. Retry after a short delay.", Type: "rate_limit_error", Code: strp("queue_full")}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Message: "The server is shutting down; retry on another instance.", Type: "server_error", Code: strp("shutting_down")}
	}
	return invalid("", "", "%v", err)
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// submit queues the job's choices, choice i of a prompt with the seed plus
// i (each is a sequence of its own; a cache that shares prefixes shares the
// prompt's packed blocks). On an error nothing stays queued.
func (s *Server) submit(ctx context.Context, j *job) ([]*engine.Stream, error) {
	streams := make([]*engine.Stream, j.choices())
	for i := range streams {
		req := j.req
		req.Prompt = j.prompt(i)
		req.Sample.Seed += uint64(i % j.n)
		st, err := s.cfg.Scheduler.Submit(ctx, req)
		if err != nil {
			return nil, err // the caller cancels ctx, which ends the others
		}
		streams[i] = st
	}
	return streams, nil
}

// choiceResult is one choice's collected output.
type choiceResult struct {
	text   strings.Builder
	tokens []engine.SampledToken
	res    engine.Result
}

// run submits the job and writes the response, streamed or whole.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job, chat bool) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the choices still running if the handler returns early
	start := time.Now()
	streams, err := s.submit(ctx, j)
	if err != nil {
		writeError(w, submitError(err, j.param))
		return
	}
	id, created := j.id, time.Now().Unix()
	if j.stream {
		results := s.stream(ctx, w, streams, j, chat, id, created)
		s.logRequest(id, j, results, start)
		return
	}
	out := make([]*choiceResult, len(streams))
	for i, st := range streams {
		c := &choiceResult{}
		c.text.WriteString(j.echo(i))
		for {
			ch, err := st.NextChunk(ctx)
			if err != nil {
				// The client left; the scheduler frees the sequences. The
				// log still gets the request's line (each choice as far as
				// it went, unfinished ones as cancelled).
				results := make([]engine.Result, len(streams))
				for i, st := range streams {
					results[i] = st.Result()
				}
				s.logRequest(id, j, results, start)
				return
			}
			c.text.WriteString(ch.Text)
			c.tokens = append(c.tokens, ch.Tokens...)
			if ch.Done {
				break
			}
		}
		c.res = st.Result()
		out[i] = c
	}
	results := make([]engine.Result, len(out))
	for i, c := range out {
		results[i] = c.res
	}
	s.logRequest(id, j, results, start)
	for _, c := range out {
		switch c.res.FinishReason {
		case engine.FinishCancelled:
			return
		case engine.FinishError:
			s.cfg.Log.Printf("request %s failed: %v", id, c.res.Err)
			writeError(w, generationError(c.res.Err))
			return
		}
	}
	u := usageOf(results, j.n)
	s.setWriteDeadline(w)
	if chat {
		resp := chatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.cfg.ModelName, Usage: *u, SystemFingerprint: s.cfg.Fingerprint}
		for i, c := range out {
			text := c.text.String()
			ch := chatChoice{Index: i, Message: assistantMessage{Role: "assistant", Content: &text}, FinishReason: c.res.FinishReason}
			if j.tools != nil {
				if content, calls, ok := j.tools.read(text); ok {
					ch.Message.Content, ch.Message.ToolCalls = nil, toOut(calls, false)
					if content != "" {
						ch.Message.Content = &content
					}
					if ch.FinishReason == engine.FinishStop && j.tools.choice != toolNamed {
						ch.FinishReason = "tool_calls"
					}
				}
			}
			if j.logprobs {
				ch.Logprobs = chatLogprobsOf(s.cfg.Tokenizer, c.tokens)
			}
			resp.Choices = append(resp.Choices, ch)
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	resp := textResponse{ID: id, Object: "text_completion", Created: created, Model: s.cfg.ModelName, SystemFingerprint: s.cfg.Fingerprint, Usage: u}
	for i, c := range out {
		fr := c.res.FinishReason
		ch := textChoice{Index: i, Text: c.text.String(), FinishReason: &fr}
		if j.logprobs {
			ch.Logprobs = textLogprobsOf(s.cfg.Tokenizer, c.tokens, len(j.echo(i)))
			if j.echoed {
				ch.Logprobs = promptLogprobsOf(s.cfg.Tokenizer, j.prompt(i), c.res.PromptLogprobs).join(ch.Logprobs)
			}
		}
		resp.Choices = append(resp.Choices, ch)
	}
	writeJSON(w, http.StatusOK, resp)
}

// generationError is the API error of a request whose generation failed:
// 503 when the server shut down, 400 when its response_format or
// tool_choice asks for text the model's vocabulary cannot spell
// (engine.ErrConstraint: the request, not the server, is at fault), 500
// otherwise.
func generationError(err error) *apiError {
	switch {
	case errors.Is(err, engine.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Message: "The server shut down before the request finished.", Type: "server_error", Code: strp("shutting_down")}
	case errors.Is(err, engine.ErrConstraint):
		return invalid("", "constraint_unsatisfiable", "The output format this request requires (response_format, json_schema or a tool_choice that forces a call) needs text that no token of this model's vocabulary continues: %v.", err)
	}
	return &apiError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("Generation failed: %v", err), Type: "server_error"}
}

// usageOf sums the choices' usage, n choices a prompt: each prompt counts
// once.
func usageOf(results []engine.Result, n int) *usage {
	u := &usage{PromptTokensDetails: &tokenDetails{}}
	for i, r := range results {
		if i%n == 0 {
			u.PromptTokens += r.PromptTokens
			u.PromptTokensDetails.CachedTokens += r.CachedTokens
		}
		u.CompletionTokens += r.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// choiceEvent is what a choice's reader hands the stream writer: a chunk,
// or its end with the result.
type choiceEvent struct {
	index int
	chunk engine.Chunk
	err   error
}

// stream writes the response as server-sent events, as OpenAI does: one
// "data: {json}\n\n" event per chunk, each choice's chunks tagged with its
// index, a last chunk with each choice's finish_reason (or an error event
// if generation failed or the server shut down), the usage chunk when
// asked, and "data: [DONE]\n\n" at the end. It returns the choices'
// results (for the request log).
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, streams []*engine.Stream, j *job, chat bool, id string, created int64) []engine.Result {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	results := make([]engine.Result, len(streams))
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		return write(append(append([]byte("data: "), b...), '\n', '\n'))
	}
	done := func() { write([]byte("data: [DONE]\n\n")) }
	chatChunkOf := func(i int, delta chunkDelta, lp *chatLogprobs, finish *string) any {
		c := chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.cfg.ModelName, SystemFingerprint: s.cfg.Fingerprint,
			Choices: []chunkChoice{{Index: i, Delta: delta, Logprobs: lp, FinishReason: finish}}}
		if j.includeUsage {
			return withNullUsage{c}
		}
		return c
	}
	textChunkOf := func(i int, text string, lp *textLogprobs, finish *string) any {
		c := textResponse{ID: id, Object: "text_completion", Created: created, Model: s.cfg.ModelName, SystemFingerprint: s.cfg.Fingerprint,
			Choices: []textChoice{{Index: i, Text: text, Logprobs: lp, FinishReason: finish}}}
		if j.includeUsage {
			return withNullTextUsage{c}
		}
		return c
	}
	offsets := make([]int, len(streams)) // text offsets, for completion logprobs
	echoSent := make([]bool, len(streams))
	gates := make([]*toolGate, len(streams)) // a chat's tool calls held back
	if j.tools != nil {
		for i := range gates {
			gates[i] = &toolGate{m: j.tools}
		}
	}
	// With tools, the role chunk has no content: an answer that is only
	// calls then streams as its whole message reads, content null (OpenAI
	// streams calls so); contentSent says whether a choice's content began.
	contentSent := make([]bool, len(streams))
	for i := range streams {
		empty := ""
		role := chunkDelta{Role: "assistant", Content: &empty}
		if gates[i] != nil {
			role.Content = nil
		}
		switch {
		case chat && !send(chatChunkOf(i, role, nil, nil)):
			return results
		case !chat && j.echo(i) != "" && !j.logprobs && !send(textChunkOf(i, j.echo(i), nil, nil)):
			return results
		}
		offsets[i] = len(j.echo(i))
	}
	// One reader per choice; the writer sends their chunks as they come.
	events := make(chan choiceEvent)
	for i, st := range streams {
		go func() {
			for {
				ch, err := st.NextChunk(ctx)
				select {
				case events <- choiceEvent{index: i, chunk: ch, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil || ch.Done {
					return
				}
			}
		}()
	}
	var failed error
	for left := len(streams); left > 0; {
		var ev choiceEvent
		select {
		case ev = <-events:
		case <-ctx.Done():
			return results // the client left; the scheduler frees the sequences
		}
		if ev.err != nil {
			return results
		}
		i, ch := ev.index, ev.chunk
		if !chat && j.echoed && j.logprobs && !echoSent[i] {
			// The echo waits for the prompt's scores (its first chunk).
			echoSent[i] = true
			if !send(textChunkOf(i, j.echo(i), promptLogprobsOf(s.cfg.Tokenizer, j.prompt(i), ch.Prompt), nil)) {
				return results
			}
		}
		if ch.Text != "" || len(ch.Tokens) > 0 {
			var ok bool
			if chat {
				var lp *chatLogprobs
				if j.logprobs {
					lp = chatLogprobsOf(s.cfg.Tokenizer, ch.Tokens)
				}
				p := ch.Text
				delta := chunkDelta{Content: &p}
				if gates[i] != nil {
					if p = gates[i].add(ch.Text); p == "" {
						delta.Content = nil
					}
				}
				ok = (delta.Content == nil && lp == nil) || send(chatChunkOf(i, delta, lp, nil))
				contentSent[i] = contentSent[i] || delta.Content != nil
			} else {
				var lp *textLogprobs
				if j.logprobs {
					lp = textLogprobsOf(s.cfg.Tokenizer, ch.Tokens, offsets[i])
				}
				ok = send(textChunkOf(i, ch.Text, lp, nil))
			}
			offsets[i] += len(ch.Text)
			if !ok {
				return results
			}
		}
		if !ch.Done {
			continue
		}
		left--
		res := streams[i].Result()
		results[i] = res
		switch res.FinishReason {
		case engine.FinishCancelled:
			return results
		case engine.FinishError:
			if failed == nil {
				failed = res.Err
			}
			continue
		}
		fr := res.FinishReason
		if chat && gates[i] != nil {
			content, calls := gates[i].finish()
			// An answer without calls has content, "" at least, as whole.
			if (content != "" || (len(calls) == 0 && !contentSent[i])) && !send(chatChunkOf(i, chunkDelta{Content: &content}, nil, nil)) {
				return results
			}
			if len(calls) > 0 {
				if !send(chatChunkOf(i, chunkDelta{ToolCalls: toOut(calls, true)}, nil, nil)) {
					return results
				}
				if fr == engine.FinishStop && j.tools.choice != toolNamed {
					fr = "tool_calls"
				}
			}
		}
		if chat {
			send(chatChunkOf(i, chunkDelta{}, nil, &fr))
		} else {
			send(textChunkOf(i, "", nil, &fr))
		}
	}
	if failed != nil {
		// Generation failed, or the server shut down before the end: an
		// error event, then [DONE], so a client sees why the stream ended.
		s.cfg.Log.Printf("stream %s failed: %v", id, failed)
		send(errorBody{Error: generationError(failed)})
		done()
		return results
	}
	if j.includeUsage {
		u := usageOf(results, j.n)
		if chat {
			send(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.cfg.ModelName, SystemFingerprint: s.cfg.Fingerprint,
				Choices: []chunkChoice{}, Usage: u})
		} else {
			send(textResponse{ID: id, Object: "text_completion", Created: created, Model: s.cfg.ModelName, SystemFingerprint: s.cfg.Fingerprint,
				Choices: []textChoice{}, Usage: u})
		}
	}
	done()
	return results
}

// withNullUsage marshals a chat chunk with "usage": null, as OpenAI sends
// on every chunk but the last when include_usage is set.
type withNullUsage struct{ chatChunk }

func (c withNullUsage) MarshalJSON() ([]byte, error) {
	type plain chatChunk
	return marshalWithNullUsage(plain(c.chatChunk))
}

type withNullTextUsage struct{ textResponse }

func (c withNullTextUsage) MarshalJSON() ([]byte, error) {
	type plain textResponse
	return marshalWithNullUsage(plain(c.textResponse))
}

func marshalWithNullUsage(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// v has no usage field set (omitempty): add "usage":null before the
	// closing brace.
	return append(b[:len(b)-1], []byte(`,"usage":null}`)...), nil
}

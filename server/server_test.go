package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/engine"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// testServer is the tiny random model behind a real HTTP server on
// loopback.
type testServer struct {
	url   string
	cache *kvcache.Paged
	sched *engine.Scheduler
	srv   *Server
	hs    *httptest.Server
}

func newTestServer(t testing.TB, blocks, maxSeqs int) *testServer {
	t.Helper()
	var pc *kvcache.Paged
	ts := startTestServer(t, func(be backend.Backend, cfg *model.Config) (kvcache.Cache, int64, error) {
		var err error
		pc, err = kvcache.NewPaged(be, cfg, kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: maxSeqs, Blocks: blocks})
		if err != nil {
			return nil, 0, err
		}
		return pc, pc.BlockBytes(), nil
	})
	ts.cache = pc
	return ts
}

// startTestServer serves the tiny random model over the cache newCache
// makes (it also returns the block size for /metrics).
func startTestServer(t testing.TB, newCache func(backend.Backend, *model.Config) (kvcache.Cache, int64, error)) *testServer {
	t.Helper()
	return startTestServerWith(t, newCache, nil)
}

// startTestServerWith is startTestServer with the server's Config adjusted
// by configure (nil: none).
func startTestServerWith(t testing.TB, newCache func(backend.Backend, *model.Config) (kvcache.Cache, int64, error), configure func(*Config)) *testServer {
	t.Helper()
	dir := t.TempDir()
	if err := tinymodel.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache, blockBytes, err := newCache(be, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	met := NewMetrics()
	s, err := engine.NewScheduler(m, tok, cache, engine.SchedulerOptions{PrefillChunk: 64, OnFirstToken: met.ObserveTTFT, OnToken: met.ObserveTokenLatency})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scheduler: s, Tokenizer: tok, ModelName: "tiny", Metrics: met, BlockBytes: blockBytes, MaxBodyBytes: 64 << 10}
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
		m.Close()
	})
	return &testServer{url: hs.URL, sched: s, srv: srv, hs: hs}
}

// post sends a JSON body and returns the status and the body.
func post(t testing.TB, ctx context.Context, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sseEvents reads an event stream and returns the data payloads, checking
// the framing: every event is "data: ...\n\n".
func sseEvents(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("SSE: event not followed by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE: line %q does not start with \"data: \"", line)
		}
		out = append(out, data)
		expectBlank = true
	}
	return out
}

// streamText posts a streaming request and returns the concatenated
// content and every chunk decoded.
func streamText(t testing.TB, url, body string, chat bool) (string, []map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	events := sseEvents(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}
	var text strings.Builder
	var chunks []map[string]any
	for _, e := range events[:len(events)-1] {
		var c map[string]any
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		chunks = append(chunks, c)
		choices, _ := c["choices"].([]any)
		for _, ch := range choices {
			ch := ch.(map[string]any)
			if chat {
				if d, ok := ch["delta"].(map[string]any); ok {
					if s, ok := d["content"].(string); ok {
						text.WriteString(s)
					}
				}
			} else if s, ok := ch["text"].(string); ok {
				text.WriteString(s)
			}
		}
	}
	return text.String(), chunks
}

// content returns the generated text of a non-streaming response.
func content(t testing.TB, b []byte, chat bool) string {
	t.Helper()
	var r struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("response %s: %v", b, err)
	}
	if chat {
		return r.Choices[0].Message.Content
	}
	return r.Choices[0].Text
}

// need fails unless obj has key with a value of the JSON kind (string,
// number, bool, object, array, null).
func need(t testing.TB, where string, obj map[string]any, key, kind string) any {
	t.Helper()
	v, ok := obj[key]
	if !ok {
		t.Fatalf("%s: missing %q in %v", where, key, obj)
	}
	got := "null"
	switch v.(type) {
	case string:
		got = "string"
	case float64:
		got = "number"
	case bool:
		got = "bool"
	case map[string]any:
		got = "object"
	case []any:
		got = "array"
	}
	if got != kind {
		t.Fatalf("%s: %q is a %s (%v), want a %s", where, key, got, v, kind)
	}
	return v
}

func checkUsage(t testing.TB, where string, u map[string]any) {
	t.Helper()
	p := need(t, where, u, "prompt_tokens", "number").(float64)
	c := need(t, where, u, "completion_tokens", "number").(float64)
	tot := need(t, where, u, "total_tokens", "number").(float64)
	if p <= 0 || c < 0 || tot != p+c {
		t.Fatalf("%s: usage %v", where, u)
	}
}

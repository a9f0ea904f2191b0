package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// newGuardedServer is the tiny test server with cfg adjusted by configure.
func newGuardedServer(t *testing.T, configure func(*Config)) *testServer {
	t.Helper()
	return startTestServerWith(t, func(be backend.Backend, cfg *model.Config) (kvcache.Cache, int64, error) {
		pc, err := kvcache.NewPaged(be, cfg, kv.MustParseSpec("int4:kc32:v32:res32"), kvcache.Options{MaxSeqs: 4, Blocks: 40})
		if err != nil {
			return nil, 0, err
		}
		return pc, pc.BlockBytes(), nil
	}, configure)
}

// do sends a request with the given headers and returns the response.
func do(t *testing.T, method, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const guardBody = `{"model":"tiny","prompt":"a","max_tokens":2}`

var jsonCT = map[string]string{"Content-Type": "application/json"}

// TestAPIKey: with an API key the API needs "Bearer KEY"; /health and
// /metrics stay open unless AuthAll.
func TestAPIKey(t *testing.T) {
	for _, all := range []bool{false, true} {
		ts := newGuardedServer(t, func(c *Config) { c.APIKey, c.AuthAll = "s3cret", all })
		for _, tc := range []struct {
			auth string
			code int
		}{{"", 401}, {"Bearer wrong", 401}, {"Basic s3cret", 401}, {"Bearer s3cret", 200}} {
			h := map[string]string{"Content-Type": "application/json"}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			resp, b := do(t, http.MethodPost, ts.url+"/v1/completions", guardBody, h)
			if resp.StatusCode != tc.code {
				t.Errorf("auth %q: %d %s, want %d", tc.auth, resp.StatusCode, b, tc.code)
			}
			if tc.code == 401 && (resp.Header.Get("WWW-Authenticate") == "" || !strings.Contains(b, "invalid_api_key")) {
				t.Errorf("auth %q: 401 without the challenge or error code: %s", tc.auth, b)
			}
		}
		for _, path := range []string{"/health", "/metrics", "/v1/models"} {
			resp, _ := do(t, http.MethodGet, ts.url+path, "", nil)
			want := 200
			if all || path == "/v1/models" {
				want = 401
			}
			if resp.StatusCode != want {
				t.Errorf("AuthAll %v: GET %s without a key: %d, want %d", all, path, resp.StatusCode, want)
			}
		}
	}
}

// TestCrossSite: a POST that is not JSON (a text/plain fetch or an HTML
// form from another site: simple requests need no preflight) is refused
// with 415, as is one with a foreign Origin (403); listed origins get CORS
// headers and a preflight answer; Host names outside the allow-list get 421.
// Before these checks a text/plain cross-site POST ran a generation.
func TestCrossSite(t *testing.T) {
	ts := newGuardedServer(t, func(c *Config) {
		c.CORSOrigins = []string{"https://app.example"}
		c.AllowedHosts = append([]string{"api.example"}, LoopbackHosts...)
	})
	url := ts.url + "/v1/completions"
	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		code   int
	}{
		{"text/plain", http.MethodPost, map[string]string{"Content-Type": "text/plain"}, 415},
		{"form", http.MethodPost, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no content type", http.MethodPost, map[string]string{}, 415},
		{"json", http.MethodPost, jsonCT, 200},
		{"json charset", http.MethodPost, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
		{"foreign origin", http.MethodPost, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403},
		{"listed origin", http.MethodPost, map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"}, 200},
		{"preflight", http.MethodOptions, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}, 204},
		{"foreign preflight", http.MethodOptions, map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 403},
		{"rebound host", http.MethodPost, map[string]string{"Content-Type": "application/json", "Host": "attacker.example"}, 421},
		{"allowed host", http.MethodPost, map[string]string{"Content-Type": "application/json", "Host": "api.example:8080"}, 200},
	} {
		resp, b := do(t, tc.method, url, guardBody, tc.header)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, b, tc.code)
		}
		if o := tc.header["Origin"]; o == "https://app.example" && resp.Header.Get("Access-Control-Allow-Origin") != o {
			t.Errorf("%s: Access-Control-Allow-Origin %q", tc.name, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}

// TestCORSClientHeaders: a listed origin's preflight allows the headers
// the browser asks for (the official JS client, with dangerouslyAllowBrowser,
// sends X-Stainless-* headers and OpenAI-Organization; before, only
// Authorization and Content-Type were allowed and the browser refused to
// send the request), and its responses expose X-Request-Id and Retry-After,
// which the client reads (request_id, the wait before a retry).
func TestCORSClientHeaders(t *testing.T) {
	ts := newGuardedServer(t, func(c *Config) { c.CORSOrigins = []string{"https://app.example"} })
	url := ts.url + "/v1/completions"
	asked := "authorization,content-type,openai-organization,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
	resp, b := do(t, http.MethodOptions, url, "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": asked})
	allowed := map[string]bool{}
	for _, h := range strings.Split(resp.Header.Get("Access-Control-Allow-Headers"), ",") {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	for _, h := range strings.Split(asked, ",") {
		if resp.StatusCode != 204 || !allowed[h] {
			t.Errorf("preflight: %d %s, Access-Control-Allow-Headers %q lacks %s", resp.StatusCode, b, resp.Header.Get("Access-Control-Allow-Headers"), h)
		}
	}
	// A list that is not one of header names is not echoed.
	resp, _ = do(t, http.MethodOptions, url, "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "x-a, bad header"})
	if got := resp.Header.Get("Access-Control-Allow-Headers"); got != "Authorization, Content-Type" {
		t.Errorf("malformed request headers: Access-Control-Allow-Headers %q", got)
	}
	resp, b = do(t, http.MethodPost, url, guardBody, map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"})
	exposed := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	if resp.StatusCode != 200 || !strings.Contains(exposed, "x-request-id") || !strings.Contains(exposed, "retry-after") {
		t.Errorf("listed origin: %d %s, Access-Control-Expose-Headers %q", resp.StatusCode, b, exposed)
	}
}

// TestTimeouts serves on a real listener with short timeouts: a request
// whose body never arrives and an idle keep-alive connection are both
// closed by the server (before, both held the connection forever), while a
// stream that outlasts the body timeout completes.
func TestTimeouts(t *testing.T) {
	ts := newGuardedServer(t, func(c *Config) {
		c.BodyTimeout, c.IdleTimeout, c.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 2*time.Second
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve(ctx, ln, time.Second) }()
	defer func() { cancel(); <-served }()
	addr := ln.Addr().String()

	closedWithin := func(name string, conn net.Conn, d time.Duration) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(d))
		start := time.Now()
		_, err := io.Copy(io.Discard, conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the server kept the connection open for %v", name, d)
			return
		}
		t.Logf("%s: closed by the server after %v", name, time.Since(start).Round(10*time.Millisecond))
	}
	// A body announced but never sent.
	c1, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c1, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\"")
	closedWithin("body never sent", c1, 5*time.Second)
	c1.Close()
	// Headers sent a byte at a time, never finished (slowloris).
	c0, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for _, b := range []byte("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
			if _, err := c0.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	closedWithin("headers trickled", c0, 5*time.Second)
	c0.Close()
	// An idle keep-alive connection after one request.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c2, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(c2)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	closedWithin("idle keep-alive", c2, 5*time.Second)
	c2.Close()
	// A stream longer than the body timeout runs to the end.
	body := `{"model":"tiny","prompt":"slow","max_tokens":1000,"temperature":0,"stream":true,"ignore_eos":true}`
	r, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	events := sseEvents(t, r.Body)
	r.Body.Close()
	took := time.Since(start)
	if len(events) < 2 || events[len(events)-1] != "[DONE]" || !strings.Contains(events[len(events)-2], `"finish_reason":"length"`) {
		t.Errorf("a %v stream ends with %q", took, events[max(0, len(events)-2):])
	}
	t.Logf("a stream of %v (body timeout 300ms) ran to the end", took.Round(10*time.Millisecond))
}

// TestRequestLog checks the one line per request, text and JSON.
func TestRequestLog(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var buf bytes.Buffer
		ts := newGuardedServer(t, func(c *Config) { c.RequestLog, c.LogJSON = &buf, asJSON })
		post(t, context.Background(), ts.url+"/v1/completions", `{"model":"tiny","prompt":"ab","max_tokens":5,"temperature":0,"ignore_eos":true,"n":2}`)
		streamText(t, ts.url+"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":3,"temperature":0,"stream":true,"ignore_eos":true}`, true)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("JSON %v: %d lines: %q", asJSON, len(lines), buf.String())
		}
		if !asJSON {
			if !strings.Contains(lines[0], "completions choices=2") || !strings.Contains(lines[0], "completion=10") || !strings.Contains(lines[1], "chat") || !strings.Contains(lines[1], "finish=length") {
				t.Errorf("text log: %q", lines)
			}
			continue
		}
		var l requestLine
		if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
			t.Fatal(err)
		}
		if l.Endpoint != "completions" || l.Choices != 2 || l.CompletionTokens != 10 || l.PromptTokens == 0 || l.Finish != "length,length" || l.ID == "" {
			t.Errorf("JSON log line %+v", l)
		}
	}
}

// TestBodyTooLargeUnread: a request whose Content-Length is over the limit
// gets its 413 at once, before the body is read: a client that sent
// "Expect: 100-continue" is not asked to upload it (before, the server
// answered "100 Continue" and waited for the body).
func TestBodyTooLargeUnread(t *testing.T) {
	ts := newGuardedServer(t, nil) // 64 KiB limit
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", 1<<30)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if typ, _, code, _ := apiErr(t, b); resp.StatusCode != http.StatusRequestEntityTooLarge || typ != "invalid_request_error" || code != "request_too_large" || !resp.Close {
		t.Errorf("status %d (close %v), %s; want 413 request_too_large and the connection closed", resp.StatusCode, resp.Close, b)
	}
	// The server still answers.
	if resp, body := do(t, http.MethodPost, ts.url+"/v1/completions", guardBody, jsonCT); resp.StatusCode != 200 {
		t.Errorf("after it: %d %s", resp.StatusCode, body)
	}
}

// TestRequestLogClientGone checks that a request whose client has left
// still gets its one log line, its unfinished choices as cancelled, streamed
// or not: the handler runs on a request whose context is already cancelled
// (the scheduler takes the sequences; the first read sees the client gone).
func TestRequestLogClientGone(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	ts := newGuardedServer(t, func(c *Config) { c.RequestLog = &lockedWriter{mu: &mu, w: &buf} })
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"tiny","prompt":"ab","max_tokens":1000,"temperature":0,"ignore_eos":true,"n":2,"stream":%v}`, stream)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		ts.srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}
	mu.Lock()
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d log lines for two requests whose clients left: %q", len(got), got)
	}
	for i, l := range got {
		if !strings.Contains(l, "choices=2") || !strings.Contains(l, "finish=cancelled,cancelled") || !strings.Contains(l, []string{"stream=false", "stream=true"}[i]) {
			t.Errorf("line %d: %q, want stream=%v, two choices, finish=cancelled,cancelled", i, l, i == 1)
		}
	}
}

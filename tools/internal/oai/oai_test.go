package oai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStream(t *testing.T) {
	const two = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n: comment\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{\"completion_tokens\":2}}\n\n"
	for _, tc := range []struct {
		name, body string
		stopAt     int // events before fn stops; 0: never
		want       string
		usage      int
		err        error // errors.Is target; nil: no error
		errText    string
	}{
		{name: "done", body: two + "data: [DONE]\n\n", want: "ab", usage: 2},
		{name: "no done", body: two, want: "ab", usage: 2, err: ErrNoDone},
		{name: "stop", body: two, stopAt: 1, want: "a"},
		{name: "error event", body: "data: {\"error\":{\"message\":\"boom\"}}\n\n", errText: "server error in stream: boom"},
		{name: "bad event", body: "data: {nope\n\n", errText: "bad stream event"},
	} {
		var got strings.Builder
		usage, n := 0, 0
		err := Stream(strings.NewReader(tc.body), func(ev *Event) bool {
			for _, ch := range ev.Choices {
				got.WriteString(ch.Content())
			}
			if ev.Usage != nil {
				usage = ev.Usage.CompletionTokens
			}
			n++
			return n == tc.stopAt
		})
		switch {
		case tc.errText != "":
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.errText)
			}
			continue
		case tc.err != nil && !errors.Is(err, tc.err), tc.err == nil && err != nil:
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
		}
		if got.String() != tc.want || usage != tc.usage {
			t.Errorf("%s: text %q usage %d, want %q %d", tc.name, got.String(), usage, tc.want, tc.usage)
		}
	}
}

func TestClient(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"data":[{"id":"m1"},{"id":"m2"}]}`)
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not json", http.StatusUnsupportedMediaType)
			return
		}
		io.Copy(w, r.Body)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ctx := context.Background()
	c := New(ts.URL+"/", "k", ts.Client())
	if id, err := c.ModelID(ctx); err != nil || id != "m1" {
		t.Errorf("ModelID = %q, %v; want m1", id, err)
	}
	resp, err := c.Do(ctx, http.MethodPost, "/echo", []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"x":1}` {
		t.Errorf("POST /echo: %d %q, want 200 and the body back", resp.StatusCode, b)
	}
	if _, err := New(ts.URL, "", ts.Client()).ModelID(ctx); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("ModelID without the key: err %v, want one naming HTTP 401", err)
	}
}

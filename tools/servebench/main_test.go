package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {50, 3}, {100, 5}, {90, 4.6}, {25, 2}} {
		if got := percentile(xs, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("percentile(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
	if xs[0] != 5 {
		t.Errorf("percentile sorted its input in place: %v", xs)
	}
}

// fakeServer streams max_tokens one-character chunks per completion with
// a fixed delay before the first, checks each request's body and counts
// the requests in flight at once.
func fakeServer(t *testing.T, firstDelay time.Duration, usage bool) (*httptest.Server, *atomic.Int32) {
	var inFlight, peak atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m1","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		var req struct {
			Model     string `json:"model"`
			Prompt    []int  `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
			IgnoreEOS bool   `json:"ignore_eos"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m1" || len(req.Prompt) != 7 || !req.Stream || !req.IgnoreEOS {
			t.Errorf("request %+v (decode error %v): want model m1, 7 prompt ids, stream, ignore_eos", req, err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		for _, id := range req.Prompt {
			if id < 10 || id >= 20 {
				t.Errorf("prompt id %d outside [10, 20)", id)
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		time.Sleep(firstDelay)
		for range req.MaxTokens {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n")
			w.(http.Flusher).Flush()
		}
		if usage {
			fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\n", req.MaxTokens)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, &peak
}

func TestRunAgainstFakeServer(t *testing.T) {
	for _, usage := range []bool{true, false} {
		ts, peak := fakeServer(t, 20*time.Millisecond, usage)
		c := config{url: ts.URL, requests: 12, conc: 3, promptTokens: 7, maxTokens: 5, idMin: 10, idMax: 20, sharedPrefix: 2, warmup: 0, seed: 1}
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
		s, err := run(context.Background(), c, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if s.Requests != 12 || s.OutputTokens != 60 || s.ShortCompletions != 0 {
			t.Errorf("usage %v: summary %+v: want 12 requests, 60 tokens, none short", usage, s)
		}
		if p := peak.Load(); p < 1 || p > 3 {
			t.Errorf("usage %v: %d requests in flight at once, want at most --concurrency 3", usage, p)
		}
		if s.TTFTP50MS < 20 || s.TTFTMeanMS < 20 {
			t.Errorf("usage %v: TTFT p50 %.1f ms, mean %.1f: want >= the server's 20 ms first delay", usage, s.TTFTP50MS, s.TTFTMeanMS)
		}
		// 12 requests, 3 at once, each >= 20 ms: at least 4 rounds.
		if s.WallS < 0.08 || math.Abs(s.OutputTokPerS-60/s.WallS) > 1e-9 {
			t.Errorf("usage %v: wall %.3f s, %.1f tokens/s: want >= 0.08 s and 60/wall", usage, s.WallS, s.OutputTokPerS)
		}
	}
}

func TestShortAndFailedStreams(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "bad") {
			http.Error(w, `{"error":{"message":"no"}}`, http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: [DONE]\n\n")
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	c := config{url: ts.URL, model: "m", requests: 2, conc: 2, promptTokens: 3, maxTokens: 4, idMin: 0, idMax: 5, seed: 1}
	s, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.ShortCompletions != 2 || s.OutputTokens != 2 {
		t.Errorf("summary %+v: want 2 short completions of 1 token", s)
	}
	c.apiKey = "bad"
	if _, err := run(context.Background(), c, io.Discard); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("run with a refused key: err %v, want HTTP 401", err)
	}
	for _, bad := range []config{{requests: 0, conc: 1, promptTokens: 1, maxTokens: 1, idMax: 2}, {requests: 1, conc: 1, promptTokens: 2, maxTokens: 1, idMin: 5, idMax: 5}, {requests: 1, conc: 1, promptTokens: 2, maxTokens: 1, idMax: 5, sharedPrefix: 3}} {
		if bad.check() == nil {
			t.Errorf("check(%+v) = nil, want an error", bad)
		}
	}
}

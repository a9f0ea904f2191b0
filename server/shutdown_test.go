package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/engine"
)

// TestGracefulShutdown starts Serve on loopback, opens a long stream, then
// ends Serve's context (as SIGTERM does): the running stream finishes
// normally with [DONE], Serve returns nil, the scheduler is closed, and no
// block is left in use. With a drain too short for a second stream, that
// stream ends early with an error event and [DONE] (before the fix the
// connection closed with no final event) and its blocks are freed too.
func TestGracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drain    time.Duration
		maxTok   int
		complete bool
	}{
		{"drained", 20 * time.Second, 150, true},
		{"cut", 50 * time.Millisecond, 1200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, 60, 4)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- ts.srv.Serve(ctx, ln, tc.drain) }()
			url := "http://" + ln.Addr().String()
			body := `{"model":"tiny","prompt":"drain me","max_tokens":` + strconv.Itoa(tc.maxTok) + `,"temperature":0,"stream":true,"ignore_eos":true}`
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
				t.Fatalf("first event: %q %v", line, err)
			}
			cancel() // SIGTERM
			var events []string
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break
				}
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
					events = append(events, d)
				}
			}
			if len(events) == 0 {
				t.Fatal("no events after the shutdown began")
			}
			last := events[len(events)-1]
			if tc.complete && (last != "[DONE]" || !strings.Contains(events[len(events)-2], `"finish_reason":"length"`)) {
				t.Errorf("drained stream ends with %q", events[len(events)-2:])
			}
			if !tc.complete {
				// Cut at the end of the drain: an error event saying so,
				// then [DONE], never a normal finish.
				if len(events) < 2 || last != "[DONE]" || !strings.Contains(events[len(events)-2], `"shutting_down"`) {
					t.Errorf("a stream cut by the shutdown ends with %q; want an error event (shutting_down) and [DONE]", events[max(0, len(events)-2):])
				}
				for _, e := range events {
					if strings.Contains(e, `"finish_reason":"length"`) {
						t.Errorf("a stream of %d tokens finished within a %v drain", tc.maxTok, tc.drain)
					}
				}
			}
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return")
			}
			if _, err := ts.sched.Submit(context.Background(), engine.Request{Prompt: []int{1}, MaxTokens: 1}); !errors.Is(err, engine.ErrClosed) {
				t.Errorf("scheduler after Serve: %v", err)
			}
			if ts.cache.FreeBlocks() != ts.cache.TotalBlocks() || ts.cache.Seqs() != 0 {
				t.Errorf("leak after shutdown: %d of %d blocks free", ts.cache.FreeBlocks(), ts.cache.TotalBlocks())
			}
		})
	}
}

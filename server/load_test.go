package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadReq is one well-formed request of the load test.
type loadReq struct {
	path, body   string
	chat, stream bool
}

func makeLoadRequests(n int) []loadReq {
	r := rand.New(rand.NewPCG(21, 22))
	const alphabet = "abcdefghijklmnopqrstuvwxyz (){}.;:=+-*/\n\t0123456789"
	word := func(k int) string {
		var b strings.Builder
		for range k {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	common := word(110) // shared by every third prompt: prefix sharing under load
	reqs := make([]loadReq, n)
	for i := range reqs {
		text := fmt.Sprintf("request %d: %s", i, word(5+r.IntN(140)))
		if i%3 == 0 {
			text = common + text
		}
		js, _ := json.Marshal(text)
		max := 8 + r.IntN(40)
		stop := ""
		if i%5 == 0 {
			stop = `,"stop":["q","zz"]`
		}
		lr := loadReq{chat: i%2 == 0, stream: i%4 < 2}
		stream := ""
		if lr.stream {
			stream = `,"stream":true`
			if i%8 == 0 {
				stream += `,"stream_options":{"include_usage":true}`
			}
		}
		if lr.chat {
			lr.path = "/v1/chat/completions"
			lr.body = fmt.Sprintf(`{"model":"tiny","messages":[{"role":"user","content":%s}],"max_tokens":%d,"temperature":0%s%s}`, js, max, stop, stream)
		} else {
			lr.path = "/v1/completions"
			lr.body = fmt.Sprintf(`{"model":"tiny","prompt":%s,"max_tokens":%d,"temperature":0%s%s}`, js, max, stop, stream)
		}
		reqs[i] = lr
	}
	return reqs
}

func (lr loadReq) run(t testing.TB, url string) string {
	if lr.stream {
		text, _ := streamText(t, url+lr.path, lr.body, lr.chat)
		return text
	}
	code, b := post(t, context.Background(), url+lr.path, lr.body)
	if code != 200 {
		t.Errorf("status %d: %s", code, b)
		return ""
	}
	return content(t, b, lr.chat)
}

var malformed = []struct {
	path, body string
	status     int
}{
	{"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"x"}`, 400},
	{"/v1/chat/completions", `{"model":"tiny","n":30,"messages":[{"role":"user","content":"x"}]}`, 400},
	{"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404},
	{"/v1/completions", `{"model":"tiny","prompt":"x","max_tokens":100000}`, 400},
	{"/v1/completions", `{"model":"tiny","prompt":[-5]}`, 400},
	{"/v1/chat/completions", `[1,2,3]`, 400},
	{"/v1/completions", "\x00\x01garbage", 400},
}

// TestLoadLoopback is the in-process load test: 72 greedy requests (chat
// and completions, streamed and whole, a third sharing a 110-character
// prefix) run at once over loopback against a server with 16 sequence
// slots and a KV pool small enough to queue and preempt, together with 24
// streams that the client abandons mid-stream (some while still queued):
// 22% of the 108 requests, and 12 malformed requests (11%). Every completed text must equal the same
// request's text on an idle server (no lost or cross-wired tokens), every
// malformed request gets its 4xx, and at the end no KV block is in use,
// the allocator's invariants hold, and the server still answers.
func TestLoadLoopback(t *testing.T) {
	n := 72
	reqs := makeLoadRequests(n)

	// Solo texts, one request at a time on an idle server.
	solo := newTestServer(t, 24, 16)
	want := make([]string, n)
	for i, lr := range reqs {
		want[i] = lr.run(t, solo.url)
	}

	ts := newTestServer(t, 24, 16)
	var wg sync.WaitGroup
	got := make([]string, n)
	for i, lr := range reqs {
		wg.Go(func() { got[i] = lr.run(t, ts.url) })
	}
	var abandoned atomic.Int64
	for i := range 24 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"model":"tiny","messages":[{"role":"user","content":"abandon %d"}],"max_tokens":700,"temperature":0,"stream":true}`, i)
			if i%4 == 3 { // whole response, given up after a while
				ctx, cancel2 := context.WithTimeout(ctx, time.Duration(20+i)*time.Millisecond)
				defer cancel2()
				body = strings.Replace(body, `,"stream":true`, "", 1)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				abandoned.Add(1)
				return
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("abandoned stream %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			// Read the role chunk, and for half of them a content chunk too,
			// then hang up.
			br := bufio.NewReader(resp.Body)
			events := 1 + i%2
			for events > 0 {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Errorf("abandoned stream %d: %v (status %s, last line %q)", i, err, resp.Status, line)
					return
				}
				if strings.HasPrefix(line, "data: ") {
					events--
				}
			}
			cancel()
			abandoned.Add(1)
		})
	}
	var badOK atomic.Int64
	for i := range 12 {
		wg.Go(func() {
			m := malformed[i%len(malformed)]
			code, b := post(t, context.Background(), ts.url+m.path, m.body)
			if code != m.status || !strings.Contains(string(b), `"error"`) {
				t.Errorf("malformed %q: %d %s, want %d", m.body, code, b, m.status)
				return
			}
			badOK.Add(1)
		})
	}
	wg.Wait()

	for i := range reqs {
		if got[i] != want[i] {
			t.Errorf("request %d (%s, stream %v): under load %q, alone %q", i, reqs[i].path, reqs[i].stream, got[i], want[i])
		}
	}
	// Every sequence ends and frees its blocks (the abandoned ones at the
	// scheduler's next step after the disconnect).
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := ts.sched.Stats()
		if st.Running == 0 && st.Queued == 0 && ts.cache.Seqs() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still busy after the load: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := ts.sched.Stats()
	if ts.cache.FreeBlocks() != ts.cache.TotalBlocks() || st.FreeBlocks != st.TotalBlocks {
		t.Errorf("leak: %d of %d blocks free", ts.cache.FreeBlocks(), ts.cache.TotalBlocks())
	}
	if err := ts.cache.Allocator().Check(); err != nil {
		t.Error(err)
	}
	t.Logf("load: %d steps, %d preemptions, %d shared prompt tokens, %d completed, %d cancelled, %d abandoned by clients, %d malformed refused",
		st.Steps, st.Preemptions, st.CachedTokens, st.Finished, st.Cancelled, abandoned.Load(), badOK.Load())
	if st.Cancelled == 0 {
		t.Error("no request was cancelled by its client's disconnect")
	}
	if st.CachedTokens == 0 {
		t.Error("no prompt shared a prefix under load")
	}
	if st.Preemptions == 0 {
		t.Error("the small KV pool never preempted: the test no longer covers preemption")
	}
	// Still healthy and serving.
	resp, err := http.Get(ts.url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after load: %v %v", resp, err)
	}
	resp.Body.Close()
	if text := reqs[1].run(t, ts.url); text != want[1] {
		t.Errorf("after load: %q, want %q", text, want[1])
	}
	// Metrics reflect the load.
	resp, err = http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{"bitdecode_kv_blocks_used 0\n", "bitdecode_queue_length 0\n", "bitdecode_time_to_first_token_seconds_count ",
		"bitdecode_inter_token_latency_seconds_bucket{le=\"+Inf\"} ", `bitdecode_http_requests_total{endpoint="chat",code="200"}`,
		`bitdecode_http_requests_total{endpoint="chat",code="404"}`, "bitdecode_generation_tokens_per_second "} {
		if !strings.Contains(string(mb), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}

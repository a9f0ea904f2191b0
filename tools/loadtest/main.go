// Command loadtest drives a running `bitdecode serve` (or any
// OpenAI-compatible server) with a mixed load and checks it: no request
// receives another's tokens, malformed requests get their 4xx, streams the
// client abandons free their sequences, and once the load is over no KV
// block is in use and the server still answers.
//
// Every well-formed request forces its own token with logit_bias (+100 on
// a token id no other request uses) and decodes greedily, so its text is
// fixed whatever the numerics of the batch it runs in: on a GPU, where a
// row's low bits depend on the batch, any difference between a request's
// text under load and its text alone is a cross-wired or lost token, not
// rounding. A third of the prompts share a long prefix (prefix sharing
// under load), lengths and token budgets vary, half are streamed, half are
// chat.
//
// With --free no token is forced: requests decode freely and greedily, and
// each text under load must still equal its text alone. That is the
// batch-invariance guarantee (`serve --batch-invariant`, the default on
// the GPU; always on the CPU): a row's bits do not depend on the other rows
// of its steps, preemption's recomputation included. Give the server a small KV pool (--kv-memory, --max-seqs) to force
// queueing and preemption; the report gives the preemptions it counted.
//
//	go run ./tools/loadtest --url http://127.0.0.1:8080 --n 96
//
// It exits 1 on any failed check.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bitdecode/bitdecode/tools/internal/oai"
)

// request is one well-formed request of the load.
type request struct {
	path   string
	body   []byte
	chat   bool
	stream bool
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server base URL")
	n := flag.Int("n", 96, "well-formed requests, all sent at once")
	abortFrac := flag.Float64("abort", 0.2, "streams abandoned by the client mid-way, as a share of all requests")
	badFrac := flag.Float64("malformed", 0.1, "malformed requests, as a share of all requests")
	maxTokens := flag.Int("max-tokens", 160, "largest max_tokens of a request (long enough that decoding sequences outgrow their blocks and force preemption in a small pool)")
	base := flag.Int("token-base", 1000, "first token id forced by logit_bias (request i forces base+i)")
	free := flag.Bool("free", false, "force no token: free greedy decoding, which must still give each request its text alone (a batch-invariant server)")
	apiKey := flag.String("api-key", "", "bearer token, if the server wants one")
	wantPreempt := flag.Bool("want-preemption", false, "fail unless the server preempted at least once")
	timeout := flag.Duration("timeout", 5*time.Minute, "deadline of the whole load")
	flag.Parse()

	c := &client{oai.New(*url, *apiKey, &http.Client{Timeout: *timeout})}
	model, err := c.modelID()
	if err != nil {
		fatalf("%v", err)
	}
	reqs := makeRequests(*n, model, *maxTokens, *base, *free)
	before := c.metrics()

	// Each request alone: the text it must get under load too.
	want := make([]string, len(reqs))
	for i, r := range reqs {
		if want[i], err = c.run(r, -1); err != nil {
			fatalf("request %d alone: %v", i, err)
		}
		if want[i] == "" {
			fatalf("request %d alone returned no text", i)
		}
	}

	total := float64(*n) / (1 - *abortFrac - *badFrac)
	aborts, bad := int(total**abortFrac+0.5), int(total**badFrac+0.5)
	got := make([]string, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	var badOK, abandoned atomic.Int64
	start := time.Now()
	for i, r := range reqs {
		wg.Go(func() { got[i], errs[i] = c.run(r, -1) })
	}
	for i := range aborts {
		r := reqs[i%len(reqs)]
		r.stream = true
		r.body = withStream(r.body)
		wg.Go(func() {
			if _, err := c.run(r, 1+i%4); err == nil {
				abandoned.Add(1)
			}
		})
	}
	for i := range bad {
		wg.Go(func() {
			path, body, status := malformedRequest(i, model)
			if code, _, err := c.post(path, body); err == nil && code == status {
				badOK.Add(1)
			} else {
				fmt.Fprintf(os.Stderr, "malformed %d: status %d (want %d), %v\n", i, code, status, err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	failed, mismatched := 0, 0
	for i := range reqs {
		switch {
		case errs[i] != nil:
			fmt.Fprintf(os.Stderr, "request %d under load: %v\n", i, errs[i])
			mismatched++
		case got[i] != want[i]:
			fmt.Fprintf(os.Stderr, "request %d: under load %q, alone %q\n", i, got[i], want[i])
			mismatched++
		}
	}
	failed += mismatched
	if int(badOK.Load()) != bad {
		failed++
	}
	after, idle := c.waitIdle(30 * time.Second)
	used := after["bitdecode_kv_blocks_used"]
	preempt := after["bitdecode_preemptions_total"] - before["bitdecode_preemptions_total"]
	shared := after["bitdecode_prefix_cache_hit_tokens_total"] - before["bitdecode_prefix_cache_hit_tokens_total"]
	if !idle || used != 0 {
		fmt.Fprintf(os.Stderr, "after the load: idle %t, %g KV blocks in use (want 0)\n", idle, used)
		failed++
	}
	if *wantPreempt && preempt == 0 {
		fmt.Fprintln(os.Stderr, "the server never preempted: give it a smaller --kv-memory")
		failed++
	}
	if _, err := c.modelID(); err != nil {
		fmt.Fprintf(os.Stderr, "the server no longer answers: %v\n", err)
		failed++
	}
	fmt.Printf("load: %d well-formed requests (%d failed or differing from their text alone), %d streams abandoned by the client (%d read before abandoning), %d malformed (%d refused as expected), all at once in %v; %g preemptions, %g prompt tokens shared, %g KV blocks in use after\n",
		len(reqs), mismatched, aborts, abandoned.Load(), bad, badOK.Load(), elapsed.Round(time.Millisecond), preempt, shared, used)
	if failed > 0 {
		fmt.Println("FAIL")
		os.Exit(1)
	}
	fmt.Println("PASS")
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...)
	os.Exit(1)
}

// makeRequests returns n requests; request i forces token base+i unless
// free.
func makeRequests(n int, model string, maxTokens, base int, free bool) []request {
	r := rand.New(rand.NewPCG(31, 32))
	const alphabet = "abcdefghijklmnopqrstuvwxyz (){}.;:=+-*/\n\t0123456789"
	word := func(k int) string {
		var b strings.Builder
		for range k {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	common := word(400) // a long shared prefix: prefix sharing under load
	reqs := make([]request, n)
	for i := range reqs {
		text := fmt.Sprintf("request %d: %s", i, word(5+r.IntN(250)))
		if i%3 == 0 {
			text = common + text
		}
		m := map[string]any{
			"model": model, "max_tokens": 4 + r.IntN(max(1, maxTokens-3)), "temperature": 0,
		}
		if !free {
			m["logit_bias"] = map[string]int{strconv.Itoa(base + i): 100}
		}
		rq := request{chat: i%2 == 0, stream: i%4 < 2}
		if rq.chat {
			rq.path = "/v1/chat/completions"
			m["messages"] = []map[string]string{{"role": "user", "content": text}}
		} else {
			rq.path = "/v1/completions"
			m["prompt"] = text
		}
		if rq.stream {
			m["stream"] = true
		}
		rq.body, _ = json.Marshal(m)
		reqs[i] = rq
	}
	return reqs
}

// withStream returns body with "stream": true.
func withStream(body []byte) []byte {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	m["stream"] = true
	out, _ := json.Marshal(m)
	return out
}

// malformedRequest returns the i-th malformed request and the status it
// must get.
func malformedRequest(i int, model string) (path string, body []byte, status int) {
	cases := []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"x"}`, 400},
		{"/v1/chat/completions", `{"model":"` + model + `","n":1000,"messages":[{"role":"user","content":"x"}]}`, 400},
		{"/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"x"}]}`, 404},
		{"/v1/completions", `{"model":"` + model + `","prompt":"x","max_tokens":100000000}`, 400},
		{"/v1/completions", `{"model":"` + model + `","prompt":[-5]}`, 400},
		{"/v1/chat/completions", `[1,2,3]`, 400},
		{"/v1/completions", "\x00\x01garbage", 400},
	}
	c := cases[i%len(cases)]
	return c.path, []byte(c.body), c.status
}

// client talks to the server.
type client struct{ *oai.Client }

func (c *client) do(method, path string, body []byte) (*http.Response, error) {
	return c.Do(context.Background(), method, path, body)
}

func (c *client) post(path string, body []byte) (int, []byte, error) {
	resp, err := c.do("POST", path, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *client) modelID() (string, error) { return c.ModelID(context.Background()) }

// run sends r and returns its text. With abortAfter >= 0 (streams only) it
// closes the connection after that many chunks and returns nil error.
func (c *client) run(r request, abortAfter int) (string, error) {
	resp, err := c.do("POST", r.path, r.body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !r.stream {
		var out struct{ Choices []oai.Choice }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
			return "", fmt.Errorf("bad response (%v)", err)
		}
		return out.Choices[0].Content(), nil
	}
	var text strings.Builder
	chunks, aborted := 0, false
	err = oai.Stream(resp.Body, func(ev *oai.Event) bool {
		for _, ch := range ev.Choices {
			text.WriteString(ch.Content())
		}
		chunks++
		aborted = abortAfter >= 0 && chunks >= abortAfter
		return aborted
	})
	switch {
	case aborted:
		return "", nil // the deferred Close abandons the stream
	case errors.Is(err, oai.ErrNoDone) && abortAfter >= 0:
		return text.String(), nil
	case err != nil:
		return "", err
	}
	return text.String(), nil
}

func (c *client) metrics() map[string]float64 {
	out := map[string]float64{}
	resp, err := c.do("GET", "/metrics", nil)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			if _, seen := out[name]; !seen {
				out[name] = v
			}
		}
	}
	return out
}

// waitIdle polls /metrics until nothing runs or waits, or d passes.
func (c *client) waitIdle(d time.Duration) (map[string]float64, bool) {
	deadline := time.Now().Add(d)
	for {
		m := c.metrics()
		if m["bitdecode_running_sequences"] == 0 && m["bitdecode_queue_length"] == 0 {
			return m, true
		}
		if time.Now().After(deadline) {
			return m, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

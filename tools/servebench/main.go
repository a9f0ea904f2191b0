// Command servebench measures the serving throughput and latency of a
// running `bitdecode serve` (or any OpenAI-compatible server that accepts
// token-id prompts and vLLM's "ignore_eos", such as vLLM itself): it keeps
// --concurrency streamed /v1/completions requests in flight until --requests
// have finished, each with a prompt of --prompt-tokens random token ids and
// exactly --max-tokens generated tokens (ignore_eos), and reports
//
//   - output tokens/s: completion tokens of all requests over the wall time
//     from the first request sent to the last one finished;
//   - time to first token (TTFT): from sending a request to its first
//     streamed token (queueing and prefill included), mean and percentiles;
//   - time per output token (TPOT): a request's time after its first token
//     over its remaining tokens, mean and percentiles;
//   - request throughput and the tokens of each request the server reported.
//
// The load is bounded: at most --concurrency requests wait on the server
// at any time, so a server with room for that many sequences decodes them
// as one batch and the figure is its steady-state throughput at that batch.
// Prompts are random ids in [--id-min, --id-max), different per request, so
// no prefix is shared (set --shared-prefix to give every prompt the same
// first tokens). --warmup requests run first and are not counted.
//
//	go run ./tools/servebench --url http://127.0.0.1:8080 --concurrency 16 --requests 64 --prompt-tokens 1024 --max-tokens 256
//
// It exits 1 if any request fails or returns fewer tokens than asked.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bitdecode/bitdecode/tools/internal/oai"
)

// config is one benchmark run.
type config struct {
	url, model, apiKey string
	requests, conc     int
	promptTokens       int
	maxTokens          int
	idMin, idMax       int
	sharedPrefix       int
	warmup             int
	seed               uint64
	timeout            time.Duration
}

// result is what one request measured.
type result struct {
	ttft, total time.Duration
	tokens      int // streamed chunks that carried text (one token each)
	usage       int // completion_tokens the server reported (0: none)
	err         error
}

// summary is the report of a run.
type summary struct {
	Requests         int     `json:"requests"`
	Concurrency      int     `json:"concurrency"`
	PromptTokens     int     `json:"prompt_tokens"`
	MaxTokens        int     `json:"max_tokens"`
	WallS            float64 `json:"wall_s"`
	OutputTokens     int     `json:"output_tokens"`
	OutputTokPerS    float64 `json:"output_tokens_per_s"`
	TotalTokPerS     float64 `json:"total_tokens_per_s"`
	RequestsPerS     float64 `json:"requests_per_s"`
	TTFTMeanMS       float64 `json:"ttft_mean_ms"`
	TTFTP50MS        float64 `json:"ttft_p50_ms"`
	TTFTP90MS        float64 `json:"ttft_p90_ms"`
	TTFTP99MS        float64 `json:"ttft_p99_ms"`
	TPOTMeanMS       float64 `json:"tpot_mean_ms"`
	TPOTP50MS        float64 `json:"tpot_p50_ms"`
	TPOTP90MS        float64 `json:"tpot_p90_ms"`
	PerSeqTokPerS    float64 `json:"per_sequence_tokens_per_s"`
	ShortCompletions int     `json:"short_completions"`
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "http://127.0.0.1:8080", "server base URL")
	flag.StringVar(&c.model, "model", "", "model name (default: the first of GET /v1/models)")
	flag.StringVar(&c.apiKey, "api-key", os.Getenv("BITDECODE_API_KEY"), "bearer token, if the server wants one (default $BITDECODE_API_KEY)")
	flag.IntVar(&c.requests, "requests", 64, "requests measured")
	flag.IntVar(&c.conc, "concurrency", 16, "requests in flight at once (the batch the server decodes)")
	flag.IntVar(&c.promptTokens, "prompt-tokens", 512, "prompt length in tokens (random ids)")
	flag.IntVar(&c.maxTokens, "max-tokens", 128, "tokens generated per request (ignore_eos: exactly this many)")
	flag.IntVar(&c.idMin, "id-min", 100, "smallest random prompt token id")
	flag.IntVar(&c.idMax, "id-max", 5000, "random prompt token ids are below this (keep it under the vocabulary size)")
	flag.IntVar(&c.sharedPrefix, "shared-prefix", 0, "first tokens every prompt shares (prefix caching); 0: none")
	flag.IntVar(&c.warmup, "warmup", 0, "requests run first and not counted (default: --concurrency)")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the random prompts")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "deadline of the whole run")
	jsonPath := flag.String("json", "", "also write the summary as JSON to this file")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: servebench [flags]\n\nMeasures output tokens/s, time to first token and time per output token of an\nOpenAI-compatible server under a bounded load of streamed completions.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if c.warmup == 0 {
		c.warmup = c.conc
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := run(ctx, c, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(1)
	}
	s.print(os.Stdout)
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "servebench:", err)
			os.Exit(1)
		}
	}
	if s.ShortCompletions > 0 {
		fmt.Fprintf(os.Stderr, "servebench: %d requests returned fewer than %d tokens\n", s.ShortCompletions, c.maxTokens)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.requests < 1 || c.conc < 1:
		return fmt.Errorf("--requests %d and --concurrency %d: want positive counts", c.requests, c.conc)
	case c.promptTokens < 1 || c.maxTokens < 1:
		return fmt.Errorf("--prompt-tokens %d and --max-tokens %d: want positive counts", c.promptTokens, c.maxTokens)
	case c.idMin < 0 || c.idMax <= c.idMin:
		return fmt.Errorf("--id-min %d, --id-max %d: want 0 <= min < max", c.idMin, c.idMax)
	case c.sharedPrefix < 0 || c.sharedPrefix > c.promptTokens:
		return fmt.Errorf("--shared-prefix %d: want 0..--prompt-tokens (%d)", c.sharedPrefix, c.promptTokens)
	case c.warmup < 0:
		return fmt.Errorf("--warmup %d: want 0 or more", c.warmup)
	}
	return nil
}

// run finds the model, runs the warm-up and then the measured requests.
func run(ctx context.Context, c config, progress io.Writer) (*summary, error) {
	client := oai.New(c.url, c.apiKey, http.DefaultClient)
	if c.model == "" {
		m, err := client.ModelID(ctx)
		if err != nil {
			return nil, err
		}
		c.model = m
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x5e5e))
	prefix := randomIDs(rng, c.sharedPrefix, c.idMin, c.idMax)
	prompt := func() []int {
		return append(slices.Clone(prefix), randomIDs(rng, c.promptTokens-c.sharedPrefix, c.idMin, c.idMax)...)
	}
	if c.warmup > 0 {
		fmt.Fprintf(progress, "warm-up: %d requests\n", c.warmup)
		ps := make([][]int, c.warmup)
		for i := range ps {
			ps[i] = prompt()
		}
		for _, r := range load(ctx, client, c, ps) {
			if r.err != nil {
				return nil, fmt.Errorf("warm-up: %w", r.err)
			}
		}
	}
	ps := make([][]int, c.requests)
	for i := range ps {
		ps[i] = prompt()
	}
	fmt.Fprintf(progress, "measuring: %d requests, %d at once, %d prompt tokens, %d new tokens each\n", c.requests, c.conc, c.promptTokens, c.maxTokens)
	start := time.Now()
	rs := load(ctx, client, c, ps)
	wall := time.Since(start)
	for i, r := range rs {
		if r.err != nil {
			return nil, fmt.Errorf("request %d: %w", i, r.err)
		}
	}
	return summarize(c, rs, wall), nil
}

// load sends the prompts with at most c.conc in flight and returns each
// request's result in prompt order.
func load(ctx context.Context, client *oai.Client, c config, prompts [][]int) []result {
	rs := make([]result, len(prompts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.conc, len(prompts)) {
		wg.Go(func() {
			for i := range next {
				rs[i] = complete(ctx, client, c, prompts[i])
			}
		})
	}
	for i := range prompts {
		next <- i
	}
	close(next)
	wg.Wait()
	return rs
}

// complete sends one streamed completion and times it: the first event
// with text stamps the TTFT, each event with text counts one token, a usage
// object gives the server's count.
func complete(ctx context.Context, c *oai.Client, cfg config, prompt []int) result {
	body, _ := json.Marshal(map[string]any{
		"model": cfg.model, "prompt": prompt, "max_tokens": cfg.maxTokens, "temperature": 0,
		"stream": true, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true},
	})
	start := time.Now()
	resp, err := c.Do(ctx, http.MethodPost, "/v1/completions", body)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))}
	}
	var r result
	r.err = oai.Stream(resp.Body, func(ev *oai.Event) bool {
		if ev.Usage != nil {
			r.usage = ev.Usage.CompletionTokens
		}
		if len(ev.Choices) > 0 && ev.Choices[0].Content() != "" {
			if r.tokens == 0 {
				r.ttft = time.Since(start)
			}
			r.tokens++
		}
		return false
	})
	r.total = time.Since(start)
	return r
}

func randomIDs(rng *rand.Rand, n, lo, hi int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = lo + rng.IntN(hi-lo)
	}
	return ids
}

// summarize turns the measured requests into the report. A request's
// token count is the server's usage when it sent one, else its streamed
// chunks (one token each, as bitdecode and vLLM stream them).
func summarize(c config, rs []result, wall time.Duration) *summary {
	s := &summary{Requests: len(rs), Concurrency: c.conc, PromptTokens: c.promptTokens, MaxTokens: c.maxTokens, WallS: wall.Seconds()}
	var ttft, tpot []float64
	for _, r := range rs {
		n := r.tokens
		if r.usage > 0 {
			n = r.usage
		}
		if n < c.maxTokens {
			s.ShortCompletions++
		}
		s.OutputTokens += n
		ttft = append(ttft, ms(r.ttft))
		if n > 1 {
			tpot = append(tpot, ms(r.total-r.ttft)/float64(n-1))
		}
	}
	s.OutputTokPerS = float64(s.OutputTokens) / wall.Seconds()
	s.TotalTokPerS = float64(s.OutputTokens+len(rs)*c.promptTokens) / wall.Seconds()
	s.RequestsPerS = float64(len(rs)) / wall.Seconds()
	s.TTFTMeanMS, s.TTFTP50MS, s.TTFTP90MS, s.TTFTP99MS = mean(ttft), percentile(ttft, 50), percentile(ttft, 90), percentile(ttft, 99)
	s.TPOTMeanMS, s.TPOTP50MS, s.TPOTP90MS = mean(tpot), percentile(tpot, 50), percentile(tpot, 90)
	if s.TPOTMeanMS > 0 {
		s.PerSeqTokPerS = 1000 / s.TPOTMeanMS
	}
	return s
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "requests %d, %d at once, prompt %d tokens, %d new tokens each, wall %.2f s\n", s.Requests, s.Concurrency, s.PromptTokens, s.MaxTokens, s.WallS)
	fmt.Fprintf(w, "output tokens/s   %10.1f   (%d tokens; prompt+output %.1f tokens/s; %.2f requests/s)\n", s.OutputTokPerS, s.OutputTokens, s.TotalTokPerS, s.RequestsPerS)
	fmt.Fprintf(w, "TTFT ms           mean %8.1f   p50 %8.1f   p90 %8.1f   p99 %8.1f\n", s.TTFTMeanMS, s.TTFTP50MS, s.TTFTP90MS, s.TTFTP99MS)
	fmt.Fprintf(w, "TPOT ms           mean %8.2f   p50 %8.2f   p90 %8.2f   (%.1f tokens/s per sequence)\n", s.TPOTMeanMS, s.TPOTP50MS, s.TPOTP90MS, s.PerSeqTokPerS)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// percentile is the p-th percentile of xs by linear interpolation between
// the closest ranks (numpy's default), 0 for no data.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

package server

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/bitdecode/bitdecode/engine"
)

// Metrics collects what /metrics exposes in the Prometheus text format
// (version 0.0.4). It is written by hand rather than with client_golang:
// a dozen series do not justify a dependency tree, and the format is a few
// lines of text. Latency observers are safe for concurrent use; pass
// ObserveTTFT and ObserveTokenLatency to engine.SchedulerOptions.
type Metrics struct {
	mu       sync.Mutex
	ttft     histogram
	itl      histogram
	duration histogram
	requests map[requestKey]int64
	// tokens per second over the last rateWindow seconds: a ring of
	// per-second counts.
	ring     [rateWindow]int64
	ringSec  [rateWindow]int64
	lastSeen time.Time
	now      func() time.Time
}

// rateWindow is the window of the tokens-per-second gauge, in seconds.
const rateWindow = 10

type requestKey struct {
	endpoint string
	code     int
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		ttft:     newHistogram(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
		itl:      newHistogram(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		duration: newHistogram(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
		requests: map[requestKey]int64{},
		now:      time.Now,
	}
}

// ObserveTTFT records one request's time to first token.
func (m *Metrics) ObserveTTFT(d time.Duration) {
	m.mu.Lock()
	m.ttft.observe(d.Seconds())
	m.tick()
	m.mu.Unlock()
}

// ObserveTokenLatency records the time between two tokens of a request.
func (m *Metrics) ObserveTokenLatency(d time.Duration) {
	m.mu.Lock()
	m.itl.observe(d.Seconds())
	m.tick()
	m.mu.Unlock()
}

// tick counts one generated token in the current second.
func (m *Metrics) tick() {
	sec := m.now().Unix()
	i := sec % rateWindow
	if m.ringSec[i] != sec {
		m.ringSec[i], m.ring[i] = sec, 0
	}
	m.ring[i]++
}

// observeRequest counts a finished HTTP request by endpoint and status.
func (m *Metrics) observeRequest(endpoint string, code int, d time.Duration) {
	m.mu.Lock()
	m.requests[requestKey{endpoint, code}]++
	if code == 200 {
		m.duration.observe(d.Seconds())
	}
	m.mu.Unlock()
}

// tokensPerSecond returns the generation rate over the last full
// rateWindow seconds.
func (m *Metrics) tokensPerSecond() float64 {
	now := m.now().Unix()
	var n int64
	for i := range m.ring {
		if s := m.ringSec[i]; s < now && s >= now-rateWindow {
			n += m.ring[i]
		}
	}
	return float64(n) / rateWindow
}

// write writes every series in the Prometheus text format.
func (m *Metrics) write(w io.Writer, st engine.SchedulerStats, blockBytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	metric := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	value := func(name, typ, help string, v float64) {
		metric(name, typ, help)
		fmt.Fprintf(w, "%s %s\n", name, formatFloat(v))
	}
	value("bitdecode_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 seconds.", m.tokensPerSecond())
	value("bitdecode_generation_tokens_total", "counter", "Tokens generated.", float64(st.GeneratedTokens))
	value("bitdecode_prompt_tokens_total", "counter", "Prompt tokens computed (prefix-cache hits excluded).", float64(st.PromptTokens))
	value("bitdecode_prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose KV blocks were shared with an earlier prompt.", float64(st.CachedTokens))
	value("bitdecode_queue_length", "gauge", "Requests waiting for a sequence slot or KV blocks.", float64(st.Queued))
	value("bitdecode_running_sequences", "gauge", "Sequences in the running batch.", float64(st.Running))
	value("bitdecode_kv_blocks_used", "gauge", "KV cache blocks in use.", float64(st.TotalBlocks-st.FreeBlocks))
	value("bitdecode_kv_blocks_free", "gauge", "KV cache blocks free (prefix-cached ones included).", float64(st.FreeBlocks))
	value("bitdecode_kv_blocks_total", "gauge", "KV cache blocks in the pool.", float64(st.TotalBlocks))
	value("bitdecode_kv_block_bytes", "gauge", "Bytes of one KV block across all layers and KV heads.", float64(blockBytes))
	value("bitdecode_preemptions_total", "counter", "Sequences preempted (blocks freed, recomputed later) for lack of KV blocks.", float64(st.Preemptions))
	value("bitdecode_scheduler_steps_total", "counter", "Forward passes run by the scheduler.", float64(st.Steps))
	metric("bitdecode_requests_finished_total", "counter", "Generation requests finished in the scheduler, by outcome.")
	fmt.Fprintf(w, "bitdecode_requests_finished_total{outcome=\"completed\"} %d\n", st.Finished)
	fmt.Fprintf(w, "bitdecode_requests_finished_total{outcome=\"cancelled\"} %d\n", st.Cancelled)
	fmt.Fprintf(w, "bitdecode_requests_finished_total{outcome=\"error\"} %d\n", st.Fail)
	metric("bitdecode_http_requests_total", "counter", "HTTP requests by endpoint and status code.")
	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].endpoint < keys[j].endpoint || keys[i].endpoint == keys[j].endpoint && keys[i].code < keys[j].code
	})
	for _, k := range keys {
		fmt.Fprintf(w, "bitdecode_http_requests_total{endpoint=%q,code=\"%d\"} %d\n", k.endpoint, k.code, m.requests[k])
	}
	m.ttft.write(w, "bitdecode_time_to_first_token_seconds", "Time from request to its first generated token.")
	m.itl.write(w, "bitdecode_inter_token_latency_seconds", "Time between consecutive tokens of a request.")
	m.duration.write(w, "bitdecode_request_duration_seconds", "Duration of successful completion requests.")
}

// histogram is a Prometheus histogram with fixed upper bounds.
type histogram struct {
	bounds []float64
	counts []int64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      int64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, formatFloat(b), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, cum, name, formatFloat(h.sum), name, h.n)
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

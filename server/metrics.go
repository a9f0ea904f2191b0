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
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
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
	if t := st.Tiers; t != nil {
		writeTiers(w, metric, value, t)
	}
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

// writeTiers writes the series of a bw cache (read-time precision tiers).
func writeTiers(w io.Writer, metric func(name, typ, help string), value func(name, typ, help string, v float64), t *kvcache.TierStats) {
	r := t.Read
	metric("bitdecode_kv_tier_read_tokens_total", "counter", "Cached tokens met by the decode calls of the bw KV cache, by the tier they were read at (evicted: skipped), summed over layers and KV heads.")
	for tier := kv.High; tier < kv.NumTiers; tier++ {
		fmt.Fprintf(w, "bitdecode_kv_tier_read_tokens_total{tier=%q} %d\n", tier.String(), r.Tokens[tier])
	}
	value("bitdecode_kv_plane_read_bytes_total", "counter", "Bytes of bit planes read by the decode calls of the bw KV cache.", float64(r.PlaneBytes))
	value("bitdecode_kv_plane_index_read_bytes_total", "counter", "Bytes of tier-sorted token index read by the decode calls of the bw KV cache.", float64(r.IndexBytes))
	value("bitdecode_kv_fp16_read_bytes_total", "counter", "Bytes an fp16 KV cache would have read for the same decode calls.", float64(r.FP16Bytes))
	var total int64
	for _, n := range t.Cached {
		total += n
	}
	per := float64(max(t.PerToken, 1))
	metric("bitdecode_kv_tier_tokens", "gauge", "Tokens held now in the bw KV cache in each tier, averaged over layers and KV heads.")
	for tier := kv.High; tier < kv.NumTiers; tier++ {
		fmt.Fprintf(w, "bitdecode_kv_tier_tokens{tier=%q} %s\n", tier.String(), formatFloat(float64(t.Cached[tier])/per))
	}
	metric("bitdecode_kv_tier_share", "gauge", "Share of the tokens held now in the bw KV cache in each tier (0 when empty).")
	for tier := kv.High; tier < kv.NumTiers; tier++ {
		share := 0.0
		if total > 0 {
			share = float64(t.Cached[tier]) / float64(total)
		}
		fmt.Fprintf(w, "bitdecode_kv_tier_share{tier=%q} %s\n", tier.String(), formatFloat(share))
	}
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

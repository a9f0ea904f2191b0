package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// newBWTestServer serves the tiny model over a paged bw cache.
func newBWTestServer(t testing.TB, spec string) (*testServer, *kvcache.Planes) {
	t.Helper()
	var pc *kvcache.Planes
	ts := startTestServer(t, func(be backend.Backend, cfg *model.Config) (kvcache.Cache, int64, error) {
		var err error
		pc, err = kvcache.NewPlanes(be, cfg, kv.MustParseSpec(spec), kvcache.Options{MaxSeqs: 4, Blocks: 40})
		if err != nil {
			return nil, 0, err
		}
		return pc, pc.BlockBytes(), nil
	})
	return ts, pc
}

// apiErr decodes an OpenAI error object.
func apiErr(t testing.TB, b []byte) (typ, param, code, msg string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("%s is not an error object", b)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, param, code, e.Error.Message
}

// metricValue returns the value of one series in a /metrics body.
func metricValue(t testing.TB, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics lacks %s", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getMetrics(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestKVTiers checks the kv_tiers extension on a bw server (accepted in
// both endpoints, streamed or not, with extra unknown fields as
// openai-python's extra_body sends them; refused with a 400 naming
// kv_tiers when invalid) and on an int4 server (refused), and the bw
// series of /metrics.
func TestKVTiers(t *testing.T) {
	ts, pc := newBWTestServer(t, "bw:h20:m40:l40:w16:s2:r8:blk32")
	chat, comp := ts.url+"/v1/chat/completions", ts.url+"/v1/completions"
	user := `"messages":[{"role":"user","content":"hello there"}]`
	for _, body := range []string{
		`{"model":"tiny","prompt":"func main() {","max_tokens":8,"temperature":0,"kv_tiers":"l100:w0:s0"}`,
		`{"model":"tiny","prompt":"func main() {","max_tokens":8,"temperature":0,"kv_tiers":"h100","user":"u1"}`,
		`{"model":"tiny","prompt":"func main() {","max_tokens":8,"temperature":0,"kv_tiers":null}`,
		`{"model":"tiny","prompt":"func main() {","max_tokens":8,"temperature":0,"kv_tiers":""}`,
		`{"model":"tiny",` + user + `,"max_tokens":8,"temperature":0,"kv_tiers":"bw:m100:w0:s0"}`,
	} {
		url := comp
		if strings.Contains(body, "messages") {
			url = chat
		}
		if code, b := post(t, context.Background(), url, body); code != 200 {
			t.Errorf("%s: status %d: %s", body, code, b)
		}
	}
	text, _ := streamText(t, chat, `{"model":"tiny",`+user+`,"max_tokens":8,"temperature":0,"stream":true,"kv_tiers":"h20:m80"}`, true)
	t.Logf("streamed under h20:m80: %q", text)

	for _, tc := range []struct{ tiers, code, msg string }{
		{`"h20:m40"`, "invalid_value", "want 100%"},
		{`"bf16"`, "invalid_value", "storage options"},
		{`"blk128"`, "invalid_value", "storage options"},
		{`"l101"`, "invalid_value", "[0, 100]"},
		{`"int4"`, "invalid_value", "storage options"},
	} {
		code, b := post(t, context.Background(), comp, `{"model":"tiny","prompt":"a","max_tokens":2,"kv_tiers":`+tc.tiers+`}`)
		typ, param, ecode, msg := apiErr(t, b)
		if code != 400 || typ != "invalid_request_error" || param != "kv_tiers" || ecode != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("kv_tiers %s: %d %q %q %q %q", tc.tiers, code, typ, param, ecode, msg)
		}
	}
	code, b := post(t, context.Background(), chat, `{"model":"tiny",`+user+`,"kv_tiers":20}`)
	if _, param, _, _ := apiErr(t, b); code != 400 || param != "kv_tiers" {
		t.Errorf("kv_tiers 20: %d %s", code, b)
	}

	// The scheduler publishes its stats after the step that ended the last
	// request, which may come after that request's response.
	idle := func() bool {
		st := ts.sched.Stats()
		return st.Running == 0 && st.Tiers != nil && st.Tiers.Cached == [kv.NumTiers]int64{} && st.FreeBlocks == st.TotalBlocks
	}
	for deadline := time.Now().Add(10 * time.Second); !idle(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bw server not idle: %+v", ts.sched.Stats())
		}
	}
	mb := getMetrics(t, ts.url)
	for _, tier := range []string{"high", "medium", "low", "evicted"} {
		metricValue(t, mb, `bitdecode_kv_tier_read_tokens_total{tier="`+tier+`"}`)
		metricValue(t, mb, `bitdecode_kv_tier_tokens{tier="`+tier+`"}`)
		metricValue(t, mb, `bitdecode_kv_tier_share{tier="`+tier+`"}`)
	}
	plane, fp16 := metricValue(t, mb, "bitdecode_kv_plane_read_bytes_total"), metricValue(t, mb, "bitdecode_kv_fp16_read_bytes_total")
	if plane <= 0 || plane >= fp16 || metricValue(t, mb, `bitdecode_kv_tier_read_tokens_total{tier="low"}`) <= 0 ||
		metricValue(t, mb, "bitdecode_kv_plane_index_read_bytes_total") <= 0 {
		t.Errorf("plane bytes %g, fp16 %g:\n%s", plane, fp16, mb)
	}
	if metricValue(t, mb, `bitdecode_kv_tier_tokens{tier="high"}`) != 0 || metricValue(t, mb, `bitdecode_kv_tier_share{tier="high"}`) != 0 {
		t.Errorf("idle bw cache reports cached tokens:\n%s", mb)
	}
	if bb := metricValue(t, mb, "bitdecode_kv_block_bytes"); bb != float64(pc.BlockBytes()) {
		t.Errorf("block bytes %g, want %d", bb, pc.BlockBytes())
	}

	// An int4 server refuses kv_tiers and has no bw series; other unknown
	// fields are still ignored.
	ts4 := newTestServer(t, 40, 4)
	code, b = post(t, context.Background(), ts4.url+"/v1/completions", `{"model":"tiny","prompt":"a","max_tokens":2,"kv_tiers":"h100"}`)
	typ, param, ecode, msg := apiErr(t, b)
	if code != 400 || typ != "invalid_request_error" || param != "kv_tiers" || ecode != "unsupported_parameter" || !strings.Contains(msg, "int4") {
		t.Errorf("kv_tiers on int4: %d %q %q %q %q", code, typ, param, ecode, msg)
	}
	for _, body := range []string{
		`{"model":"tiny","prompt":"a","max_tokens":2,"kv_tiers":null,"metadata":{"a":"b"}}`,
		`{"model":"tiny","prompt":"a","max_tokens":2,"kv_tiers":""}`,
	} {
		if code, b := post(t, context.Background(), ts4.url+"/v1/completions", body); code != 200 {
			t.Errorf("int4 %s: %d %s", body, code, b)
		}
	}
	if mb := getMetrics(t, ts4.url); strings.Contains(mb, "bitdecode_kv_tier") || strings.Contains(mb, "plane") {
		t.Errorf("int4 /metrics has bw series:\n%s", mb)
	}
}

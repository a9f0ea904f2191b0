package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{{"1GiB", 1 << 30}, {"512MiB", 512 << 20}, {"1.5 gb", 1500000000}, {"4096", 4096}, {"10kb", 10000}, {"2KiB", 2048}}
	for _, tc := range tests {
		if got, err := parseBytes(tc.in); err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "GiB", "1XB", "0", "1e30"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}

// TestServeTinyModel starts 'bitdecode serve' on a free loopback port with
// the random tiny model, completes one request over HTTP, then ends the
// server as SIGINT would and checks that it drains and returns cleanly.
func TestServeTinyModel(t *testing.T) {
	dir := t.TempDir()
	if err := tinymodel.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	testServe(t, []string{"--model", dir, "--served-model-name", "tiny", "--ctx-size", "1000", "--log-format", "json"}, "tiny", "int4:kc32:v32:res32", "KV cache int4:kc32:v32:res32")
}

// TestServeEmbeddedModel serves the embedded default model (no --model).
func TestServeEmbeddedModel(t *testing.T) {
	testServe(t, nil, "gotiny", "int4:kc32:v32:res32", "KV cache int4:kc32:v32:res32")
}

// TestServeWeights serves the embedded model with int4 weights (groups of
// 64: its MLP is 320 wide) and its head in int8: the quantized layers and
// the tied lookup of the head's values under the scheduler.
func TestServeWeights(t *testing.T) {
	testServe(t, []string{"--weights", "int4:g64"}, "gotiny", "int4:kc32:v32:res32", "weights int4:g64:rtn:head=int8")
}

// TestServeTP serves the embedded model on two CPU ranks (--tp 2): the
// sharded model and the per-rank paged cache under the scheduler.
func TestServeTP(t *testing.T) {
	testServe(t, []string{"--tp", "2"}, "gotiny", "int4:kc32:v32:res32", "tensor parallelism over 2 ranks")
}

// TestServeBW serves the bit-plane format on the CPU, with --model and
// with the embedded model: a request with its own kv_tiers completes and
// /metrics has the bw series.
func TestServeBW(t *testing.T) {
	dir := t.TempDir()
	if err := tinymodel.Write(dir, 1); err != nil {
		t.Fatal(err)
	}
	t.Run("model", func(t *testing.T) {
		testServe(t, []string{"--model", dir, "--served-model-name", "tiny"}, "tiny", "bw:h20:m40:l40:blk32", "KV cache bw:h20:m40:l40:w64:s4:r16")
	})
	t.Run("embedded", func(t *testing.T) {
		testServe(t, nil, "gotiny", "bw:h20:m40:l40", "KV cache bw:h20:m40:l40:w64:s4:r16")
	})
}

// TestServeBWOnCUDA serves the bit-plane format on --device cuda (the GPU
// bit-plane cache, kvcache/gpukv.Planes) as TestServeBW does on the CPU: a
// request with its own kv_tiers completes and /metrics has the bw series.
// Without a GPU (CI, the development VM) serve fails for lack of the
// device, with the device's error pointing to --device cpu, not with a
// refusal of bw; the test checks that and skips the rest.
func TestServeBWOnCUDA(t *testing.T) {
	testServeOn(t, "cuda", nil, "gotiny", "bw:h20:m40:l40", "KV cache bw:h20:m40:l40:w64:s4:r16")
}

func testServe(t *testing.T, modelArgs []string, name, kvSpec, wantLog string) {
	testServeOn(t, "cpu", modelArgs, name, kvSpec, wantLog)
}

// testServeOn starts serve on device with kvSpec, completes requests over
// HTTP (with kv_tiers and /metrics for bw), then stops it as SIGINT would.
// On --device cuda without a GPU it checks serve's device error and skips.
func testServeOn(t *testing.T, device string, modelArgs []string, name, kvSpec, wantLog string) {
	ctx, cancel := context.WithCancel(context.Background())
	old := serveContext
	serveContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	defer func() { serveContext = old }()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var out strings.Builder
		args := append([]string{"serve", "--device", device, "--kv", kvSpec, "--addr", "127.0.0.1:0", "--kv-memory", "4MiB", "--max-seqs", "4"}, modelArgs...)
		code := runMain(args, &out, pw)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	addr := ""
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	var log []string
	for sc.Scan() {
		log = append(log, sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		code := <-done
		text := strings.Join(log, "\n")
		if device == "cuda" && code == 1 && strings.Contains(text, "--device cuda: cuda:") && strings.Contains(text, "try --device cpu") {
			if strings.Contains(text, "bw") || strings.Contains(text, "bit-plane") {
				t.Fatalf("serve --device cuda --kv %s refused the format: %q", kvSpec, text)
			}
			t.Skipf("no CUDA device: serve failed with the device's error %q", text)
		}
		t.Fatalf("serve exited with %d and no listening line in %q", code, log)
	}
	go io.Copy(io.Discard, pr)
	if !strings.Contains(strings.Join(log, "\n"), wantLog) {
		t.Errorf("start-up log lacks the KV cache line: %q", log)
	}
	resp, err := http.Post(addr+"/v1/completions", "application/json", strings.NewReader(`{"model":"`+name+`","prompt":"hello","max_tokens":5,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(r.Choices) != 1 || r.Usage.CompletionTokens < 1 {
		t.Fatalf("completion: status %d, %+v", resp.StatusCode, r)
	}
	if strings.HasPrefix(kvSpec, "bw") {
		resp, err := http.Post(addr+"/v1/completions", "application/json", strings.NewReader(`{"model":"`+name+`","prompt":"hello","max_tokens":5,"temperature":0,"kv_tiers":"m100:w0:s0"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("completion with kv_tiers: status %d: %s", resp.StatusCode, b)
		}
		if resp, err = http.Get(addr + "/metrics"); err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range []string{`bitdecode_kv_tier_read_tokens_total{tier="medium"}`, "bitdecode_kv_plane_read_bytes_total", "bitdecode_kv_fp16_read_bytes_total", `bitdecode_kv_tier_share{tier="low"}`} {
			if !strings.Contains(string(b), s) {
				t.Errorf("/metrics lacks %s", s)
			}
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited with %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after the signal")
	}
}

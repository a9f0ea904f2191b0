package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Ref
		ok   bool
	}{
		{"meta-llama/Llama-3.2-1B", Ref{"meta-llama/Llama-3.2-1B", "main"}, true},
		{"Qwen/Qwen2.5-0.5B-Instruct@v1.0", Ref{"Qwen/Qwen2.5-0.5B-Instruct", "v1.0"}, true},
		{"a/b@0123456789abcdef0123456789abcdef01234567", Ref{"a/b", "0123456789abcdef0123456789abcdef01234567"}, true},
		{"a/b@refs/pr/1", Ref{"a/b", "refs/pr/1"}, true},
		{"gocoder-23m", Ref{}, false},
		{"../shared/models/gocoder-23m", Ref{}, false},
		{"./a/b", Ref{}, false},
		{"/abs/path", Ref{}, false},
		{"a/b/c", Ref{}, false},
		{"a/b@", Ref{}, false},
		{"a/..", Ref{}, false},
		{"a/b@x/../y", Ref{}, false},
		{"", Ref{}, false},
	} {
		got, ok := ParseRef(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// fakeHub serves one repository the way the Hub's model API and resolve
// URLs do, counting requests.
type fakeHub struct {
	repo, sha string
	files     map[string][]byte
	token     string // required when set
	mu        sync.Mutex
	requests  []string
	ranges    []string
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.URL.Path)
	if rg := r.Header.Get("Range"); rg != "" {
		h.ranges = append(h.ranges, rg)
	}
	h.mu.Unlock()
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, `{"error":"Access to model is restricted."}`, http.StatusUnauthorized)
		return
	}
	api := "/api/models/" + h.repo + "/revision/"
	res := "/" + h.repo + "/resolve/" + h.sha + "/"
	switch {
	case strings.HasPrefix(r.URL.Path, api):
		var sib []map[string]string
		for name := range h.files {
			sib = append(sib, map[string]string{"rfilename": name})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": h.repo, "sha": h.sha, "siblings": sib})
	case strings.HasPrefix(r.URL.Path, res):
		b, ok := h.files[strings.TrimPrefix(r.URL.Path, res)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	default:
		http.NotFound(w, r)
	}
}

func (h *fakeHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newFakeHub(t *testing.T) (*fakeHub, *httptest.Server) {
	r := rand.New(rand.NewPCG(1, 2))
	index, _ := json.Marshal(map[string]any{"weight_map": map[string]string{
		"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors", "c.weight": "model-00002-of-00002.safetensors"}})
	h := &fakeHub{repo: "org/tiny-llama", sha: "0123456789abcdef0123456789abcdef01234567", files: map[string][]byte{
		"config.json":                      []byte(`{"model_type":"llama"}`),
		"tokenizer.json":                   []byte(`{"model":{}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"generation_config.json":           []byte(`{}`),
		"model.safetensors.index.json":     index,
		"model-00001-of-00002.safetensors": randBytes(r, 300_000),
		"model-00002-of-00002.safetensors": randBytes(r, 200_001),
		"consolidated.safetensors":         randBytes(r, 500_000), // another copy: not fetched
		"README.md":                        []byte("# tiny"),
		"onnx/model.safetensors":           randBytes(r, 1000),
		"pytorch_model.bin":                randBytes(r, 1000),
	}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func opts(srv *httptest.Server, cache string) Options {
	return Options{Endpoint: srv.URL, CacheDir: cache, Getenv: func(string) string { return "" }}
}

// TestResolveDownloadsAndCaches: the first Resolve fetches exactly the
// files a model needs into the Hugging Face cache layout; the second makes
// no request; offline mode finds the cached snapshot and refuses what is
// not cached.
func TestResolveDownloadsAndCaches(t *testing.T) {
	h, srv := newFakeHub(t)
	cache := t.TempDir()
	ref, _ := ParseRef(h.repo)
	var logs []string
	o := opts(srv, cache)
	o.Log = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	dir, err := Resolve(context.Background(), ref, o)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "models--org--tiny-llama", "snapshots", h.sha)
	if dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	got, _ := os.ReadDir(dir)
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	wantNames := "config.json generation_config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json tokenizer.json tokenizer_config.json"
	if strings.Join(names, " ") != wantNames {
		t.Errorf("files %v, want %s", names, wantNames)
	}
	for _, n := range names {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(b, h.files[n]) {
			t.Errorf("%s: %d bytes differ from the repository's %d", n, len(b), len(h.files[n]))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "models--org--tiny-llama", "refs", "main")); string(b) != h.sha {
		t.Errorf("refs/main = %q", b)
	}
	t.Logf("log: %q", logs)
	n := h.count()
	if n != 1+len(names) {
		t.Errorf("%d requests for %d files and the API", n, len(names))
	}
	for _, o2 := range []Options{opts(srv, cache), {CacheDir: cache, Offline: true, Getenv: func(string) string { return "" }}} {
		again, err := Resolve(context.Background(), ref, o2)
		if err != nil || again != dir {
			t.Errorf("cached: %s, %v", again, err)
		}
	}
	if h.count() != n {
		t.Errorf("a cached snapshot made %d requests", h.count()-n)
	}
	byCommit, err := Resolve(context.Background(), Ref{Repo: h.repo, Revision: h.sha}, Options{CacheDir: cache, Offline: true, Getenv: func(string) string { return "" }})
	if err != nil || byCommit != dir {
		t.Errorf("by commit: %s, %v", byCommit, err)
	}
	env := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}
	_, err = Resolve(context.Background(), Ref{Repo: "org/other", Revision: "main"}, Options{Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Errorf("offline, not cached: %v", err)
	}
	// A snapshot missing a shard is fetched again (only what is missing).
	if err := os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors")); err != nil {
		t.Fatal(err)
	}
	n = h.count()
	if _, err := Resolve(context.Background(), ref, opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	if h.count()-n != 2 {
		t.Errorf("a missing shard took %d requests, want the API and the shard", h.count()-n)
	}
}

// TestResolveResumes: a download cut short resumes from its .incomplete
// file with a Range request and ends with the whole file.
func TestResolveResumes(t *testing.T) {
	h, srv := newFakeHub(t)
	cache := t.TempDir()
	dir := filepath.Join(cache, "models--org--tiny-llama", "snapshots", h.sha)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shard := "model-00001-of-00002.safetensors"
	if err := os.WriteFile(filepath.Join(dir, shard+".incomplete"), h.files[shard][:123_457], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(context.Background(), Ref{Repo: h.repo, Revision: "main"}, opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, shard))
	if !bytes.Equal(b, h.files[shard]) {
		t.Errorf("resumed shard: %d bytes, not the repository's %d", len(b), len(h.files[shard]))
	}
	if len(h.ranges) != 1 || h.ranges[0] != "bytes=123457-" {
		t.Errorf("range requests %q", h.ranges)
	}
	if _, err := os.Stat(filepath.Join(dir, shard+".incomplete")); err == nil {
		t.Error("the .incomplete file is still there")
	}
}

// TestResolveErrors: a gated repository without a token says to set
// HF_TOKEN, with the token it downloads; a repository without safetensors
// weights or without a config is refused with the reason; an unknown one
// is a 404 saying so.
func TestResolveErrors(t *testing.T) {
	h, srv := newFakeHub(t)
	h.token = "hf_secret"
	ref := Ref{Repo: h.repo, Revision: "main"}
	_, err := Resolve(context.Background(), ref, opts(srv, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), "401") {
		t.Errorf("gated without a token: %v", err)
	}
	o := opts(srv, t.TempDir())
	o.Getenv = func(k string) string { return map[string]string{"HF_TOKEN": "hf_secret"}[k] }
	if _, err := Resolve(context.Background(), ref, o); err != nil {
		t.Errorf("gated with HF_TOKEN: %v", err)
	}
	h.token = ""
	for name := range h.files {
		if strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".index.json") {
			delete(h.files, name)
		}
	}
	if _, err := Resolve(context.Background(), ref, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Errorf("no safetensors: %v", err)
	}
	delete(h.files, "config.json")
	if _, err := Resolve(context.Background(), ref, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config: %v", err)
	}
	if _, err := Resolve(context.Background(), Ref{Repo: "org/nothing", Revision: "main"}, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown repository: %v", err)
	}
}

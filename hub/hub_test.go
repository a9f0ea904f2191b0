package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/hub/hubtest"
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

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newFakeHub(t *testing.T) (*hubtest.Repo, *hubtest.Server) {
	r := rand.New(rand.NewPCG(1, 2))
	index, _ := json.Marshal(map[string]any{"weight_map": map[string]string{
		"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors", "c.weight": "model-00002-of-00002.safetensors"}})
	h := &hubtest.Repo{Name: "org/tiny-llama", SHA: "0123456789abcdef0123456789abcdef01234567", Files: map[string][]byte{
		"config.json":                      []byte(`{"model_type":"llama"}`),
		"tokenizer.json":                   []byte(`{"model":{}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"generation_config.json":           []byte(`{}`),
		"chat_template.jinja":              []byte(`{{ messages[0].content }}`),
		"preprocessor_config.json":         []byte(`{}`), // a processor's: not read
		"model.safetensors.index.json":     index,
		"model-00001-of-00002.safetensors": randBytes(r, 300_000),
		"model-00002-of-00002.safetensors": randBytes(r, 200_001),
		"consolidated.safetensors":         randBytes(r, 500_000), // another copy: not fetched
		"README.md":                        []byte("# tiny"),
		"onnx/model.safetensors":           randBytes(r, 1000),
		"pytorch_model.bin":                randBytes(r, 1000),
	}}
	srv := hubtest.New(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func opts(srv *hubtest.Server, cache string) Options {
	return Options{Endpoint: srv.URL, CacheDir: cache, Getenv: func(string) string { return "" }}
}

// TestResolveDownloadsAndCaches: the first Resolve fetches exactly the
// files a model needs into the Hugging Face cache layout; the second makes
// no request; offline mode finds the cached snapshot and refuses what is
// not cached.
func TestResolveDownloadsAndCaches(t *testing.T) {
	h, srv := newFakeHub(t)
	cache := t.TempDir()
	ref, _ := ParseRef(h.Name)
	var logs []string
	o := opts(srv, cache)
	o.Log = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	dir, err := Resolve(context.Background(), ref, o)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "models--org--tiny-llama", "snapshots", h.SHA)
	if dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	got, _ := os.ReadDir(dir)
	var names []string
	for _, e := range got {
		names = append(names, e.Name())
	}
	wantNames := "chat_template.jinja config.json generation_config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json tokenizer.json tokenizer_config.json"
	if strings.Join(names, " ") != wantNames {
		t.Errorf("files %v, want %s", names, wantNames)
	}
	for _, n := range names {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(b, h.Files[n]) {
			t.Errorf("%s: %d bytes differ from the repository's %d", n, len(b), len(h.Files[n]))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "models--org--tiny-llama", "refs", "main")); string(b) != h.SHA {
		t.Errorf("refs/main = %q", b)
	}
	t.Logf("log: %q", logs)
	n := srv.Requests()
	if n != 1+len(names) {
		t.Errorf("%d requests for %d files and the API", n, len(names))
	}
	for _, o2 := range []Options{opts(srv, cache), {CacheDir: cache, Offline: true, Getenv: func(string) string { return "" }}} {
		again, err := Resolve(context.Background(), ref, o2)
		if err != nil || again != dir {
			t.Errorf("cached: %s, %v", again, err)
		}
	}
	if srv.Requests() != n {
		t.Errorf("a cached snapshot made %d requests", srv.Requests()-n)
	}
	byCommit, err := Resolve(context.Background(), Ref{Repo: h.Name, Revision: h.SHA}, Options{CacheDir: cache, Offline: true, Getenv: func(string) string { return "" }})
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
	n = srv.Requests()
	if _, err := Resolve(context.Background(), ref, opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	if srv.Requests()-n != 2 {
		t.Errorf("a missing shard took %d requests, want the API and the shard", srv.Requests()-n)
	}
}

// TestResolveResumes: a download cut short resumes from its .incomplete
// file with a Range request and ends with the whole file.
func TestResolveResumes(t *testing.T) {
	h, srv := newFakeHub(t)
	cache := t.TempDir()
	dir := filepath.Join(cache, "models--org--tiny-llama", "snapshots", h.SHA)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shard := "model-00001-of-00002.safetensors"
	if err := os.WriteFile(filepath.Join(dir, shard+".incomplete"), h.Files[shard][:123_457], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(context.Background(), Ref{Repo: h.Name, Revision: "main"}, opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, shard))
	if !bytes.Equal(b, h.Files[shard]) {
		t.Errorf("resumed shard: %d bytes, not the repository's %d", len(b), len(h.Files[shard]))
	}
	if rg := srv.Ranges(); len(rg) != 1 || rg[0] != "bytes=123457-" {
		t.Errorf("range requests %q", rg)
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
	srv.Token = "hf_secret" // before the first request
	ref := Ref{Repo: h.Name, Revision: "main"}
	_, err := Resolve(context.Background(), ref, opts(srv, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), "401") {
		t.Errorf("gated without a token: %v", err)
	}
	o := opts(srv, t.TempDir())
	o.Getenv = func(k string) string { return map[string]string{"HF_TOKEN": "hf_secret"}[k] }
	if _, err := Resolve(context.Background(), ref, o); err != nil {
		t.Errorf("gated with HF_TOKEN: %v", err)
	}
	srv.Edit(func() {
		srv.Token = ""
		for name := range h.Files {
			if strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".index.json") {
				delete(h.Files, name)
			}
		}
	})
	if _, err := Resolve(context.Background(), ref, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Errorf("no safetensors: %v", err)
	}
	srv.Edit(func() { delete(h.Files, "config.json") })
	if _, err := Resolve(context.Background(), ref, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config: %v", err)
	}
	if _, err := Resolve(context.Background(), Ref{Repo: "org/nothing", Revision: "main"}, opts(srv, t.TempDir())); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown repository: %v", err)
	}
}

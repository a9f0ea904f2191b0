// Package hub finds a Hugging Face model repository's checkpoint on this
// machine, downloading what is missing: `--model org/name` works as a
// directory does. Files land in the Hugging Face cache layout
// (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub):
//
//	models--org--name/refs/REVISION          the commit a branch or tag named
//	models--org--name/snapshots/COMMIT/FILE  the files
//
// so a checkpoint that transformers or huggingface-cli already downloaded is
// used as it is, without the network, and one downloaded here serves them
// too. Only what bitdecode reads is fetched: config.json, the tokenizer and
// generation files, and the safetensors weights (with their index).
//
// The environment (Options.Getenv) is read as huggingface_hub reads it: HF_TOKEN (or the
// token file under HF_HOME) for gated and private repositories,
// HF_ENDPOINT for a mirror, HF_HUB_OFFLINE=1 to never touch the network.
// Interrupted downloads resume (HTTP Range) from their .incomplete file.
package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultEndpoint is the Hugging Face Hub.
const DefaultEndpoint = "https://huggingface.co"

// Ref names a model repository and a revision (a branch, tag or commit).
type Ref struct {
	Repo     string // "org/name"
	Revision string // "main" unless given
}

// String returns the reference as ParseRef reads it.
func (r Ref) String() string {
	if r.Revision == "main" || r.Revision == "" {
		return r.Repo
	}
	return r.Repo + "@" + r.Revision
}

// repoPart is one half of a repository id, as the Hub allows them.
var repoPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)

// ParseRef reads "org/name" or "org/name@revision". It reports false for
// anything else (a local path such as "./dir" or "/a/b", or a name with
// more or fewer than one slash).
func ParseRef(s string) (Ref, bool) {
	repo, rev, found := strings.Cut(s, "@")
	if found && (rev == "" || strings.ContainsAny(rev, " \\") || strings.Contains(rev, "..")) {
		return Ref{}, false
	}
	org, name, ok := strings.Cut(repo, "/")
	if !ok || !repoPart.MatchString(org) || !repoPart.MatchString(name) || strings.Contains(repo, "..") {
		return Ref{}, false
	}
	if !found {
		rev = "main"
	}
	return Ref{Repo: repo, Revision: rev}, true
}

// Options configure Resolve. The zero value reads the environment.
type Options struct {
	Endpoint string // the Hub's URL (default HF_ENDPOINT, else DefaultEndpoint)
	CacheDir string // the cache (default HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)
	Token    string // bearer token (default HF_TOKEN, else HF_HOME/token)
	// Offline never uses the network (default: HF_HUB_OFFLINE=1).
	Offline bool
	// Getenv reads the environment variables above (nil: none is set); the
	// command line hands it down (cmd/bitdecode's lookupEnv).
	Getenv func(string) string
	// Client makes the requests (default: one without a total timeout,
	// which a large download would exceed).
	Client *http.Client
	// Log, when set, receives one line per step and download progress.
	Log func(format string, args ...any)
}

func (o *Options) fill() error {
	env := o.Getenv
	if env == nil {
		env = func(string) string { return "" }
	}
	o.Endpoint = strings.TrimRight(cmp.Or(o.Endpoint, env("HF_ENDPOINT"), DefaultEndpoint), "/")
	home := env("HF_HOME")
	if home == "" {
		if xdg := env("XDG_CACHE_HOME"); xdg != "" {
			home = filepath.Join(xdg, "huggingface")
		} else if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".cache", "huggingface")
		}
	}
	if o.CacheDir == "" {
		o.CacheDir = env("HF_HUB_CACHE")
	}
	if o.CacheDir == "" {
		if home == "" {
			return errors.New("hub: no cache directory: set HF_HOME or HF_HUB_CACHE")
		}
		o.CacheDir = filepath.Join(home, "hub")
	}
	if o.Token == "" {
		o.Token = env("HF_TOKEN")
	}
	if o.Token == "" && home != "" {
		if b, err := os.ReadFile(filepath.Join(home, "token")); err == nil {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(env("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		o.Offline = true
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 60 * time.Second}}
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return nil
}

// wanted reports whether bitdecode reads a repository file: the model's
// config, tokenizer, chat template and generation files and its
// safetensors weights (at the repository's top level; subfolders hold
// other formats). The chat template may be chat_template.jinja (what
// transformers has saved beside tokenizer_config.json since 4.43) or a
// multimodal processor's chat_template.json.
func wanted(name string) bool {
	if strings.Contains(name, "/") {
		return false
	}
	switch name {
	case "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "chat_template.jinja", "chat_template.json", indexFile, "bitdecode.json":
		return true
	}
	return strings.HasSuffix(name, ".safetensors")
}

// commitRe is a full commit id.
var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// repoDir is the repository's folder in the cache.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Resolve returns the directory holding ref's checkpoint: a complete
// snapshot already in the cache (no request made), else one downloaded
// into it. A complete snapshot has config.json, tokenizer.json and its
// safetensors weights (every shard the index names).
func Resolve(ctx context.Context, ref Ref, o Options) (string, error) {
	if err := o.fill(); err != nil {
		return "", err
	}
	rd := repoDir(o.CacheDir, ref.Repo)
	commit := ref.Revision
	if !commitRe.MatchString(commit) {
		if b, err := os.ReadFile(filepath.Join(rd, "refs", filepath.FromSlash(ref.Revision))); err == nil {
			commit = strings.TrimSpace(string(b))
		}
	}
	if commitRe.MatchString(commit) {
		dir := filepath.Join(rd, "snapshots", commit)
		if err := complete(dir); err == nil {
			o.Log("%s: the cached snapshot %s", ref, dir)
			return dir, nil
		} else if o.Offline {
			return "", fmt.Errorf("hub: %s: offline (HF_HUB_OFFLINE) and the cached snapshot is incomplete: %v", ref, err)
		}
	} else if o.Offline {
		return "", fmt.Errorf("hub: %s: offline (HF_HUB_OFFLINE) and not in the cache %s", ref, o.CacheDir)
	}
	return download(ctx, ref, rd, &o)
}

// complete checks that dir holds a checkpoint bitdecode can load.
func complete(dir string) error {
	for _, f := range []string{"config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("no %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, indexFile)); err == nil {
		shards, err := indexShards(dir)
		if err != nil {
			return err
		}
		for _, shard := range shards {
			if _, err := os.Stat(filepath.Join(dir, shard)); err != nil {
				return fmt.Errorf("no %s", shard)
			}
		}
		return nil
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(m) == 0 {
		return errors.New("no *.safetensors")
	}
	return nil
}

// repoInfo is what the Hub's model API says of a revision.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		Name string `json:"rfilename"`
	} `json:"siblings"`
}

// get sends a GET with the token; the caller closes the body of a 2xx
// response, others are turned into errors.
func get(ctx context.Context, o *Options, u string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "bitdecode")
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	return nil, &StatusError{URL: u, Status: resp.StatusCode, Body: strings.TrimSpace(string(body)), Token: o.Token != ""}
}

// StatusError is a failed Hub request.
type StatusError struct {
	URL    string
	Status int
	Body   string
	Token  bool // a token was sent
}

// Error implements error, with what to do for the usual statuses.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("hub: GET %s: HTTP %d", e.URL, e.Status)
	switch {
	case (e.Status == 401 || e.Status == 403) && !e.Token:
		msg += ": the repository is gated or private; set HF_TOKEN to a token of an account that has accepted its license"
	case e.Status == 401 || e.Status == 403:
		msg += ": the token has no access; accept the repository's license on its page, or check HF_TOKEN"
	case e.Status == 404:
		msg += ": no such repository, revision or file (a private repository also answers 404 without a token)"
	}
	if e.Body != "" {
		msg += " (" + e.Body + ")"
	}
	return msg
}

// download fetches ref's wanted files into the cache and returns the
// snapshot's directory.
func download(ctx context.Context, ref Ref, rd string, o *Options) (string, error) {
	api := fmt.Sprintf("%s/api/models/%s/revision/%s", o.Endpoint, ref.Repo, url.PathEscape(ref.Revision))
	resp, err := get(ctx, o, api, nil)
	if err != nil {
		return "", err
	}
	var info repoInfo
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("hub: %s: the model API's answer: %w", ref, err)
	}
	if !commitRe.MatchString(info.SHA) {
		return "", fmt.Errorf("hub: %s: the model API gave no commit (sha %q)", ref, info.SHA)
	}
	var files []string
	for _, s := range info.Siblings {
		if wanted(s.Name) {
			files = append(files, s.Name)
		}
	}
	slices.Sort(files)
	if !slices.Contains(files, "config.json") {
		return "", fmt.Errorf("hub: %s has no config.json at its top level: not a transformers checkpoint", ref)
	}
	if !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, ".safetensors") }) {
		return "", fmt.Errorf("hub: %s has no *.safetensors weights at its top level (bitdecode reads safetensors, not PyTorch .bin or GGUF files)", ref)
	}
	dir := filepath.Join(rd, "snapshots", info.SHA)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// The small files first: the index then says which weights to fetch.
	small := slices.DeleteFunc(slices.Clone(files), func(f string) bool { return strings.HasSuffix(f, ".safetensors") })
	o.Log("%s: commit %s into %s", ref, info.SHA, dir)
	for _, f := range small {
		if err := fetchFile(ctx, o, ref.Repo, info.SHA, f, filepath.Join(dir, f)); err != nil {
			return "", err
		}
	}
	weights, err := weightFiles(dir, files)
	if err != nil {
		return "", fmt.Errorf("hub: %s: %w", ref, err)
	}
	for _, f := range weights {
		if err := fetchFile(ctx, o, ref.Repo, info.SHA, f, filepath.Join(dir, f)); err != nil {
			return "", err
		}
	}
	if !commitRe.MatchString(ref.Revision) {
		refFile := filepath.Join(rd, "refs", filepath.FromSlash(ref.Revision))
		if err := os.MkdirAll(filepath.Dir(refFile), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(refFile, []byte(info.SHA), 0o644); err != nil {
			return "", err
		}
	}
	if err := complete(dir); err != nil {
		return "", fmt.Errorf("hub: %s: downloaded, but the checkpoint is incomplete: %v", ref, err)
	}
	return dir, nil
}

// weightFiles picks the safetensors files of a repository that the model
// reads: the shards model.safetensors.index.json names (already in dir)
// when there is one, else model.safetensors, else every top-level
// *.safetensors file. So a repository that also ships another copy of its
// weights (Mistral's consolidated.safetensors) costs one download.
func weightFiles(dir string, files []string) ([]string, error) {
	if slices.Contains(files, indexFile) {
		shards, err := indexShards(dir)
		if err != nil {
			return nil, err
		}
		for _, f := range shards {
			if !slices.Contains(files, f) {
				return nil, fmt.Errorf("%s names %q, which the repository does not have", indexFile, f)
			}
		}
		return shards, nil
	}
	if slices.Contains(files, "model.safetensors") {
		return []string{"model.safetensors"}, nil
	}
	return slices.DeleteFunc(slices.Clone(files), func(f string) bool { return !strings.HasSuffix(f, ".safetensors") }), nil
}

// indexFile is a sharded checkpoint's index: its weight_map names each
// tensor's shard.
const indexFile = "model.safetensors.index.json"

// indexShards returns the shards dir's index names, each once, sorted.
func indexShards(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", indexFile, err)
	}
	var shards []string
	for _, f := range idx.WeightMap {
		if !slices.Contains(shards, f) {
			shards = append(shards, f)
		}
	}
	slices.Sort(shards)
	return shards, nil
}

// fetchFile downloads one file to dst unless it is there, resuming from
// dst.incomplete.
func fetchFile(ctx context.Context, o *Options, repo, commit, name, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	part := dst + ".incomplete"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", o.Endpoint, repo, commit, path.Clean(name))
	h := http.Header{}
	if have > 0 {
		h.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := get(ctx, o, u, h)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusRequestedRangeNotSatisfiable {
		// The partial file is already whole (or longer than the file):
		// start again.
		if err := f.Truncate(0); err != nil {
			return err
		}
		have = 0
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		resp, err = get(ctx, o, u, nil)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if have > 0 && resp.StatusCode != http.StatusPartialContent {
		// The server sent the whole file: write it from the start.
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		have = 0
	}
	total := int64(-1)
	if resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	pw := &progress{name: name, done: have, total: total, log: o.Log, start: time.Now(), last: time.Now()}
	if _, err := io.Copy(f, io.TeeReader(resp.Body, pw)); err != nil {
		return fmt.Errorf("hub: %s: %w (the download resumes from %s next time)", name, err, part)
	}
	pw.report(true)
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(part, dst)
}

// progress logs a file's download every few seconds and at its end.
type progress struct {
	name         string
	done, total  int64
	log          func(string, ...any)
	start, last  time.Time
	reportedOnce bool
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) >= 5*time.Second {
		p.report(false)
	}
	return len(b), nil
}

func (p *progress) report(end bool) {
	p.last = time.Now()
	if end && !p.reportedOnce && p.done < 64<<20 {
		p.log("  %s (%s)", p.name, size(p.done))
		return
	}
	p.reportedOnce = true
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 1e-3)
	if p.total > 0 {
		p.log("  %s: %s of %s (%.0f%%), %s/s", p.name, size(p.done), size(p.total), 100*float64(p.done)/float64(p.total), size(int64(rate)))
	} else {
		p.log("  %s: %s, %s/s", p.name, size(p.done), size(int64(rate)))
	}
}

// size formats a byte count.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

package layers

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the module path every package starts with.
const module = "github.com/bitdecode/bitdecode"

// forbidden lists, per package tree (a path relative to the module and
// everything under it), the trees it must not import. These are the rules of
// docs/architecture.md: dependencies point down only.
var forbidden = map[string][]string{
	// Formats: the bottom layer.
	"kv": {"attn", "backend", "gpu", "model", "kvcache", "eval", "engine", "server", "tokenizer", "wq", "bench", "cmd"},
	"wq": {"attn", "backend", "gpu", "model", "kvcache", "eval", "engine", "server", "tokenizer", "kv", "bench", "cmd"},
	// Finding a checkpoint on the Hugging Face Hub: files and HTTP only.
	"hub": {"kv", "wq", "attn", "backend", "gpu", "model", "kvcache", "eval", "engine", "server", "tokenizer", "bench", "cmd"},
	// CPU attention over the formats.
	"attn": {"backend", "gpu", "model", "kvcache", "eval", "engine", "server", "tokenizer", "bench", "cmd"},
	// The GPU runtime and kernels know formats, never a model or what runs it.
	"gpu": {"attn", "backend", "model", "kvcache", "eval", "engine", "server", "tokenizer", "bench", "cmd"},
	// Backends run ops; they know no model, cache or engine.
	"backend": {"model", "kvcache", "eval", "engine", "server", "tokenizer", "bench", "cmd"},
	// Tensor parallelism is device-free: it drives its ranks through the
	// Backend interface and their Communicator only.
	"backend/tp": {"backend/cpu", "backend/gpu", "gpu"},
	// Constrained decoding: grammars and token masks over byte strings,
	// below the tokenizer and the engine that hand it a vocabulary.
	"constrain": {"kv", "wq", "hub", "attn", "backend", "gpu", "model", "kvcache", "eval", "engine", "server", "tokenizer", "bench", "cmd"},
	"tokenizer": {"model", "backend", "gpu", "attn", "kv", "wq", "kvcache", "eval", "engine", "server", "bench", "cmd"},
	"model":     {"kvcache", "eval", "engine", "server", "gpu", "backend/gpu", "attn", "bench", "cmd"},
	// The caches: kvcache itself is device-free; kvcache/gpukv is the CUDA
	// backend's provider and the one cache package that may know the GPU.
	"kvcache": {"eval", "engine", "server", "bench", "cmd"},
	"eval":    {"engine", "server", "gpu", "backend/gpu", "kvcache/gpukv", "bench", "cmd"},
	// The engine sees interfaces: no GPU package, no concrete GPU backend or
	// cache.
	"engine": {"server", "gpu", "backend/gpu", "kvcache/gpukv", "bench", "cmd"},
	"server": {"gpu", "backend", "kvcache/gpukv", "bench", "cmd"},
	// The CLI wires; it never calls a kernel.
	"cmd": {"gpu"},
}

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// under reports whether package path p (relative to the module) is tree or
// below it.
func under(p, tree string) bool { return p == tree || strings.HasPrefix(p, tree+"/") }

// TestLayering checks every package's imports against the rules.
func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for tree, bad := range forbidden {
			if !under(rel, tree) {
				continue
			}
			for _, imp := range p.Imports {
				if !strings.HasPrefix(imp, module+"/") {
					continue
				}
				dep := strings.TrimPrefix(imp, module+"/")
				for _, b := range bad {
					if !under(dep, b) {
						continue
					}
					t.Errorf("%s imports %s: the %s layer must not import %s (docs/architecture.md)", rel, dep, tree, b)
				}
			}
		}
	}
}

// TestPackageNames checks that no two library packages share a name (two
// packages named cuda made every importer alias one of them).
func TestPackageNames(t *testing.T) {
	seen := map[string]string{}
	for _, p := range listPackages(t) {
		if p.Name == "main" {
			continue
		}
		if other, ok := seen[p.Name]; ok {
			t.Errorf("packages %s and %s are both named %s", other, p.ImportPath, p.Name)
		}
		seen[p.Name] = p.ImportPath
	}
}

// envReaders are the packages allowed to read the process environment: the
// command's edge (cmd/bitdecode's lookupEnv hands it down as data), the
// tools, and the test-support package that finds the reference checkpoint.
var envReaders = []string{"cmd", "tools", "internal/testmodel"}

// TestNoHiddenConfig checks that no library package reads the environment
// itself (os.Getenv, os.LookupEnv, os.Environ, syscall.Getenv): tuning is
// data handed down from the edge, never hidden global configuration.
func TestNoHiddenConfig(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if slices.ContainsFunc(envReaders, func(e string) bool { return under(rel, e) }) {
			continue
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "os" || x.Name == "syscall") {
					switch sel.Sel.Name {
					case "Getenv", "LookupEnv", "Environ":
						t.Errorf("%s reads the environment (%s.%s): settings are data handed down from the edge (cmd/bitdecode/env.go)", filepath.Join(rel, f), x.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

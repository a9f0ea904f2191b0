// Package hfcheck holds the conformance fixtures against Hugging Face
// transformers and the code that runs a model over one and compares.
//
// A fixture (testdata/NAME, made by tools/hfcheck/gen.py on a machine with
// transformers) is a tiny randomly initialised checkpoint of one family
// saved by save_pretrained (config.json, model.safetensors), and what
// transformers computes on it in float32 from the stored weights:
// golden.json (a prompt of token ids, 16 greedy tokens, notes) and
// logits.f32 (the logits of every position of the prompt followed by the
// greedy tokens, in one forward pass). Nothing is shared with bitdecode's
// own reading of the config: a field both sides misread the same way
// cannot pass here.
//
// The tests live beside their cache: this package's test on the CPU
// backend (dense float32 cache and the paged fp16, int8 and int4 caches),
// kvcache/gpukv's on the CUDA backend. The fixtures are found from the
// working directory (a test's package directory): testdata here, or
// internal/hfcheck/testdata in the nearest parent.
package hfcheck

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/model"
)

// Golden is a fixture's golden.json.
type Golden struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	ModelType    string `json:"model_type"`
	DType        string `json:"dtype"`
	// Supported says whether gen.py listed the family as one bitdecode
	// runs; the tests keep their own list (hfUnsupported) and check it.
	Supported  bool    `json:"supported"`
	PromptIDs  []int32 `json:"prompt_ids"`
	GreedyIDs  []int32 `json:"greedy_ids"`
	LogitsFile string  `json:"logits_file"`
	Rows       int     `json:"rows"`
	Vocab      int     `json:"vocab"`
	Versions   struct {
		Transformers string `json:"transformers"`
		Torch        string `json:"torch"`
	} `json:"versions"`
	Notes map[string]any `json:"notes"`
}

// Fixture is one fixture loaded: its directory (the checkpoint), golden.json
// and the reference logits, Rows rows of Vocab.
type Fixture struct {
	Dir    string
	Golden Golden
	Logits [][]float32
}

// Name returns the fixture's name (its directory's).
func (f *Fixture) Name() string { return f.Golden.Name }

// testdataDir is where the fixtures live, relative to the module root.
const testdataDir = "internal/hfcheck/testdata"

// Root returns the fixtures' directory: ./testdata if it is this package's
// (a test of internal/hfcheck), else internal/hfcheck/testdata in the
// nearest parent of the working directory. It fails the test if there is
// none: the fixtures are committed, so a missing folder is a broken tree.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; {
		p := filepath.Join(d, filepath.FromSlash(testdataDir))
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatalf("hfcheck: no %s in %s or any parent", testdataDir, dir)
		}
		d = parent
	}
}

// LoadAll loads every fixture under Root, sorted by name.
func LoadAll(t testing.TB) []*Fixture {
	t.Helper()
	root := Root(t)
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var fs []*Fixture
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		f, err := Load(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	if len(fs) == 0 {
		t.Fatalf("hfcheck: no fixtures in %s", root)
	}
	slices.SortFunc(fs, func(a, b *Fixture) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return fs
}

// Load reads the fixture in dir and checks that its parts agree.
func Load(dir string) (*Fixture, error) {
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return nil, fmt.Errorf("hfcheck: %w", err)
	}
	f := &Fixture{Dir: dir}
	if err := json.Unmarshal(data, &f.Golden); err != nil {
		return nil, fmt.Errorf("hfcheck: %s: %w", dir, err)
	}
	g := &f.Golden
	if g.Name != filepath.Base(dir) {
		return nil, fmt.Errorf("hfcheck: %s: golden.json names %q", dir, g.Name)
	}
	if len(g.PromptIDs) == 0 || len(g.GreedyIDs) == 0 || g.Vocab <= 0 || g.Rows != len(g.PromptIDs)+len(g.GreedyIDs)-1 {
		return nil, fmt.Errorf("hfcheck: %s: %d prompt ids, %d greedy ids, %d rows of %d logits: want rows = prompt + greedy - 1", dir, len(g.PromptIDs), len(g.GreedyIDs), g.Rows, g.Vocab)
	}
	raw, err := os.ReadFile(filepath.Join(dir, g.LogitsFile))
	if err != nil {
		return nil, fmt.Errorf("hfcheck: %w", err)
	}
	if len(raw) != 4*g.Rows*g.Vocab {
		return nil, fmt.Errorf("hfcheck: %s: %d bytes, want %d rows of %d float32", g.LogitsFile, len(raw), g.Rows, g.Vocab)
	}
	f.Logits = make([][]float32, g.Rows)
	for r := range f.Logits {
		row := make([]float32, g.Vocab)
		for j := range row {
			row[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(r*g.Vocab+j):]))
		}
		f.Logits[r] = row
	}
	for i, id := range g.GreedyIDs {
		if a := model.Argmax(f.Logits[len(g.PromptIDs)-1+i]); int32(a) != id {
			return nil, fmt.Errorf("hfcheck: %s: greedy token %d is %d, but the reference row's argmax is %d", dir, i, id, a)
		}
	}
	return f, nil
}

// Tokens returns the sequence the reference logits are of: the prompt and
// every greedy token but the last.
func (f *Fixture) Tokens() []int32 {
	g := &f.Golden
	return append(slices.Clone(g.PromptIDs), g.GreedyIDs[:len(g.GreedyIDs)-1]...)
}

// opener is implemented by the paged caches: Open starts a sequence for a
// prompt (kvcache.Cache's Open).
type opener interface {
	Open(id int, prompt []int) (int, error)
}

// Run runs the first n tokens of the fixture's sequence (Tokens) through m
// on the empty cache c as one sequence, as an engine does: the prompt in
// prefill chunks of at most chunk tokens (every row's logits), then one
// decode step per greedy token fed back (teacher forcing, so every step
// sees the reference's context). It returns one row of logits per token:
// the first n reference rows'. n <= 0 runs them all.
func Run(m model.Model, c model.Attention, f *Fixture, chunk, n int) ([][]float32, error) {
	const id = 1
	tokens := f.Tokens()
	if n > 0 && n < len(tokens) {
		tokens = tokens[:n]
	}
	prompt := min(len(f.Golden.PromptIDs), len(tokens))
	if o, ok := c.(opener); ok {
		ids := make([]int, prompt)
		for i := range ids {
			ids[i] = int(tokens[i])
		}
		if cached, err := o.Open(id, ids); err != nil || cached != 0 {
			return nil, fmt.Errorf("open: %d tokens cached, %v", cached, err)
		}
	}
	rows := make([][]float32, 0, len(tokens))
	for pos := 0; pos < len(tokens); {
		n := 1
		if pos < prompt {
			n = min(chunk, prompt-pos)
		}
		var b model.Batch
		b.Add(id, pos, tokens[pos:pos+n]...)
		b.AllLogits = true
		out, err := m.Forward(&b, c)
		if err != nil {
			return nil, fmt.Errorf("position %d: %w", pos, err)
		}
		if out.Rows() != n {
			return nil, fmt.Errorf("position %d: %d rows of logits for %d tokens", pos, out.Rows(), n)
		}
		for i := range n {
			rows = append(rows, slices.Clone(out.Row(i)))
		}
		pos += n
	}
	return rows, nil
}

// RelL2 is ‖a − b‖₂ / ‖b‖₂ in float64; NaN if a holds a NaN.
func RelL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// norm2 is ‖a‖₂ in float64.
func norm2(a []float32) float64 {
	var n float64
	for _, x := range a {
		n += float64(x) * float64(x)
	}
	return math.Sqrt(n)
}

// Report is what Check measured.
type Report struct {
	Worst    float64 // the largest ‖got − ref‖₂/‖ref‖₂ over the rows
	WorstRow int     // its row
	// Greedy is how many greedy tokens got's rows pick as the reference did
	// before the first that differs (all those the rows reach: Steps).
	Greedy, Steps int
	// Flips lists the greedy steps whose token differs, each allowed by
	// its reference top-2 margin (Check fails the others).
	Flips []int
}

// CheckRows requires every row of rows to lie within tol of want's row of
// the same index (RelL2), failing t at the first that does not (its
// message names what and the row), and returns the worst: the comparison
// of one cache's logits against another's (a paged cache against the
// dense one) where Check compares against transformers'.
func CheckRows(t testing.TB, what string, rows, want [][]float32, tol float64) float64 {
	t.Helper()
	if len(rows) < len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(rows), len(want))
	}
	worst := 0.0
	for i := range want {
		e := RelL2(rows[i], want[i])
		if !(e <= tol) {
			t.Fatalf("%s: row %d: ‖got − want‖₂/‖want‖₂ = %.3g > %.3g", what, i, e, tol)
		}
		worst = max(worst, e)
	}
	return worst
}

// Check compares rows (Run's: the first len(rows) reference rows) with the
// fixture's reference logits and fails t where they disagree beyond tol:
//
//   - every row: ‖got − ref‖₂ ≤ tol·‖ref‖₂;
//   - every greedy step j among rows: got's argmax is the reference's greedy token,
//     unless the reference's top-2 margin at that row is at most
//     2·tol·‖ref‖₂, the most two logits can move toward each other within
//     the row's bound (each moves by at most ‖got − ref‖∞ ≤ ‖got − ref‖₂).
//
// Teacher forcing makes the second the greedy comparison: with every token
// the same, decoding alone would have produced the reference's tokens.
func Check(t testing.TB, f *Fixture, rows [][]float32, tol float64) Report {
	t.Helper()
	g := &f.Golden
	var r Report
	if len(rows) == 0 || len(rows) > len(f.Logits) {
		t.Errorf("%s: %d rows of logits, want 1 to %d", g.Name, len(rows), len(f.Logits))
		return r
	}
	for i, ref := range f.Logits[:len(rows)] {
		e := RelL2(rows[i], ref)
		if !(e <= tol) {
			t.Errorf("%s: row %d (position %d): ‖got − ref‖₂/‖ref‖₂ = %.3g > %.1e", g.Name, i, i, e, tol)
		}
		if !(e <= r.Worst) {
			r.Worst, r.WorstRow = e, i
		}
	}
	prompt := len(g.PromptIDs)
	r.Greedy = -1
	for j, want := range g.GreedyIDs {
		row := prompt - 1 + j
		if row >= len(rows) {
			break
		}
		r.Steps++
		ref := f.Logits[row]
		got := model.Argmax(rows[row])
		if int32(got) == want {
			continue
		}
		if r.Greedy < 0 {
			r.Greedy = j
		}
		r.Flips = append(r.Flips, j)
		margin := float64(ref[want]) - float64(slices.Max(append(slices.Clone(ref[:want]), ref[want+1:]...)))
		if allowed := 2 * tol * norm2(ref); !(margin <= allowed) {
			t.Errorf("%s: greedy token %d: got %d (logit %.5g), want %d: the reference's top-2 margin %.3g exceeds 2·tol·‖ref‖₂ = %.3g", g.Name, j, got, rows[row][got], want, margin, allowed)
		} else {
			t.Logf("%s: greedy token %d: got %d, want %d: allowed, the reference's top-2 margin %.3g is within 2·tol·‖ref‖₂ = %.3g", g.Name, j, got, want, margin, allowed)
		}
	}
	if r.Greedy < 0 {
		r.Greedy = r.Steps
	}
	return r
}

package eval

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/tokenizer"
)

// TestNeedleProbe checks a probe's construction: the needle sits at its
// depth, the query repeats its binding at the end, and the targets are the
// number's tokens there.
func TestNeedleProbe(t *testing.T) {
	_, tok, _ := tinymodel.Load(t)
	r := rand.New(rand.NewPCG(1, 1))
	text := tok.Encode(string(make([]byte, 5000)), false)
	for i := range text {
		text[i] = 'a' + i%26
	}
	p, err := makeNeedle(tok, text, 100, 600, 0.25, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.tokens) != 600 || p.targets[len(p.targets)-1] != 599 {
		t.Fatalf("probe of %d tokens, targets %v", len(p.tokens), p.targets)
	}
	value := tok.Decode(p.tokens[p.targets[0]:])
	if len(value) < 6 || value[0] != ' ' {
		t.Errorf("value %q, want a space and 5 digits", value)
	}
}

// TestNeedleReference runs needle probes on the reference checkpoint at a
// 1K context: with fp16 KV the model copies the number from most depths.
func TestNeedleReference(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := testmodel.Dir(t)
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(dir, "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(string(text[:200000]), false)
	vs := []PPLVariant{{Name: "fp16", Model: m, KV: kv.MustParseSpec("fp16")}, {Name: "int2", Model: m, KV: kv.MustParseSpec("int2")}}
	res, err := Needle(context.Background(), be, vs, tok, ids, NeedleOptions{Ctx: 1024, Depths: []float64{0.1, 0.5}, Trials: 4, Chunk: 256, PackAll: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%s: recall %v (all %.2f)", r.Name, r.Recall, r.All)
	}
	if res[0].All < 0.5 {
		t.Errorf("fp16 recalls %.2f of the needles at 1K; the probe does not test recall", res[0].All)
	}
}

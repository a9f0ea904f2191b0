package bench

import (
	"math"
	"reflect"
	"testing"

	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// TestDECPick checks the tuner's choice on made-up points: the largest
// k_chunk within the target, at its fastest n_tb; k_chunk 0 when nothing
// fits; and the settings-file form of a report.
func TestDECPick(t *testing.T) {
	s := DECShapeResult{DECShape: DECShape{Name: "q_proj/o_proj", N: 4096, K: 4096}, BaseUS: 100, Points: []DECPoint{
		{KChunk: 8, Blocks: 4, StepUS: 103, OverheadPct: 3},
		{KChunk: 8, Blocks: 16, StepUS: 102, OverheadPct: 2},
		{KChunk: 16, Blocks: 4, StepUS: 106, OverheadPct: 6},
		{KChunk: 16, Blocks: 16, StepUS: 104.5, OverheadPct: 4.5},
		{KChunk: 32, Blocks: 16, StepUS: 109, OverheadPct: 9},
		{KChunk: 32, Blocks: 32, StepUS: 108, OverheadPct: 8},
	}}
	for _, c := range []struct {
		pct       float64
		k, blocks int
	}{{1, 0, 0}, {2.5, 8, 16}, {5, 16, 16}, {10, 32, 32}} {
		p := s.Pick(c.pct)
		if p.KChunk != c.k || p.Blocks != c.blocks || p.SlowdownPct != c.pct {
			t.Errorf("Pick(%g%%) = %+v, want k_chunk %d n_tb %d", c.pct, p, c.k, c.blocks)
		}
	}
	if p := s.Pick(1); p.US != 100 || p.OverheadPct != 0 {
		t.Errorf("no DEC: %+v, want the base time", p)
	}
	rep := &DECReport{Device: "GPU", Mode: "serial", Residual: "int4", Tokens: 1, Shapes: []DECShapeResult{s}}
	tu := rep.Tuning([]float64{2.5, 10}, "test")
	want := model.DECShapeTuning{N: 4096, K: 4096, Layers: []string{"q_proj", "o_proj"}, BaseUS: 100,
		Picks: []model.DECPick{s.Pick(2.5), s.Pick(10)}}
	got := tu.Shapes[0]
	got.Points = nil
	if !reflect.DeepEqual(got, want) || len(tu.Shapes[0].Points) != len(s.Points) {
		t.Errorf("tuning %+v, want %+v", tu.Shapes[0], want)
	}
	c, err := tu.Choices(10)
	if err != nil || c[model.Shape{N: 4096, K: 4096}] != (model.DECChoice{KChunk: 32, Blocks: 32}) {
		t.Errorf("choices at 10%%: %v, %v", c, err)
	}
}

// TestDECBlocksFor checks the clamping of the n_tb list to a shape.
func TestDECBlocksFor(t *testing.T) {
	if got := decBlocksFor(DefaultDECBlocks, wq.Int4, 1024); !reflect.DeepEqual(got, []int{4, 8, 16, 32}) {
		t.Errorf("1024 int4 outputs: %v", got)
	}
	if got := decBlocksFor([]int{1, 2}, wq.FP16, 14336); !reflect.DeepEqual(got, []int{4}) {
		t.Errorf("fp16 14336 outputs from {1, 2}: %v, want the fewest allowed", got)
	}
	shapes, err := PresetConfig("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := DECShapesOf(shapes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 4 || ds[3] != (DECShape{Name: "down_proj", N: 4096, K: 14336}) {
		t.Errorf("llama-3.1-8b shapes: %+v", ds)
	}
}

// TestDECPickListGiven: with the lists made where x is produced
// (DECConfig.ListGiven, a report's Listed) a point's cost is its step with
// the list given where it has one, else its step with the selection.
func TestDECPickListGiven(t *testing.T) {
	s := DECShapeResult{DECShape: DECShape{N: 14336, K: 4096}, BaseUS: 100, Points: []DECPoint{
		{KChunk: 8, Blocks: 1, StepUS: 108, OverheadPct: 8, ListedUS: 103, ListedPct: 3},
		{KChunk: 16, Blocks: 1, StepUS: 112, OverheadPct: 12, ListedUS: 106, ListedPct: 6},
		{KChunk: 32, Blocks: 4, StepUS: 104, OverheadPct: 4}, // no list-given time: its own
	}}
	for _, c := range []struct {
		pct    float64
		listed bool
		k      int
		us     float64
	}{{5, false, 32, 104}, {5, true, 32, 104}, {3.5, true, 8, 103}, {3.5, false, 0, 100}, {7, true, 32, 104}, {10, false, 32, 104}} {
		if p := s.pick(c.pct, c.listed); p.KChunk != c.k || p.US != c.us {
			t.Errorf("pick(%g%%, listed %v) = %+v, want k_chunk %d at %g us", c.pct, c.listed, p, c.k, c.us)
		}
	}
	s.Points = s.Points[:2]
	rep := &DECReport{Listed: true, Shapes: []DECShapeResult{s}}
	if p := rep.Tuning([]float64{5}, "test").Shapes[0].Picks[0]; p.KChunk != 8 || p.OverheadPct != 3 {
		t.Errorf("a listed report's pick at 5%%: %+v, want k_chunk 8 at +3%%", p)
	}
	if p := s.Pick(5); p.KChunk != 0 {
		t.Errorf("Pick(5%%) without the lists: %+v, want k_chunk 0", p)
	}
	for _, c := range []struct {
		p      DECPoint
		listed bool
		want   float64
	}{{s.Points[0], true, 3}, {s.Points[0], false, 8}, {DECPoint{OverheadPct: 4}, true, 4}} {
		if got := c.p.cost(c.listed); got != c.want {
			t.Errorf("%+v cost(listed %v) = %g, want %g", c.p, c.listed, got, c.want)
		}
	}
}

// TestDECListShare: a Llama shape's GEMV carries its layers' mean share of
// the lists it reads (q, k and v share the attention norm's list, gate and
// up the MLP norm's; o and down have one each); an unknown name a whole
// norm list.
func TestDECListShare(t *testing.T) {
	const eps = 1e-12
	for _, c := range []struct {
		name string
		want map[string]float64
	}{
		{"q_proj/o_proj", map[string]float64{decListNorm: 1.0 / 6, decListOut: 0.5}},
		{"k_proj/v_proj", map[string]float64{decListNorm: 1.0 / 3}},
		{"gate_proj/up_proj", map[string]float64{decListNorm: 0.5}},
		{"down_proj", map[string]float64{decListGLU: 1}},
		{"4096x4096", map[string]float64{decListNorm: 1}},
	} {
		got := decListShare(c.name)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for p, w := range c.want {
			if math.Abs(got[p]-w) > eps {
				t.Errorf("%s: %s share %g, want %g", c.name, p, got[p], w)
			}
		}
	}
}

// TestDECPickListCost: a list-given point's cost is its ListedPct (which
// includes its lists' ranking, ListUS) and its time ListedUS + ListUS.
func TestDECPickListCost(t *testing.T) {
	s := DECShapeResult{DECShape: DECShape{N: 4096, K: 4096}, BaseUS: 10, Points: []DECPoint{
		{KChunk: 4, StepUS: 12, OverheadPct: 20, ListedUS: 10.2, ListUS: 0.2, ListedPct: 4},
		{KChunk: 8, StepUS: 12.5, OverheadPct: 25, ListedUS: 10.4, ListUS: 0.3, ListedPct: 7},
	}}
	if p := s.pick(5, true); p.KChunk != 4 || math.Abs(p.US-10.4) > 1e-9 || p.OverheadPct != 4 {
		t.Errorf("pick(5%%) = %+v, want k_chunk 4 at 10.4 us (+4%%)", p)
	}
	if p := s.pick(3, true); p.KChunk != 0 || p.US != 10 {
		t.Errorf("pick(3%%) = %+v, want off", p)
	}
}

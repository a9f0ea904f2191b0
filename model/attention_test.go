package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
)

func TestBatchValidate(t *testing.T) {
	ok := func() Batch {
		var b Batch
		b.Add(3, 0, 1, 2, 3)
		b.Add(9, 7, 4)
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(*Batch)
		want string
	}{
		{"valid", func(*Batch) {}, ""},
		{"empty", func(b *Batch) { *b = Batch{} }, "empty batch"},
		{"gap", func(b *Batch) { b.Seqs[1].Start = 4 }, "starts at token 4, want 3"},
		{"zero length", func(b *Batch) { b.Seqs[1].Len = 0 }, "has 0 tokens"},
		{"negative position", func(b *Batch) { b.Seqs[0].Pos = -1 }, "out of range"},
		{"huge position", func(b *Batch) { b.Seqs[0].Pos = math.MaxInt32 }, "out of range"},
		{"duplicate id", func(b *Batch) { b.Seqs[1].ID = 3 }, "id 3 appears twice"},
		{"uncovered token", func(b *Batch) { b.Tokens = append(b.Tokens, 5) }, "cover 4 tokens, batch has 5"},
		{"token out of vocabulary", func(b *Batch) { b.Tokens[2] = 10 }, "id 10, outside the vocabulary [0, 10)"},
		{"negative token", func(b *Batch) { b.Tokens[0] = -1 }, "id -1"},
	} {
		b := ok()
		tc.edit(&b)
		err := b.Validate(10)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	b := ok()
	if got := b.Positions(); !slices.Equal(got, []int32{0, 1, 2, 7}) {
		t.Errorf("Positions = %v", got)
	}
	if got := b.OutputRows(); !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("OutputRows = %v", got)
	}
	b.AllLogits = true
	if got := b.OutputRows(); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Errorf("OutputRows(all) = %v", got)
	}
}

// refAttention is the float64 attention of one query head over cached keys
// and values [L][Hkv·D] for a query at position pos.
func refAttention(q []float32, K, V [][]float32, kh, D, pos, window int) []float64 {
	lo := 0
	if window > 0 {
		lo = max(0, pos-window+1)
	}
	scores := make([]float64, pos+1)
	m := math.Inf(-1)
	for j := lo; j <= pos; j++ {
		var s float64
		for d := range D {
			s += float64(q[d]) * float64(K[j][kh*D+d])
		}
		scores[j] = s / math.Sqrt(float64(D))
		m = max(m, scores[j])
	}
	var sum float64
	for j := lo; j <= pos; j++ {
		scores[j] = math.Exp(scores[j] - m)
		sum += scores[j]
	}
	out := make([]float64, D)
	for j := lo; j <= pos; j++ {
		for d := range D {
			out[d] += scores[j] / sum * float64(V[j][kh*D+d])
		}
	}
	return out
}

// TestDenseCache runs mixed prefill and decode batches of several sequences
// through a GQA cache with a full and a sliding-window layer and checks
// every output against refAttention.
func TestDenseCache(t *testing.T) {
	const Hq, Hkv, D = 4, 2, 8
	cfg := &Config{Layers: 2, Heads: Hq, KVHeads: Hkv, HeadDim: D, LayerWindows: []int{0, 3}}
	be := cpu.New(2)
	cache := NewDenseCache(be, cfg)
	r := rand.New(rand.NewPCG(1, 2))
	// history[layer][seq] = all K and V rows appended so far
	type hist struct{ k, v [][]float32 }
	history := [2]map[int]*hist{{}, {}}

	steps := []map[int]int{ // seq id -> new tokens, in order
		{1: 5, 2: 3},
		{1: 1, 2: 1, 3: 4},
		{2: 1},
		{1: 1, 3: 1, 2: 2},
	}
	for si, step := range steps {
		var b Batch
		for _, id := range []int{1, 2, 3} {
			n, ok := step[id]
			if !ok {
				continue
			}
			b.Add(id, cache.Len(id), make([]int32, n)...)
		}
		T := len(b.Tokens)
		for layer := range 2 {
			qv := randSlice(r, T*Hq*D)
			kv := randSlice(r, T*Hkv*D)
			vv := randSlice(r, T*Hkv*D)
			q := upload(t, be, qv, T, Hq*D)
			k := upload(t, be, kv, T, Hkv*D)
			v := upload(t, be, vv, T, Hkv*D)
			out := upload(t, be, nanSlice(T*Hq*D), T, Hq*D)
			if err := cache.Attend(layer, &b, q, k, v, out); err != nil {
				t.Fatalf("step %d layer %d: %v", si, layer, err)
			}
			got := make([]float32, T*Hq*D)
			if err := be.Download(got, out); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Seqs {
				h := history[layer][s.ID]
				if h == nil {
					h = &hist{}
					history[layer][s.ID] = h
				}
				for i := range s.Len {
					row := s.Start + i
					h.k = append(h.k, kv[row*Hkv*D:(row+1)*Hkv*D])
					h.v = append(h.v, vv[row*Hkv*D:(row+1)*Hkv*D])
				}
				for i := range s.Len {
					row := s.Start + i
					for hh := range Hq {
						want := refAttention(qv[row*Hq*D+hh*D:row*Hq*D+(hh+1)*D], h.k, h.v, hh/(Hq/Hkv), D, s.Pos+i, cfg.LayerWindows[layer])
						for d := range D {
							g := got[row*Hq*D+hh*D+d]
							if math.Abs(float64(g)-want[d]) > 1e-6*(1+math.Abs(want[d])) {
								t.Fatalf("step %d layer %d seq %d token %d head %d dim %d: %v, want %v", si, layer, s.ID, i, hh, d, g, want[d])
							}
						}
					}
				}
			}
		}
	}
	if got := cache.Len(1); got != 7 {
		t.Errorf("Len(1) = %d, want 7", got)
	}

	// A batch that does not continue the cache is rejected before anything
	// changes.
	var b Batch
	b.Add(2, cache.Len(2), 0)
	b.Add(1, 3, 0) // the cache holds 7 tokens of sequence 1
	x := upload(t, be, make([]float32, 2*Hq*D), 2, Hq*D)
	kv := upload(t, be, make([]float32, 2*Hkv*D), 2, Hkv*D)
	err := cache.Attend(0, &b, x, kv, kv, x)
	if err == nil || !strings.Contains(err.Error(), "sequence 1 continues at position 3, but the cache holds 7") {
		t.Fatalf("Attend with a wrong position: %v", err)
	}
	if cache.Len(2) != 7 {
		t.Errorf("failed Attend changed sequence 2: Len = %d", cache.Len(2))
	}
	if err := cache.Attend(2, &b, x, kv, kv, x); err == nil || !strings.Contains(err.Error(), "layer 2 out of range") {
		t.Errorf("Attend at layer 2: %v", err)
	}
	if err := cache.Attend(0, &b, kv, kv, kv, x); err == nil || !strings.Contains(err.Error(), "q has shape") {
		t.Errorf("Attend with a wrong q shape: %v", err)
	}

	if err := cache.Truncate(1, 3); err != nil {
		t.Fatal(err)
	}
	if cache.Len(1) != 3 {
		t.Errorf("after Truncate(1, 3): Len = %d", cache.Len(1))
	}
	if err := cache.Truncate(1, 4); err == nil {
		t.Error("Truncate beyond the length succeeded")
	}
	cache.Remove(1)
	if cache.Len(1) != 0 {
		t.Errorf("after Remove: Len = %d", cache.Len(1))
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func nanSlice(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func upload(t *testing.T, be backend.Backend, v []float32, shape ...int) backend.Tensor {
	t.Helper()
	x, err := be.Alloc(backend.F32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Upload(x, v); err != nil {
		t.Fatal(err)
	}
	return x
}

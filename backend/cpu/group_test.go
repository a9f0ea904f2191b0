package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

// TestLinearGroup checks that LinearGroup gives bitwise the results of one
// Linear per weight (biases on some layers) and refuses malformed calls.
func TestLinearGroup(t *testing.T) {
	b := New(2)
	r := rand.New(rand.NewPCG(31, 32))
	const T, K = 5, 72
	Ns := []int{40, 9, 64}
	x := mustTensor(t, b, randVec(r, T*K), T, K)
	var ws, bs []backend.Weight
	var grouped, alone []backend.Tensor
	for i, N := range Ns {
		ws = append(ws, mustWeight(t, b, "w", randVec(r, N*K), N, K))
		var bias backend.Weight
		if i != 1 {
			bias = mustWeight(t, b, "b", randVec(r, N), N)
		}
		bs = append(bs, bias)
		grouped = append(grouped, poisoned(t, b, T, N))
		alone = append(alone, poisoned(t, b, T, N))
	}
	groupMatchesAlone(t, b, "", grouped, alone, x, ws, bs)
	for _, bad := range []struct {
		name   string
		dsts   []backend.Tensor
		biases []backend.Weight
	}{
		{"two outputs, three weights", grouped[:2], nil},
		{"one bias", grouped, bs[:1]},
		{"an output twice", []backend.Tensor{grouped[0], grouped[1], grouped[0]}, nil},
		{"the input as output", []backend.Tensor{grouped[0], x, grouped[2]}, nil},
	} {
		b.LinearGroup(bad.dsts, x, ws, bad.biases)
		if err := b.Sync(); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

// TestLinearGroupQuant checks that LinearGroup over quantized weights (one
// quantization of x shared by the parts on an integer path; DEC on a part;
// biases on some) gives bitwise the results of one Linear per weight, at
// one and several tokens and one and two threads, and that a group mixing
// formats (each weight then runs its own Linear) does too.
func TestLinearGroupQuant(t *testing.T) {
	const K = 512
	Ns := []int{128, 9, 40} // part 0 carries DEC: its residual's groups of 128 outputs
	for _, tc := range []struct {
		name  string
		elems []wq.Elem // one per part; nil: a float32 weight
	}{
		{"int4", []wq.Elem{wq.Int4, wq.Int4, wq.Int4}},
		{"int3", []wq.Elem{wq.Int3, wq.Int3, wq.Int3}},
		{"int8", []wq.Elem{wq.Int8, wq.Int8, wq.Int8}},
		{"mixed", []wq.Elem{wq.Int4, wq.Int3, 0}},
		{"mixed8", []wq.Elem{wq.Int8, wq.Int4, wq.Int8}},
	} {
		for _, threads := range []int{1, 2} {
			for _, T := range []int{1, 5} {
				b := New(threads)
				r := rand.New(rand.NewPCG(uint64(41+T), uint64(threads)))
				x := mustTensor(t, b, randVec(r, T*K), T, K)
				var ws, bs []backend.Weight
				var grouped, alone []backend.Tensor
				for i, N := range Ns {
					wv := llmWeight(r, N, K)
					if tc.elems[i] == 0 {
						ws = append(ws, mustWeight(t, b, "w", wv, N, K))
					} else {
						m, err := wq.Quantize(tc.elems[i], 128, N, K, wv)
						if err != nil {
							t.Fatal(err)
						}
						var dec *wq.DEC
						if i == 0 {
							res, err := wq.NewResidual(wv, m, wq.Int4)
							if err != nil {
								t.Fatal(err)
							}
							dec = &wq.DEC{R: res, KChunk: 16}
						}
						ws = append(ws, mustQuant(t, b, m, dec))
					}
					var bias backend.Weight
					if i != 1 {
						bias = mustWeight(t, b, "b", randVec(r, N), N)
					}
					bs = append(bs, bias)
					grouped = append(grouped, poisoned(t, b, T, N))
					alone = append(alone, poisoned(t, b, T, N))
				}
				groupMatchesAlone(t, b, fmt.Sprintf("%s T=%d threads=%d: ", tc.name, T, threads), grouped, alone, x, ws, bs)
			}
		}
	}
}

// groupMatchesAlone runs LinearGroup into grouped and one Linear per
// weight into alone, and fails unless every output is bitwise the same
// (and not NaN: the outputs start poisoned).
func groupMatchesAlone(t *testing.T, b *Backend, label string, grouped, alone []backend.Tensor, x backend.Tensor, ws, bs []backend.Weight) {
	t.Helper()
	b.LinearGroup(grouped, x, ws, bs)
	for i := range ws {
		b.Linear(alone[i], x, ws[i], bs[i])
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("%s%v", label, err)
	}
	for i := range ws {
		g, a := download(t, b, grouped[i]), download(t, b, alone[i])
		for j := range g {
			if math.Float32bits(g[j]) != math.Float32bits(a[j]) || g[j] != g[j] {
				t.Fatalf("%slayer %d: element %d = %g grouped, %g alone", label, i, j, g[j], a[j])
			}
		}
	}
}

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
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
	b.LinearGroup(grouped, x, ws, bs)
	for i := range ws {
		b.Linear(alone[i], x, ws[i], bs[i])
	}
	for i := range ws {
		g, a := download(t, b, grouped[i]), download(t, b, alone[i])
		for j := range g {
			if math.Float32bits(g[j]) != math.Float32bits(a[j]) || g[j] != g[j] {
				t.Fatalf("layer %d: element %d = %g grouped, %g alone", i, j, g[j], a[j])
			}
		}
	}
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

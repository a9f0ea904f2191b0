package gpu_test

import (
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/half"
)

// TestQueuedUploads: UploadInt32's copy is queued with the ops (no
// hand-off of its own), so two uploads into one tensor between flushes
// must each reach the ops queued after them, and the caller may reuse its
// slice at once. An Embedding of every id, with the ids re-uploaded before
// each, must gather the row of the id uploaded just before it: exactly the
// table's fp16 value, whichever segment of the queue each op falls in
// (more ops than a flush segment).
func TestQueuedUploads(t *testing.T) {
	be := gpuBackend(t)
	const V, K, rounds = 64, 96, 80
	tab := make([]float32, V*K)
	for i := range tab {
		tab[i] = float32(i%997) / 128
	}
	w, err := be.LoadWeight("embed", backend.F32, []int{V, K}, encode(backend.F32, tab))
	if err != nil {
		t.Fatal(err)
	}
	defer be.FreeWeight(w)
	ids, err := be.Alloc(backend.I32, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(ids)
	out := make([]backend.Tensor, rounds)
	src := []int32{0}
	for r := range rounds {
		if out[r], err = be.Alloc(backend.F32, 1, K); err != nil {
			t.Fatal(err)
		}
		defer be.Free(out[r])
		src[0] = int32(r*7) % V // the same slice every time
		if err := be.UploadInt32(ids, src); err != nil {
			t.Fatal(err)
		}
		be.Embedding(out[r], w, ids)
	}
	for r := range rounds {
		got := make([]float32, K)
		if err := be.Download(got, out[r]); err != nil {
			t.Fatal(err)
		}
		id := r * 7 % V
		for k := range K {
			want := half.ToFloat32(half.FromFloat32(tab[id*K+k]))
			if math.Float32bits(got[k]) != math.Float32bits(want) {
				t.Fatalf("embedding %d (id %d): [%d] = %v, want %v", r, id, k, got[k], want)
			}
		}
	}
}

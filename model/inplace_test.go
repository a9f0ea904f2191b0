package model

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// TestLoadInPlace checks the lifetimes of weights read in place: Load's
// model keeps the mapped checkpoint until Close; LoadCheckpoint's caller may
// close a mapped checkpoint right after loading (the backend got copies);
// and all three give the same logits bit for bit. A wrong lifetime reads an
// unmapped page and crashes the test.
func TestLoadInPlace(t *testing.T) {
	fam := synthFamilies[0]
	dir := t.TempDir()
	writeSynthetic(t, dir, fam.config, fam.dtype, 77, nil)
	tokens := []int32{1, 17, 42, 99, 0, 5}
	logits := func(m Model) []float32 {
		t.Helper()
		var b Batch
		b.Add(0, 0, tokens...)
		b.AllLogits = true
		out, err := m.Forward(&b, NewDenseCache(m.(*Llama).be, m.Config()))
		if err != nil {
			t.Fatal(err)
		}
		return out.Data
	}
	be := cpu.New(2)
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ck := m.(*Llama).ck; ck == nil || !ck.Mapped() {
		t.Fatalf("Load's model holds checkpoint %v, want the mapped checkpoint", ck)
	}
	want := logits(m)

	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := LoadCheckpoint(cfg, ck, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ck.Close(); err != nil { // unmaps: m2 must not read it
		t.Fatal(err)
	}
	if m2.(*Llama).ck != nil {
		t.Error("LoadCheckpoint's model took the caller's checkpoint")
	}
	got := logits(m2)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("logit %d: %v after the caller closed the checkpoint, %v from Load", i, got[i], want[i])
		}
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.(*Llama).ck != nil {
		t.Error("Close left the checkpoint open")
	}
	// Closing twice is harmless.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWeightMemoryStoredFormat checks that a model's weight memory names the
// format its matrices were kept in: the checkpoint's dtype for bf16, fp16 and
// fp32 checkpoints (the stats line once said "fp16" for every one).
func TestWeightMemoryStoredFormat(t *testing.T) {
	want := map[safetensors.DType]string{safetensors.BF16: "bf16", safetensors.F16: "fp16", safetensors.F32: "fp32"}
	seen := map[safetensors.DType]bool{}
	for i, fam := range synthFamilies {
		if seen[fam.dtype] || want[fam.dtype] == "" {
			continue
		}
		seen[fam.dtype] = true
		dir := t.TempDir()
		writeSynthetic(t, dir, fam.config, fam.dtype, uint64(300+i), nil)
		m, err := Load(dir, cpu.New(1), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if wm := WeightMemoryOf(m); wm.Format != want[fam.dtype] {
			t.Errorf("%s: weight memory %+v, want format %q", fam.name, wm, want[fam.dtype])
		}
		m.Close()
	}
	if len(seen) != len(want) {
		t.Errorf("the synthetic families hold dtypes %v, want all of %v", seen, want)
	}
}

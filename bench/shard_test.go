package bench

import (
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

func presetConfig(t *testing.T, name string) *model.Config {
	t.Helper()
	c, err := model.ParseConfig([]byte(Presets[name]))
	if err != nil {
		t.Fatalf("preset %s: %v", name, err)
	}
	return c
}

func mustWeights(t *testing.T, s string) wq.Spec {
	t.Helper()
	w, err := wq.ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustFormat(t *testing.T, spec string, d int) kv.Format {
	t.Helper()
	f, err := kv.MustParseSpec(spec).Resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRankOf checks what one rank holds against numbers worked out by hand
// from the shapes (not from the code's formula).
func TestRankOf(t *testing.T) {
	c8 := presetConfig(t, "llama-3.1-8b")
	fp16 := mustWeights(t, "fp16")
	// Llama-3.1-8B, fp16: per layer q 4096x4096, k and v 1024x4096, o
	// 4096x4096, gate/up/down 14336x4096: 218,103,808 weights, 436,207,616
	// bytes; 32 layers 13,958,643,712 bytes; lm_head 128256x4096x2 =
	// 1,050,673,152.
	for _, tc := range []struct {
		tp                          int
		heads, kvHeads, rep, inter  int
		vocab                       int
		readBytes                   int64
		embeddingAndNormsBytesExtra int64
	}{
		{1, 32, 8, 1, 14336, 128256, 13_958_643_712 + 1_050_673_152, 1_050_673_152 + 4*65*4096},
		// Everything halves: the vocabulary 128256 splits evenly.
		{2, 16, 4, 1, 7168, 64128, (13_958_643_712 + 1_050_673_152) / 2, 1_050_673_152/2 + 4*65*4096},
		// 16 ranks > 8 KV heads: each KV head on 2 ranks, k and v
		// 128x4096 per rank (not 64x4096).
		{16, 2, 1, 2, 896, 8016, 32*2*(256*4096+2*128*4096+4096*256+3*896*4096) + 2*8016*4096, 2*8016*4096 + 4*65*4096},
	} {
		r, err := RankOf(c8, fp16, tc.tp)
		if err != nil {
			t.Fatalf("RankOf(8B, TP %d): %v", tc.tp, err)
		}
		if r.Heads != tc.heads || r.KVHeads != tc.kvHeads || r.KVReplicas != tc.rep || r.Intermediate != tc.inter || r.Vocab != tc.vocab {
			t.Errorf("RankOf(8B, TP %d) = %+v, want heads %d, KV heads %d (x%d), intermediate %d, vocab %d", tc.tp, r, tc.heads, tc.kvHeads, tc.rep, tc.inter, tc.vocab)
		}
		if r.WeightBytesRead != tc.readBytes {
			t.Errorf("RankOf(8B, TP %d): %d weight bytes read per step, want %d", tc.tp, r.WeightBytesRead, tc.readBytes)
		}
		if want := tc.readBytes + tc.embeddingAndNormsBytesExtra; r.WeightMemory != want {
			t.Errorf("RankOf(8B, TP %d): weight memory %d, want %d (untied embedding shard and 65 norms of 4096 float32)", tc.tp, r.WeightMemory, want)
		}
	}
	// The KV cache per rank halves with the KV heads at TP 2.
	f := mustFormat(t, "int4", 128)
	r1, _ := RankOf(c8, fp16, 1)
	r2, _ := RankOf(c8, fp16, 2)
	if a, b := r1.SeqBytes(c8, f, 32<<10), r2.SeqBytes(c8, f, 32<<10); a != 2*b {
		t.Errorf("8B, one 32K int4 sequence: %d bytes on one GPU, %d per GPU at TP 2; want half", a, b)
	}
	if a, b := r1.KVBytesRead(c8, f, 32<<10), r2.KVBytesRead(c8, f, 32<<10); a != 2*b || a != 32*8*f.ReadBytes(32<<10) {
		t.Errorf("8B, 32K int4: %d KV bytes read on one GPU, %d per GPU at TP 2", a, b)
	}
	// int4 weights: a row of K=4096 in groups of 128 is 4096/2 bytes of
	// codes plus a scale pair per group (wq.Bytes); the split keeps groups
	// whole (o's K 2048, down's 7168 at TP 2).
	// The head: int8 (wq.DefaultHead) at TP 1, in its groups; 16-bit at TP
	// 2, which splits it by vocabulary (model.Load keeps it so).
	w4 := mustWeights(t, "int4:head=fp16")
	q1, _ := RankOf(c8, w4, 1)
	q2, err := RankOf(c8, w4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if 2*q2.WeightBytesRead != q1.WeightBytesRead {
		t.Errorf("8B int4: %d bytes read at TP 1, %d per GPU at TP 2; want half", q1.WeightBytesRead, q2.WeightBytesRead)
	}
	h1, _ := RankOf(c8, mustWeights(t, "int4"), 1)
	h2, _ := RankOf(c8, mustWeights(t, "int4"), 2)
	V, H := int64(c8.Vocab), int64(c8.Hidden)
	if want := q1.WeightBytesRead - 2*V*H + V*H + V*H/128*4; h1.WeightBytesRead != want || h1.WeightMemory != h1.WeightBytesRead+2*V*H+4*65*H {
		t.Errorf("8B int4, int8 head: %d bytes read (memory %d), want %d", h1.WeightBytesRead, h1.WeightMemory, want)
	}
	if h2 != q2 {
		t.Errorf("8B int4 at TP 2: the int8 head's rank %+v, the 16-bit head's %+v; want the same", h2, q2)
	}
}

// TestRankOfRefuses checks the splits that cannot be made, each named by
// its numbers.
func TestRankOfRefuses(t *testing.T) {
	c8 := presetConfig(t, "llama-3.1-8b")
	odd := *c8
	odd.KVHeads = 3
	groups := *c8
	groups.Heads, groups.KVHeads, groups.HeadDim, groups.Intermediate = 16, 8, 64, 1536
	for _, tc := range []struct {
		c    *model.Config
		w    string
		tp   int
		want string
	}{
		{c8, "fp16", 3, "does not divide the model's 32 query heads"},
		{c8, "fp16", 0, "at least 1"},
		{&odd, "fp16", 2, "3 KV heads: one must divide the other"},
		{&groups, "int4", 8, "down_proj's 192 input columns"},
	} {
		_, err := RankOf(tc.c, mustWeights(t, tc.w), tc.tp)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RankOf(TP %d, %s): %v, want an error saying %q", tc.tp, tc.w, err, tc.want)
		}
	}
	if _, err := RankOf(&groups, mustWeights(t, "fp16"), 8); err != nil {
		t.Errorf("fp16 weights split anywhere: %v", err)
	}
}

// TestFits: the 70B shape needs two 78 GiB GPUs in fp16 (141 GB of
// weights), one in int4; the 8B shape fits one GPU either way.
func TestFits(t *testing.T) {
	c70, c8 := presetConfig(t, "llama-3.1-70b"), presetConfig(t, "llama-3.1-8b")
	f := mustFormat(t, "int4", 128)
	fp16, w4 := mustWeights(t, "fp16"), mustWeights(t, "int4")
	for _, tc := range []struct {
		name string
		c    *model.Config
		w    wq.Spec
		want int
	}{
		{"70b fp16", c70, fp16, 2}, {"70b int4", c70, w4, 1}, {"8b fp16", c8, fp16, 1},
	} {
		if got := MinTP(tc.c, tc.w, f, 32<<10, TableGPUBytes); got != tc.want {
			t.Errorf("MinTP(%s, one 32K int4 sequence, 78 GiB) = %d, want %d", tc.name, got, tc.want)
		}
	}
	// 70B fp16 at TP 2: 70.55 GB of weights per GPU (65.7 GiB) plus the
	// sequence and the reserve fit 78 GiB; at TP 1 they do not.
	r1, _ := RankOf(c70, fp16, 1)
	if ok, need := r1.Fits(c70, f, 32<<10, TableGPUBytes); ok || need < 131<<30 {
		t.Errorf("70B fp16 on one GPU: fits %v, needs %.1f GiB", ok, gib(need))
	}
	err := FitError("llama-3.1-70b", c70, fp16, f, 32<<10, r1, TableGPUBytes)
	if err == nil || !strings.Contains(err.Error(), "needs --tp 2") || !strings.Contains(err.Error(), "at --tp 1") {
		t.Errorf("FitError(70B fp16, TP 1): %v, want one saying needs --tp 2", err)
	}
	r2, _ := RankOf(c70, fp16, 2)
	if ok, need := r2.Fits(c70, f, 32<<10, TableGPUBytes); !ok {
		t.Errorf("70B fp16 at TP 2: needs %.1f GiB per GPU, more than 78", gib(need))
	}
	if tp := MinTP(c70, fp16, f, 32<<10, 16<<30); tp != 0 {
		t.Errorf("70B fp16 on 16 GiB GPUs: MinTP %d, want 0 (8 ranks hold 17.6 GB each)", tp)
	}
	err = FitError("llama-3.1-70b", c70, fp16, f, 32<<10, r2, 16<<30)
	if err == nil || !strings.Contains(err.Error(), "does not fit at any --tp") {
		t.Errorf("FitError(70B fp16, 16 GiB): %v", err)
	}
}

// TestPresetTable checks the rows of the table bench model's help prints.
func TestPresetTable(t *testing.T) {
	var b strings.Builder
	if err := WritePresetTable(&b, TableGPUBytes); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 {
			rows[strings.TrimSpace(f[1])] = line
		}
	}
	for name, want := range map[string][]string{
		"llama-3.1-70b": {"| 80 | 8192 | 64/8 | 28672 | 128256 | 70.6B | 141.1 GB |", "| needs --tp 2 | one GPU |"},
		"llama-3.1-8b":  {"| 32 | 4096 | 32/8 | 14336 | 128256 | 8.0B | 16.1 GB |", "| 128 KiB, 34 KiB | one GPU | one GPU |"},
		"llama-3.2-1b":  {"| 16 | 2048 | 32/8 | 8192 |"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[name], w) {
				t.Errorf("preset table, %s: %q, want it to contain %q\n%s", name, rows[name], w, b.String())
			}
		}
	}
}

package model

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"github.com/bitdecode/bitdecode/wq"
)

// plainBackend hides the CPU backend's low-bit Linear, as a backend without
// one would look to the loader.
type plainBackend struct{ backend.Backend }

// TestLoadQuantized loads the reference checkpoint with int4 weights, on the
// CPU backend's packed paths and through the dequantize-to-float32 fallback:
// the float packed orders compute float32 sums of the same products x·ŵ as
// the canonical order of backend/cpu, so the logits (int4 and int8 on their
// float paths) agree to float32 rounding; the default integer paths (int4,
// int8 with AVX-512 VNNI) round x to 16-bit codes first and agree within
// that rounding's bound;
// all far below the formats' own error, and pick the same tokens.
// The accounting must match the format; DEC and GPTQ without what they need
// must fail clearly.
func TestLoadQuantized(t *testing.T) {
	dir := testmodel.Dir(t)
	spec, err := wq.ParseSpec("int4")
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	cache := map[string]*wq.Matrix{}
	packed, err := Load(dir, be, LoadOptions{Weights: spec, Quantized: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer packed.Close()
	var log bytes.Buffer
	pb := plainBackend{be}
	if n := len(cache); n != 7*packed.Config().Layers+1 {
		t.Errorf("%d matrices cached, want 7 per layer and the head", n)
	}
	fallback, err := Load(dir, pb, LoadOptions{Weights: spec, Log: &log, Quantized: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer fallback.Close()
	if !strings.Contains(log.String(), "dequantized to float32") || strings.Count(log.String(), "\n") != 1 {
		t.Errorf("fallback log %q: want one line saying the weights are dequantized", log.String())
	}
	cfg := packed.Config()
	ids := []int32{5, 100, 2000, 7, 42, 8000, 3}
	logits := func(m Model) []float32 {
		var b Batch
		b.Add(0, 0, ids...)
		b.AllLogits = true
		lg, err := m.Forward(&b, noAttention{})
		if err != nil {
			t.Fatal(err)
		}
		return lg.Data
	}
	// The default int4 path multiplies by integer dot products with x
	// rounded to 16-bit codes per block of 8 channels (backend/cpu
	// qint4.go): half a step is 2⁻¹⁷ of the block's largest |x| (2-3 times
	// a typical |x|), against the float sum's ~36 roundings of 2⁻²⁴ at K =
	// 512, so about ten times the float orders' difference per layer.
	compareLogits(t, "int4 (integer)", logits(packed), logits(fallback), cfg.Vocab, 1e-4)
	// The float packed order (BITDECODE_CPU_INT4=float): a few hundred
	// float32 roundings of the largest logit, two summation orders through
	// the layers, nowhere near the formats' own error.
	setInt4 := func(v string) {
		t.Helper()
		if err := backend.ConfigureDevices(func(k string) (string, bool) { return v, v != "" && k == cpu.EnvInt4 }); err != nil {
			t.Fatal(err)
		}
	}
	setInt4("float")
	pf, err := Load(dir, be, LoadOptions{Weights: spec, Quantized: cache})
	setInt4("")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	compareLogits(t, "int4 (float)", logits(pf), logits(fallback), cfg.Vocab, 1e-5)
	spec8, err := wq.ParseSpec("int8")
	if err != nil {
		t.Fatal(err)
	}
	p8, err := Load(dir, be, LoadOptions{Weights: spec8})
	if err != nil {
		t.Fatal(err)
	}
	defer p8.Close()
	f8, err := Load(dir, pb, LoadOptions{Weights: spec8})
	if err != nil {
		t.Fatal(err)
	}
	defer f8.Close()
	// int8 takes the integer path on CPUs with AVX-512 VNNI (qint8.go: x
	// rounded as int4's), the float packed order elsewhere.
	compareLogits(t, "int8", logits(p8), logits(f8), cfg.Vocab, 1e-4)
	setInt4("float")
	p8f, err := Load(dir, be, LoadOptions{Weights: spec8})
	setInt4("")
	if err != nil {
		t.Fatal(err)
	}
	defer p8f.Close()
	compareLogits(t, "int8 (float)", logits(p8f), logits(f8), cfg.Vocab, 1e-5)

	wm := WeightMemoryOf(packed)
	H, I, L := int64(cfg.Hidden), int64(cfg.Intermediate), int64(cfg.Layers)
	QD, KVD := int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim)
	linear := (QD*H + 2*KVD*H + H*QD + 3*H*I) * L
	other := int64(cfg.Vocab)*H + H*(2*L+1) // tied embedding, norms
	// The tied head in int8 (wq.DefaultHead), which on the CPU (a
	// backend.QuantEmbedder) serves the token lookup too: no 16-bit
	// embedding kept.
	head := int64(cfg.Vocab) * H
	want := linear/2 + linear/128*4 + 2*(other-head) + head + head/128*4
	if wm.Bytes != want || wm.FP16Bytes != 2*(linear+other) || wm.Format != "int4:g128:rtn:head=int8" {
		t.Errorf("weight memory %+v, want %d bytes (fp16 %d)", wm, want, 2*(linear+other))
	}
	if l := packed.(*Llama); l.TiedHead == nil || l.Output != l.TiedHead || l.TokenEmbedding != l.TiedHead {
		t.Error("int4 weights: the tied LM head and the token lookup are not the embedding's quantized copy")
	}
	if l := fallback.(*Llama); l.TiedHead == nil || l.Output != l.TiedHead || l.TokenEmbedding == l.TiedHead {
		t.Error("int4 weights without a low-bit Linear: want the head's dequantized copy and a separate embedding (of its values)")
	}
	spec16, err := wq.ParseSpec("int4:head=fp16")
	if err != nil {
		t.Fatal(err)
	}
	p16, err := Load(dir, be, LoadOptions{Weights: spec16})
	if err != nil {
		t.Fatal(err)
	}
	defer p16.Close()
	if l := p16.(*Llama); l.Output != l.TokenEmbedding || l.TiedHead != nil {
		t.Error("head=fp16: the LM head is not the embedding")
	}
	if wm := WeightMemoryOf(p16); wm.Bytes != linear/2+linear/128*4+2*other || wm.Format != "int4:g128:rtn:head=fp16" {
		t.Errorf("head=fp16: weight memory %+v, want %d bytes", wm, linear/2+linear/128*4+2*other)
	}
	// The int8 head (and lookup) against the 16-bit ones: each weight
	// rounded by up to 1/510 of its group's range (measured: 3.3e-3 to
	// 6.6e-3 of the row's largest logit), the same greedy tokens.
	compareLogits(t, "head int8 vs fp16", logits(packed), logits(p16), cfg.Vocab, 1e-2)

	if _, err := Load(dir, pb, LoadOptions{Weights: spec, DECKChunk: 16}); err == nil || !strings.Contains(err.Error(), "DEC") {
		t.Errorf("DEC on a backend without a low-bit Linear: err = %v", err)
	}
	g, _ := wq.ParseSpec("int4:gptq")
	if _, err := Load(dir, be, LoadOptions{Weights: g}); err == nil || !strings.Contains(err.Error(), "--calib") {
		t.Errorf("GPTQ without calibration: err = %v", err)
	}
	if _, err := Load(dir, be, LoadOptions{DECKChunk: 8}); err == nil {
		t.Error("DEC with fp16 weights was accepted")
	}
}

// compareLogits checks that every row of a and c agrees within rel times
// the row's largest |logit| and picks the same token.
func compareLogits(t *testing.T, what string, a, c []float32, V int, rel float64) {
	t.Helper()
	for row := range len(a) / V {
		ar, cr := a[row*V:(row+1)*V], c[row*V:(row+1)*V]
		var top float64
		for _, v := range cr {
			top = max(top, math.Abs(float64(v)))
		}
		for i := range ar {
			if d := math.Abs(float64(ar[i]) - float64(cr[i])); !(d <= rel*top) {
				t.Fatalf("%s: row %d logit %d: packed %v, fallback %v (tol %g)", what, row, i, ar[i], cr[i], rel*top)
			}
		}
		if Argmax(ar) != Argmax(cr) {
			t.Errorf("%s: row %d: packed picks token %d, fallback %d", what, row, Argmax(ar), Argmax(cr))
		}
	}
}

// noAttention returns zeros from attention: the test compares two weight
// paths, not the cache.
type noAttention struct{}

func (noAttention) Attend(layer int, b *Batch, q, k, v, out backend.Tensor) error { return nil }

// TestPartialRotaryQuantized loads the partial-rotary synthetic families
// with int8 weights: the loader permutes (and scales) q's and k's rows
// before quantizing each output row, so the logits stay within int8's own
// error of the float64 reference on the stored weights (a missing or
// misplaced permutation moves them by O(1), as TestSyntheticFamilies'
// mutations show). It loads the families whose weights the loader scales
// (Granite's multipliers, Gemma 3's query_pre_attn_scalar in q_norm) and
// OLMo 2's the same way: the scaled rows are quantized after the fold.
func TestPartialRotaryQuantized(t *testing.T) {
	spec, err := wq.ParseSpec("int8:g32") // groups of 32: the synthetic widths are 64, 96, 128, 256
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int32{1, 17, 42, 99, 0, 5, 5, 63, 28, 71, 3}
	n := 0
	for i, fam := range synthFamilies {
		folded := strings.HasPrefix(fam.name, "granite") || strings.HasPrefix(fam.name, "olmo2") ||
			strings.HasPrefix(fam.name, "gemma3 sliding") // (the other Gemma 3 family's widths are not groups of 32)
		if !strings.Contains(fam.name, "partial rotary") && !folded {
			continue
		}
		n++
		t.Run(fam.name, func(t *testing.T) {
			dir := t.TempDir()
			w := writeSynthetic(t, dir, fam.config, fam.dtype, uint64(10+i), nil)
			be := cpu.New(2)
			m, err := Load(dir, be, LoadOptions{Weights: spec})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			want := refForward(m.Config(), w, tokens)
			var b Batch
			b.Add(0, 0, tokens...)
			b.AllLogits = true
			out, err := m.Forward(&b, NewDenseCache(be, m.Config()))
			if err != nil {
				t.Fatal(err)
			}
			moved := scaledMaxDiff(out, want)
			// int8 weights in groups of 32: about 2e-2 of max |logit| here;
			// TestLoadInt8 bounds its format's effect by 0.05 too.
			if !(moved > 0 && moved <= 0.05) {
				t.Errorf("int8 weights: logits differ from the reference by %.3g of max |logit|, want in (0, 0.05]", moved)
			}
			t.Logf("int8 weights vs float64 reference: %.2e of max |logit|", moved)
		})
	}
	if n != 8 {
		t.Fatalf("%d partial rotary and folded families, want 8", n)
	}
}

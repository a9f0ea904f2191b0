package kvcache

import (
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// TestPerLayerFormats runs the tiny model through caches with per-layer
// formats: overrides that name the base's own format change no bit; a
// mixed spec stores each layer in its format, its memory is the sum of
// the layers' accounting (and what a sized cache allocates), and its
// logits differ from both uniform formats.
func TestPerLayerFormats(t *testing.T) {
	m, _, be := tiny(t)
	cfg := m.Config()
	r := rand.New(rand.NewPCG(9, 9))
	prompt := randTokens(r, 150, tinymodel.Vocab)
	logits := func(spec string, o Options) []float32 {
		t.Helper()
		c, err := NewPaged(be, cfg, kv.MustParseSpec(spec), o)
		if err != nil {
			t.Fatal(err)
		}
		var lg *model.Logits
		for pos := 0; pos < len(prompt); pos += 64 {
			var b model.Batch
			b.Add(1, pos, prompt[pos:min(len(prompt), pos+64)]...)
			if lg, err = m.Forward(&b, c); err != nil {
				t.Fatal(err)
			}
		}
		return append([]float32(nil), lg.Row(0)...)
	}
	base := logits("int4:kc32:v32:res32", Options{})
	same := logits("int4:kc32:v32:res32@0..-1=int4:kc32:v32:res32", Options{})
	if !sameBits(base, same) {
		t.Error("overrides naming the base format changed the logits")
	}
	mixed := logits("int2:kc32:v32:res32@0=int8:kc32:res32", Options{})
	int8 := logits("int8:kc32:res32", Options{})
	int2 := logits("int2:kc32:v32:res32", Options{})
	if sameBits(mixed, int8) || sameBits(mixed, int2) {
		t.Error("a mixed spec gives the logits of a uniform one")
	}
	sp := kv.MustParseSpec("int2:kc32:v32:res32@-1=fp16")
	c, err := NewPaged(be, cfg, sp, Options{MaxSeqs: 2, Blocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	f2 := kv.MustResolve("int2:kc32:v32:res32", cfg.HeadDim)
	f16 := kv.MustResolve("fp16:res32", cfg.HeadDim)
	wantBlock := int64(cfg.KVHeads) * int64(f2.BlockBytes()+f16.BlockBytes())
	if cfg.Layers != 2 || c.BlockBytes() != wantBlock {
		t.Errorf("block bytes %d, want %d (one int2 and one fp16 layer)", c.BlockBytes(), wantBlock)
	}
	if want := 8*c.BlockBytes() + 2*c.ResidualBytes(); c.AllocatedBytes() != want {
		t.Errorf("allocated %d bytes, accounting says %d", c.AllocatedBytes(), want)
	}
	got, _ := c.BytesAt(100)
	if want := int64(cfg.KVHeads) * (f2.SequenceBytes(100) + f16.SequenceBytes(100)); got != want {
		t.Errorf("BytesAt(100) = %d, want %d", got, want)
	}
	if c.Format().Spec.String() != sp.String() {
		t.Errorf("Format %s, want %s", c.Format().Spec.String(), sp.String())
	}
	if _, err := NewPaged(be, cfg, kv.MustParseSpec("int4@5=int8"), Options{}); err == nil {
		t.Error("layer 5 of a two-layer model accepted")
	}
}

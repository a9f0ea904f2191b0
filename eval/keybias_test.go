package eval

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/tinymodel"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// TestKeyBiasParams scores a Qwen2-style model whose k_proj bias puts
// per-channel offsets of 10-300 times the keys' spread into every key
// (tinymodel.WriteKeyBias) with int4 and int2 KV caches and with their
// float32-parameter references (":ref"): the 16-bit scales and zeros must
// cost at most 10% more KL divergence from the fp16 cache than float32
// ones. The keys reach the cache in fp16, so each group's zero is exact and
// the channel offsets cost nothing beyond the scale's rounding.
func TestKeyBiasParams(t *testing.T) {
	dir := t.TempDir()
	if err := tinymodel.WriteKeyBias(dir, 3); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	m, err := model.Load(dir, be, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Config().QKVBias {
		t.Fatal("the key-bias model loaded without q/k/v biases")
	}
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, 2*512)
	for i := range ids {
		ids[i] = r.IntN(256)
	}
	specs := []kv.Spec{kv.MustParseSpec("fp16")}
	for _, s := range []string{"int4:kc128:v128", "int2:kc128:v128"} {
		specs = append(specs, kv.MustParseSpec(s), kv.MustParseSpec(s+":ref"))
	}
	res, err := PPL(context.Background(), be, m, ids, specs, PPLOptions{Ctx: 512, Chunk: 128, PackAll: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(res); i += 2 {
		stored, ref := res[i], res[i+1]
		t.Logf("%s: KLD %.5f with fp16 scales and zeros, %.5f with float32 ones; PPL %.4f vs %.4f (fp16 cache %.4f)",
			stored.Spec, stored.KLD, ref.KLD, stored.PPL, ref.PPL, res[0].PPL)
		if ref.KLD <= 0 {
			t.Errorf("%s: the reference's KLD is %g, want positive (quantization must cost something)", ref.Spec, ref.KLD)
		}
		if stored.KLD > 1.1*ref.KLD {
			t.Errorf("%s: KLD %g is %.1f%% above the float32-parameter reference's %g, want at most 10%%",
				stored.Spec, stored.KLD, 100*(stored.KLD/ref.KLD-1), ref.KLD)
		}
	}
}

package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseConfig feeds ParseConfig hostile config.json files: from a Hub
// repository anyone can publish one. It must return an error or a Config
// whose invariants the loader relies on hold, and the derived tables (RoPE
// frequencies, padded heads) must be finite without panicking.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{cfgGocoder, cfgLlama2, cfgLlama3, cfgLlama31, cfgLlama32, cfgMistral01,
		cfgMistral03, cfgMistralNemo, cfgQwen25, cfgQwen3} {
		f.Add([]byte(s))
	}
	// Every family's transformers fixture (MoE, longrope, partial rotary,
	// Gemma 3's per-layer RoPE, windows...).
	paths, _ := filepath.Glob(filepath.Join("..", "internal", "hfcheck", "testdata", "*", "config.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		r := c.RotaryDims()
		switch {
		case c.Layers <= 0 || c.Hidden <= 0 || c.Vocab <= 0 || c.Intermediate < 0:
			t.Fatalf("accepted sizes: layers %d hidden %d vocab %d intermediate %d", c.Layers, c.Hidden, c.Vocab, c.Intermediate)
		case c.Heads <= 0 || c.KVHeads <= 0 || c.Heads%c.KVHeads != 0:
			t.Fatalf("accepted heads %d over %d KV heads", c.Heads, c.KVHeads)
		case c.HeadDim <= 0 || c.HeadDim%2 != 0:
			t.Fatalf("accepted head dim %d", c.HeadDim)
		case r <= 0 || r > c.HeadDim || r%2 != 0:
			t.Fatalf("accepted %d rotary dims of head dim %d", r, c.HeadDim)
		case c.RMSNormEps < 0 || math.IsNaN(c.RMSNormEps) || math.IsInf(c.RMSNormEps, 0):
			t.Fatalf("accepted rms_norm_eps %g", c.RMSNormEps)
		}
		if c.NoRoPE != nil && len(c.NoRoPE) != c.Layers || len(c.LayerWindows) != c.Layers {
			t.Fatalf("accepted %d NoPE flags and %d windows for %d layers", len(c.NoRoPE), len(c.LayerWindows), c.Layers)
		}
		if f := c.RopeAttentionFactor(); !(f > 0) || math.IsInf(f, 0) {
			t.Fatalf("accepted a RoPE attention factor %g", f)
		}
		if m := c.MoE; m != nil {
			if m.Experts <= 0 || m.TopK <= 0 || m.TopK > m.Experts || m.Intermediate <= 0 || len(m.Sparse) != c.Layers {
				t.Fatalf("accepted a mixture %+v over %d layers", *m, c.Layers)
			}
		}
		finite := func(what string, v []float32) {
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || x < 0 {
					t.Fatalf("%s[%d] = %g", what, i, x)
				}
			}
		}
		finite("InvFreq", c.InvFreq())
		finite("InvFreqLong", c.InvFreqLong())
		if c.LocalRopeTheta != 0 {
			finite("LocalInvFreq", c.LocalInvFreq())
		}
		if p, err := c.PadHeads(c.HeadDim + 32); err == nil {
			finite("padded InvFreq", p.InvFreq())
			if p.RotaryDims() != c.RotaryDims() || p.CheckpointHeadDim() != c.HeadDim {
				t.Fatalf("padding %d to %d: rotary dims %d -> %d", c.HeadDim, p.HeadDim, c.RotaryDims(), p.RotaryDims())
			}
		}
	})
}

package bench

import (
	"testing"

	"github.com/bitdecode/bitdecode/attn"
)

// TestRunAttnCPUSoftcap: with AttnConfig.Softcap every format's row runs
// the capped decode and its error column is against the capped float64
// reference on the stored values (small: the kernel's own error), where an
// uncapped reference would be off by the cap's effect; bw is refused.
func TestRunAttnCPUSoftcap(t *testing.T) {
	sh := attn.Shape{Hq: 4, Hkv: 2, D: 64}
	cfg := AttnConfig{Formats: []string{"fp16", "int8"}, Grid: []Point{{B: 1, L: 300}}, Shape: sh, Reps: 1, Softcap: 0.5}
	rep, err := RunAttnCPU(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Softcap != 0.5 {
			t.Errorf("%s: softcap %v, want 0.5", r.Format, r.Softcap)
		}
		// fp16 and int8 within 1e-2 of the capped reference on their own
		// stored values (the kernels' errors are ~1e-7 and ~1e-3).
		if !(r.MaxAbsErr < 1e-2) {
			t.Errorf("%s: max abs err %g against the capped reference", r.Format, r.MaxAbsErr)
		}
	}
	cfg.Formats = []string{"bw"}
	if _, err := RunAttnCPU(cfg); err == nil {
		t.Error("bw with a soft-cap: no error")
	}
}

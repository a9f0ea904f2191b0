package kvcache

import (
	"errors"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// TestSlidingWindowLimit checks the limit of the caches without sliding
// windows (the GPU caches): they refuse to grow a sequence beyond a model's
// sliding window with a clear error, and accept it up to the window.
func TestSlidingWindowLimit(t *testing.T) {
	cfg := &model.Config{LayerWindows: []int{0, 4096, 0}}
	if got := WindowLimit(cfg); got != 4096 {
		t.Fatalf("WindowLimit = %d, want 4096", got)
	}
	if WindowLimit(&model.Config{LayerWindows: []int{0, 0}}) != 0 {
		t.Fatal("no windows: want no limit")
	}
	var ok, over model.Batch
	ok.Add(1, 4000, make([]int32, 96)...)
	over.Add(1, 4000, make([]int32, 97)...)
	if err := CheckWindow(4096, &ok); err != nil {
		t.Fatalf("a sequence filling the window: %v", err)
	}
	if err := CheckWindow(4096, &over); err == nil || !strings.Contains(err.Error(), "sliding window of 4096") {
		t.Fatalf("beyond the window: err = %v", err)
	}
}

// TestPlanesRefuseSoftcap: the bw cache, whose decode has no soft-cap,
// refuses a model with soft-capped attention scores (Gemma 2) by name,
// and takes the same model without the cap.
func TestPlanesRefuseSoftcap(t *testing.T) {
	m, _, be := tiny(t)
	cfg := *m.Config()
	cfg.AttnSoftcap = 50
	spec := kv.MustParseSpec(planeServeSpec)
	_, err := NewPlanes(be, &cfg, spec, Options{MaxSeqs: 1, Blocks: 4})
	if !errors.Is(err, model.ErrAttnSoftcap) || !strings.Contains(err.Error(), "bw") {
		t.Fatalf("NewPlanes with a soft-capped model: %v, want a refusal wrapping model.ErrAttnSoftcap naming the bw cache", err)
	}
	cfg.AttnSoftcap = 0
	pc, err := NewPlanes(be, &cfg, spec, Options{MaxSeqs: 1, Blocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	pc.Close()
}

// TestNewFailsWithNilCache: where a cache cannot be made, New returns a nil
// Cache beside its error, not a nil *Paged or *Planes inside the interface
// (which a caller's cache != nil check takes for a cache and then closes:
// serve's start-up panicked so on the GPU with too small a --kv-memory).
func TestNewFailsWithNilCache(t *testing.T) {
	m, _, be := tiny(t)
	for _, spec := range []string{"fp16", planeServeSpec} {
		c, err := New(be, m.Config(), kv.MustParseSpec(spec), Options{MaxSeqs: 16, MemoryBytes: 2048})
		if err == nil || c != nil {
			t.Errorf("%s in 2 KiB for 16 sequences: cache %#v, error %v; want a nil Cache and an error", spec, c, err)
		}
	}
	if c, err := AsCache((*Paged)(nil), errors.New("no room")); c != nil || err == nil {
		t.Errorf("AsCache of a nil *Paged with an error: %#v, %v", c, err)
	}
}

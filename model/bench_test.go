package model

import (
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
)

// BenchmarkGocoderDecode measures decode speed of gocoder-23m at batch 1 on
// the CPU backend with the dense fp32 cache: one token per forward pass
// after a 16-token prompt, the context cycling through 16..272 tokens (the
// cache is truncated back to the prompt every 256 tokens). tok/s is the
// number to report.
func BenchmarkGocoderDecode(b *testing.B) {
	dir := findModelDir(b)
	be := cpu.New(0)
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cache := NewDenseCache(be, m.Config())
	prompt := []int32{0, 846, 2185, 201, 201, 784, 296, 847, 4, 201, 201, 347, 2185, 319, 271, 201}
	var pb Batch
	pb.Add(0, 0, prompt...)
	out, err := m.Forward(&pb, cache)
	if err != nil {
		b.Fatal(err)
	}
	next := int32(Argmax(out.Row(0)))
	pos := len(prompt)
	b.ResetTimer()
	for b.Loop() {
		var d Batch
		d.Add(0, pos, next)
		out, err := m.Forward(&d, cache)
		if err != nil {
			b.Fatal(err)
		}
		next = int32(Argmax(out.Row(0)))
		pos++
		if pos == len(prompt)+256 { // keep the context bounded on long runs
			if err := cache.Truncate(0, len(prompt)); err != nil {
				b.Fatal(err)
			}
			pos = len(prompt)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkGocoderPrefill measures prefill speed of gocoder-23m for one
// sequence of 512 tokens.
func BenchmarkGocoderPrefill(b *testing.B) {
	dir := findModelDir(b)
	be := cpu.New(0)
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const L = 512
	tokens := make([]int32, L)
	for i := range tokens {
		tokens[i] = int32(1 + (i*7919)%(m.Config().Vocab-1))
	}
	b.ResetTimer()
	for b.Loop() {
		cache := NewDenseCache(be, m.Config())
		var pb Batch
		pb.Add(0, 0, tokens...)
		if _, err := m.Forward(&pb, cache); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*L)/b.Elapsed().Seconds(), "tok/s")
}

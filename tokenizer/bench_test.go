package tokenizer

import (
	"testing"
)

// BenchmarkEncodeHeldout encodes heldout.txt (2.86 MB of Go source) with the
// gocoder-23m tokenizer (byte-level BPE, GPT-2 regex, 7,933 merges). "cold"
// builds a new tokenizer (empty word cache) for every encode; "warm" reuses
// one. Run: go test ./tokenizer -run x -bench EncodeHeldout -benchtime 5x
func BenchmarkEncodeHeldout(b *testing.B) {
	dir := gocoderDir(b)
	text := heldoutText(b)
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			tok, err := Load(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ids := tok.Encode(text, true)
			b.ReportMetric(float64(len(ids)), "tokens")
		}
	})
	b.Run("warm", func(b *testing.B) {
		tok, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		tok.Encode(text, true)
		b.SetBytes(int64(len(text)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tok.Encode(text, true)
		}
	})
}

// BenchmarkLoad measures reading and building the gocoder-23m tokenizer.
func BenchmarkLoad(b *testing.B) {
	dir := gocoderDir(b)
	for i := 0; i < b.N; i++ {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

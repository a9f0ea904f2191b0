package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// fuzzShapes are the head configurations the fuzzer picks from: GQA groups
// 1, 2, 3, 4, 7 and 8 at head dims that are powers of two and not.
var fuzzShapes = []Shape{
	{Hq: 2, Hkv: 2, D: 64}, {Hq: 4, Hkv: 2, D: 128}, {Hq: 3, Hkv: 1, D: 256}, {Hq: 8, Hkv: 2, D: 64},
	{Hq: 7, Hkv: 1, D: 128}, {Hq: 8, Hkv: 1, D: 64}, {Hq: 4, Hkv: 1, D: 256},
	{Hq: 4, Hkv: 4, D: 96}, {Hq: 6, Hkv: 2, D: 80}, {Hq: 8, Hkv: 2, D: 192},
}

// FuzzDecode draws a format, a shape, a batch of two lengths (any, not
// multiples of the block or of the vector width) and 1-4 query tokens, and
// checks every kernel set against the float64 reference. The seed corpus
// runs in every `go test`.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint16(1), uint16(130), uint8(1), uint64(1))
	f.Add(uint8(5), uint8(1), uint16(129), uint16(3), uint8(2), uint64(2))
	f.Add(uint8(8), uint8(4), uint16(511), uint16(257), uint8(4), uint64(3))
	f.Add(uint8(11), uint8(2), uint16(256), uint16(255), uint8(3), uint64(4))
	f.Add(uint8(4), uint8(6), uint16(300), uint16(17), uint8(1), uint64(5))
	f.Add(uint8(6), uint8(3), uint16(128), uint16(64), uint8(2), uint64(6))
	f.Add(uint8(5), uint8(7), uint16(260), uint16(5), uint8(2), uint64(7))   // int4 at D = 96
	f.Add(uint8(2), uint8(8), uint16(129), uint16(300), uint8(1), uint64(8)) // fp8 at D = 80
	f.Add(uint8(8), uint8(9), uint16(513), uint16(40), uint8(3), uint64(9))  // int2 at D = 192
	f.Fuzz(func(t *testing.T, spec, shape uint8, l1, l2 uint16, tq uint8, seed uint64) {
		sp := testSpecs[int(spec)%len(testSpecs)]
		sh := fuzzShapes[int(shape)%len(fuzzShapes)]
		fm, ok := resolveOrSkip(t, sp, sh.D)
		if !ok {
			t.Skip("the format's rotation or groups do not fit D")
		}
		q := 1 + int(tq)%4
		lens := []int{q + int(l1)%700, q + int(l2)%700}
		r := rand.New(rand.NewPCG(seed, uint64(l1)<<16|uint64(l2)))
		caches, _, _ := buildBatch(t, r, fm, sh, lens)
		p := Params{Format: fm, Shape: sh, Tq: q}
		checkDecode(t, fmt.Sprintf("%s Hq=%d Hkv=%d D=%d lens=%v Tq=%d", sp, sh.Hq, sh.Hkv, sh.D, lens, q),
			seqsOf(caches), p, randQ(r, len(lens)*q*sh.Hq*sh.D))
	})
}

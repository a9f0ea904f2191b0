package attn

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPackedI4Scores: at head dims that are a multiple of 64 but not of
// 128 (64, 192: the half chunk of scoresI4x4 and scoresI4x2, round 25),
// a block's int4 key scores read from the packed nibbles are the bits of
// the same kernel set's scores from the unpacked codes (unpack4 then
// scoresU8x4, the path before round 25): the integer sums are exact and
// the float steps the same. KC keys (int4, k4v2: unit factors) and KT
// keys (int4:kt128), groups 1, 2, 3, 4 and 8 (scoresI4x4 with padded
// rows, scoresI4x2, scoresI4x4). -short: D 64, groups 1, 2 and 4.
func TestPackedI4Scores(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 64))
	ran := false
	dims, groups := []int{64, 192}, []int{1, 2, 3, 4, 8}
	if testing.Short() {
		dims, groups = dims[:1], []int{1, 2, 4}
	}
	for _, k := range levelSets() {
		if k.scoresI4x4 == nil || !k.vnni {
			continue
		}
		unpacked := *k // the same set without the packed-nibble kernels
		unpacked.scoresI4x4, unpacked.scoresI4x2 = nil, nil
		for _, d := range dims {
			for _, g := range groups {
				sh := Shape{Hq: 2 * g, Hkv: 2, D: d}
				for _, spec := range []string{"int4", "int4:kt128", "k4v2"} {
					f, ok := resolveOrSkip(t, spec, d)
					if !ok {
						continue
					}
					p := Params{Format: f, Shape: sh, Tq: 1}
					caches, _, _ := buildBatch(t, r, f, sh, []int{2 * f.Residual})
					s := &caches[0].Seq
					q := randQ(r, sh.Hq*d)
					packed, plain := newWorker(p, k), newWorker(p, &unpacked)
					for h := 0; h < sh.Hkv; h++ {
						packed.loadQueries(q, 0, h)
						plain.loadQueries(q, 0, h)
						packed.qReady, plain.qReady = false, false
						for blk := range s.Blocks {
							base := s.Blocks[blk][h*f.BlockBytes():]
							packed.blockScores(base[:f.K.Bytes], f.Residual)
							plain.blockScores(base[:f.K.Bytes], f.Residual)
							if !packed.i4 || plain.i4 {
								t.Fatalf("%v %s %v: packed-nibble path %v, unpacked %v", k, spec, sh, packed.i4, plain.i4)
							}
							for row := 0; row < plain.r; row++ {
								got := packed.scores[row*packed.npad : row*packed.npad+f.Residual]
								want := plain.scores[row*plain.npad : row*plain.npad+f.Residual]
								sameBits(t, fmt.Sprintf("%v %s %v head %d block %d row %d", k, spec, sh, h, blk, row), got, want)
							}
							ran = true
						}
					}
				}
			}
		}
	}
	if !ran {
		t.Skip("no kernel set with the packed int4 score kernels")
	}
}

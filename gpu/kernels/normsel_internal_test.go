package kernels

import (
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/bitdecode/bitdecode/wq"
)

// TestNormSelConstants: add_rmsnorm_cluster_sel's selection constants
// (ops.cu) are dec.cu's and wq.SelectApprox's, and a row's chunks fit
// its cluster.
func TestNormSelConstants(t *testing.T) {
	for _, c := range []struct {
		src, name string
		want      int
	}{
		{opsSource, "kSelChunk", wq.ChunkChannels},
		{opsSource, "kSelBucketShift", normSelBucketShift},
		{opsSource, "kSelBuckets", normSelBuckets},
		{opsSource, "kSelCTA", selectThreads},
		{decSource, "kChunkChannels", wq.ChunkChannels},
		{decSource, "kBucketShift", normSelBucketShift},
		{decSource, "kBuckets", normSelBuckets},
	} {
		m := regexp.MustCompile(`constexpr int ` + c.name + ` = (\d+);`).FindStringSubmatch(c.src)
		if m == nil {
			t.Errorf("no constexpr int %s", c.name)
			continue
		}
		if v, _ := strconv.Atoi(m[1]); v != c.want {
			t.Errorf("%s = %d, want %d", c.name, v, c.want)
		}
	}
	if normSelAlign%(4*normCluster) != 0 || NormClusterMaxG/wq.ChunkChannels > normCluster {
		t.Fatalf("a row of %d has more chunks than its cluster has CTAs, or slices not of whole 16-byte loads", NormClusterMaxG)
	}
}

// normSelBucketShift and normSelBuckets are wq's bucketShift and
// bucketCount (unexported there; dec.cu spells them too).
const normSelBucketShift, normSelBuckets = 20, 256

// selectChunkModel is ops.cu's selectChunk<threads> in Go, warp by warp
// (session 20b's one-barrier version): the chunk x (c = len(x) <= 1024
// channels, c0 its first) over threads threads of per = 1024/threads
// consecutive channels; each warp's histogram relative to its own key
// maximum wmax (bucket min(wmax − key, 255)); then, for every warp apart,
// keyMax, the walk over the chunk's buckets 32 at a time (bucket b's count
// summed from each warp's histogram at b − (keyMax − wmax), bucket 255
// always reaching kc) giving B, the count above it and the earlier warps'
// channels below B and in B; then each thread's place from the warp's
// exclusive scan of packed (below B, in B) counts, each taken channel
// written at below-before + min(in-before, fill). Slots never written stay
// -1; a slot written twice panics.
func selectChunkModel(x []float32, kc, c0, threads int) []int32 {
	const lanes = 32
	per, warps := wq.ChunkChannels/threads, threads/lanes
	wch := lanes * per
	c := len(x)
	key := func(i int) int {
		if i >= c {
			return -1
		}
		return int(math.Float32bits(x[i]) & 0x7fffffff >> normSelBucketShift)
	}
	hist := make([][normSelBuckets]int, warps)
	wmax := make([]int, warps)
	for w := range warps {
		m := -1
		for i := w * wch; i < (w+1)*wch; i++ {
			m = max(m, key(i))
		}
		wmax[w] = m
		for i := w * wch; i < (w+1)*wch; i++ {
			if k := key(i); k >= 0 {
				hist[w][min(m-k, normSelBuckets-1)]++
			}
		}
	}
	keyMax := slices.Max(wmax)
	out := slices.Repeat([]int32{-1}, kc)
	for warp := range warps {
		// The walk (every lane's bucket of one step at once).
		B, above, early, earlyIn, base := normSelBuckets-1, 0, 0, 0, 0
		for s := 0; s < normSelBuckets/lanes; s++ {
			var tot, pre, incl [lanes]int
			for l := range lanes {
				bk := s*lanes + l
				tot[l] = wq.ChunkChannels
				if bk < normSelBuckets-1 {
					tot[l] = 0
					for w := range warps {
						i := bk - (keyMax - wmax[w])
						if i > normSelBuckets-2 {
							panic("selectChunkModel: a warp's clipped bucket read")
						}
						if wmax[w] >= 0 && i >= 0 {
							tot[l] += hist[w][i]
							if w < warp {
								pre[l] += hist[w][i]
							}
						}
					}
				}
				incl[l] = tot[l]
				if l > 0 {
					incl[l] += incl[l-1]
				}
			}
			reach := -1
			for l := range lanes {
				if base+incl[l] >= kc {
					reach = l
					break
				}
			}
			if reach >= 0 {
				B = s*lanes + reach
				above = base + incl[reach] - tot[reach]
				earlyIn = pre[reach]
				for l := range reach {
					early += pre[l]
				}
				break
			}
			for l := range lanes {
				early += pre[l]
			}
			base += incl[lanes-1]
		}
		if B == normSelBuckets-1 {
			earlyIn = min(c, warp*wch) - early
		}
		fill := kc - above
		bucket := func(i int) int {
			if k := key(i); k >= 0 {
				return min(keyMax-k, normSelBuckets-1)
			}
			return normSelBuckets
		}
		pex := 0 // the warp's exclusive scan of packed counts
		for l := range lanes {
			t := warp*lanes + l
			below, in := 0, 0
			for j := range per {
				below += b2i(bucket(t*per+j) < B)
				in += b2i(bucket(t*per+j) == B)
			}
			nb, ni := early+pex&0xffff, earlyIn+pex>>16
			for j := range per {
				ch := int32(c0 + t*per + j)
				slot := -1
				switch bj := bucket(t*per + j); {
				case bj < B:
					slot = nb + min(ni, fill)
					nb++
				case bj == B:
					if ni < fill {
						slot = nb + ni
					}
					ni++
				}
				if slot >= 0 {
					if out[slot] != -1 {
						panic("selectChunkModel: slot " + strconv.Itoa(slot) + " written twice")
					}
					out[slot] = ch
				}
			}
			pex += below | in<<16
		}
	}
	return out
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestNormSelectModelMatchesWQ: selectChunkModel (the ranking of a chunk
// in add_rmsnorm_cluster_sel, 128 threads, and in the o-input kernels,
// 256) gives wq.SelectApprox's list on activations with outliers, ties,
// zeros and subnormals, for rows whose last chunk is partial and k_chunk
// from 1 to 1024.
func TestNormSelectModelMatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2))
	for _, threads := range []int{normClusterThreads, selectThreads} {
		for _, G := range []int{1024, 2080, 3072, 4096, 5120, 8192, 8160} {
			for _, kChunk := range []int{1, 3, 8, 16, 64, 500, 1024} {
				for mode := range 3 {
					x := DECTestActivations(r, G, mode)
					want := wq.SelectApprox(nil, x, kChunk)
					var got []int32
					for c0 := 0; c0 < G; c0 += wq.ChunkChannels {
						chunk := x[c0:min(G, c0+wq.ChunkChannels)]
						got = append(got, selectChunkModel(chunk, wq.ChunkSelect(kChunk, len(chunk)), c0, threads)...)
					}
					if !slices.Equal(got, want) || len(want) != DECSelected(G, kChunk) {
						t.Fatalf("%d threads G=%d k_chunk=%d mode %d: the model's list (%d) differs from wq's (%d; DECSelected %d)",
							threads, G, kChunk, mode, len(got), len(want), DECSelected(G, kChunk))
					}
				}
			}
		}
	}
}

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

// selectChunkModel is ops.cu's selectChunk<threads> in Go, thread by
// thread: the chunk x (c = len(x) <= 1024 channels, c0 its first) over
// threads threads of per = 1024/threads consecutive channels; keyMax; the
// histogram; B from the inclusive scan of each thread's 256/threads
// buckets; the exclusive scan of each thread's packed (below B, in B)
// counts; each taken channel written at below-before + min(in-before,
// fill). Slots never written stay -1.
func selectChunkModel(x []float32, kc, c0, threads int) []int32 {
	per, bpt := wq.ChunkChannels/threads, normSelBuckets/threads
	c := len(x)
	key := func(i int) int {
		if i >= c {
			return -1
		}
		return int(math.Float32bits(x[i]) & 0x7fffffff >> normSelBucketShift)
	}
	keyMax := -1
	for i := range threads * per {
		keyMax = max(keyMax, key(i))
	}
	b := make([]int, threads*per)
	var hist [normSelBuckets]int
	for i := range b {
		b[i] = normSelBuckets
		if k := key(i); k >= 0 {
			b[i] = min(keyMax-k, normSelBuckets-1)
			hist[b[i]]++
		}
	}
	B, above, found := -1, 0, 0
	before := 0
	for t := range threads {
		for k := range bpt {
			h := hist[t*bpt+k]
			if before < kc && before+h >= kc {
				B, above = t*bpt+k, before
				found++
			}
			before += h
		}
	}
	if found != 1 {
		panic("selectChunkModel: B found " + strconv.Itoa(found) + " times")
	}
	fill := kc - above
	out := slices.Repeat([]int32{-1}, kc)
	pex := 0
	for t := range threads {
		below, in := 0, 0
		for j := range per {
			if b[t*per+j] < B {
				below++
			}
			if b[t*per+j] == B {
				in++
			}
		}
		packed := below | in<<16
		nb, ni := pex&0xffff, pex>>16
		for j := range per {
			ch := int32(c0 + t*per + j)
			switch bj := b[t*per+j]; {
			case bj < B:
				out[nb+min(ni, fill)] = ch
				nb++
			case bj == B:
				if ni < fill {
					out[nb+ni] = ch
				}
				ni++
			}
		}
		pex += packed
	}
	return out
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

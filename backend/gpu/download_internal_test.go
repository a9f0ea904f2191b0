// download_internal_test.go: parallelCopy, the host side of the pinned download ring.

package gpu

import (
	"bytes"
	"testing"
)

// TestParallelCopy: parallelCopy copies every byte at lengths around its
// goroutine split (one copier, several, a ragged last share).
func TestParallelCopy(t *testing.T) {
	for _, n := range []int{0, 1, downloadCopierBytes - 1, 2 * downloadCopierBytes, 8*downloadCopierBytes + 77, 5<<20 + 3} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*131 + i>>8)
		}
		dst := bytes.Repeat([]byte{0xAA}, n)
		parallelCopy(dst, src)
		if !bytes.Equal(dst, src) {
			t.Fatalf("n %d: copy differs", n)
		}
	}
}

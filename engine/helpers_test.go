package engine

import (
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/internal/tinymodel"
)

// tiny loads the random-weight tiny model (internal/tinymodel) on the CPU.
var tiny = tinymodel.Load

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

//go:build race

package attn

// raceEnabled shortens the slowest reference tests under the race
// detector, which runs the kernels' Go parts many times slower: the races
// it can find show up on a few shapes as well as on all of them.
const raceEnabled = true

func init() {
	// Five of the shape classes (MHA, GQA 4 at D 128, a group that is no
	// power of two, D 96 and D 80): every attn test's shape loop is the
	// long pole of CI's race stage otherwise (271 s of its 8 minutes).
	testShapes = []Shape{testShapes[0], testShapes[1], testShapes[5], testShapes[9], testShapes[10]}
	// One spec of each kernel family: float K/V, int4 KC, int2, mixed widths.
	shortSpecs = []string{"fp16", "int4", "int2:kc32:v32", "k4v2"}
}

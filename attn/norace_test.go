//go:build !race

package attn

// raceEnabled is false without the race detector (race_test.go).
const raceEnabled = false

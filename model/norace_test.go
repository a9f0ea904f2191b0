//go:build !race

package model

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false

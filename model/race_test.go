//go:build race

package model

// raceEnabled shortens the slow real-model tests under the race detector,
// which runs the forward pass some 20x slower; the races they can find show
// up in a few steps as well as in many.
const raceEnabled = true

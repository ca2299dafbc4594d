//go:build !race

package kafkatest

// raceEnabled reports whether the tests run with the race detector.
const raceEnabled = false

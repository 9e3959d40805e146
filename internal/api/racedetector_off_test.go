//go:build !race

package api_test

// raceDetector: whether the race detector is on, with which sync.Pool drops a quarter of what it is given.
const raceDetector = false

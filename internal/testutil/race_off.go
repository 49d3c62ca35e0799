//go:build !race

package testutil

// raceEnabled: this test binary was built with -race.
const raceEnabled = false

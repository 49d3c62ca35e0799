//go:build !linux

package workload

import "time"

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

//go:build !linux

package pacer

import (
	"errors"
	"time"
)

// onThread runs fn with Go's sleep; priorities are Linux's.
func onThread(priority int, fn func(sleepUntil func(time.Time)) error) error {
	if priority > 0 {
		return errors.New("pacer: a real-time priority needs Linux")
	}
	return fn(func(at time.Time) { time.Sleep(time.Until(at)) })
}

//go:build !linux

package rtthread

import (
	"errors"
	"time"
)

// Run runs fn with Go's sleep; priorities are Linux's.
func Run(priority int, fn func(sleepUntil func(time.Time)) error) error {
	if priority > 0 {
		return errors.New("a real-time priority needs Linux")
	}
	return fn(func(at time.Time) { time.Sleep(time.Until(at)) })
}

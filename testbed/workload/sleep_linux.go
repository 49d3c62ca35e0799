package workload

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepUntil sleeps until t with the kernel's high-resolution timer (Go's
// own timers can be a millisecond late, which would be most of an audio
// stream's jitter). It blocks the calling thread.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		if err := unix.Nanosleep(&ts, nil); err == nil {
			return
		}
	}
}

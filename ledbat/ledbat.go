package ledbat

import (
	"fmt"
	"time"
)

// Name is the congestion control's name, as in
// /proc/sys/net/ipv4/tcp_available_congestion_control and TCP_CONGESTION.
const Name = "lanes_ledbat"

// MinTarget and MaxTarget bound TARGET: RFC 6817 requires at most 100 ms;
// below a millisecond the delay measurements' own noise decides.
const (
	MinTarget = time.Millisecond
	MaxTarget = 100 * time.Millisecond
)

// CheckTarget says whether d is a valid TARGET.
func CheckTarget(d time.Duration) error {
	if d < MinTarget || d > MaxTarget {
		return fmt.Errorf("ledbat target %v outside %v..%v", d, MinTarget, MaxTarget)
	}
	return nil
}

package netsched

import "time"

// PingSample is one answered echo request of a Pinger: its round trip,
// when the answer came, and the request's sequence number.
type PingSample struct {
	RTT time.Duration
	At  time.Time
	Seq uint16
}

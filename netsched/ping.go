package netsched

import (
	"errors"
	"time"
)

// PingSample is one answered request of a Pinger: its round trip, when
// the answer came, and the request's sequence number. A timestamp reply
// also gives the one-way delays (OneWay): Up, from here to the reflector,
// and Down, back. Each is offset by the difference between the two hosts'
// clocks (and read to the millisecond), so only their changes mean
// anything.
type PingSample struct {
	RTT      time.Duration
	At       time.Time
	Seq      uint16
	OneWay   bool
	Up, Down time.Duration
}

// PingMode is what a Pinger's requests are.
type PingMode int

const (
	// PingProbing: an IPv4 reflector not yet known to answer timestamp
	// requests gets both kinds; the echo answers count.
	PingProbing PingMode = iota
	// PingTimestamp: ICMP timestamp requests, one-way delays.
	PingTimestamp
	// PingEcho: echo requests, round trips only.
	PingEcho
)

func (m PingMode) String() string {
	switch m {
	case PingTimestamp:
		return "timestamp"
	case PingEcho:
		return "echo"
	}
	return "probing"
}

// ErrNoProbeClass: the download path classifies by ports (no BPF), so a
// probe's echo replies take the download tree's default class.
var ErrNoProbeClass = errors.New("the download classifier is not BPF (port rules): probe replies take the default class")

// PingSilence is how long a pinger that chose ICMP timestamps goes
// without an answer to them before it asks with echo requests too.
const PingSilence = 2 * time.Second

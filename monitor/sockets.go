package monitor

import "errors"

// ErrGone is a process that exited.
var ErrGone = errors.New("exited")

// SocketCounters are a process's cumulative socket counters: data
// segments (or, for UDP, read and write calls) and bytes, sent and
// received, over the inet sockets it holds now; Sent is the bytes it
// sent (TCP: acknowledged by the peer; UDP: written).
type SocketCounters struct {
	Events, Bytes uint64
	Sent          uint64
	Sockets       int
}

// Sockets is one reading of a network namespace's sockets, from which
// each process's counters are summed (the boost policies' measure of
// which processes communicate).
type Sockets struct {
	tcp map[uint32]SocketCounters
	udp map[uint32]bool
	// procIO: no sock_diag; every socket holder's /proc/PID/io counts.
	// anyOther: no UDP sock_diag; every socket not in tcp counts so.
	procIO, anyOther bool
}

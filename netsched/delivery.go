package netsched

// A DeliveryMeter (Linux: a BPF TCP iterator, bpf/delivery.c) reads what
// the TCP connections leaving through one interface delivered: the auto
// rate's fast signal of a link that slowed down. A probe's delay reports
// a queue only once the probe has crossed it; the acknowledgements of the
// packets at the head of that queue slow down as soon as the link does.

// Delivery is one read of a DeliveryMeter: the connections' sums since the
// previous read.
type Delivery struct {
	// Delivered is the bytes the peers acknowledged (cumulatively or
	// selectively) since the previous read, of the connections counted
	// then and now.
	Delivered uint64
	// InFlight is the bytes sent and not yet acknowledged now.
	InFlight uint64
	// Sockets is the established connections counted; CwndLimited those
	// of them whose bytes in flight fill their congestion window.
	Sockets, CwndLimited uint32
}

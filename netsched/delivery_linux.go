package netsched

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cilium/ebpf/link"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/netnsrun"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// DeliveryMeter reads what the TCP connections leaving through one
// interface delivered (bpf/delivery.c, a BPF TCP iterator).
type DeliveryMeter struct {
	e    *Enforcer
	objs lanesbpf.DeliveryObjects
	it   *link.Iter
}

// NewDeliveryMeter loads the iterator for the connections leaving through
// iface (in the Enforcer's network namespace). It fails where the kernel
// has no BPF TCP iterator or BTF.
func (e *Enforcer) NewDeliveryMeter(iface string) (*DeliveryMeter, error) {
	if err := netprobe.HaveTCPIter(); err != nil {
		return nil, err
	}
	var idx int
	if err := netnsrun.In(e.ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		idx = ifi.Index
		return nil
	}); err != nil {
		return nil, fmt.Errorf("delivery meter: %w", err)
	}
	m := &DeliveryMeter{e: e}
	if err := lanesbpf.LoadDeliveryObjects(&m.objs, nil); err != nil {
		return nil, fmt.Errorf("load the delivery meter (BPF TCP iterator): %w", err)
	}
	if err := m.objs.TargetIfindex.Set(uint32(idx)); err != nil {
		m.objs.Close()
		return nil, fmt.Errorf("delivery meter: set the interface: %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: m.objs.LanesDelivery})
	if err != nil {
		m.objs.Close()
		return nil, fmt.Errorf("attach the delivery meter: %w", err)
	}
	m.it = it
	// One read now: the sockets already open start counting from here,
	// and an error means the meter cannot work at all.
	if _, err := m.Read(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Read runs the iterator once and returns its sums. Not safe for
// concurrent use.
func (m *DeliveryMeter) Read() (Delivery, error) {
	err := netnsrun.In(m.e.ns, func() error {
		rd, err := m.it.Open()
		if err != nil {
			return err
		}
		defer rd.Close()
		_, err = io.Copy(io.Discard, rd)
		return err
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("run the delivery meter: %w", err)
	}
	var s lanesbpf.DeliveryDeliverySum
	if err := m.objs.Result.Get(&s); err != nil {
		return Delivery{}, fmt.Errorf("read the delivery meter: %w", err)
	}
	return Delivery{Delivered: s.Delivered, InFlight: s.Inflight, Sockets: s.Sockets, CwndLimited: s.CwndLimited}, nil
}

// Close detaches the iterator and frees its maps; nil-safe.
func (m *DeliveryMeter) Close() error {
	if m == nil {
		return nil
	}
	var err error
	if m.it != nil {
		err = m.it.Close()
	}
	return errors.Join(err, m.objs.Close())
}

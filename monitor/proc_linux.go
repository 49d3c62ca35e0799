package monitor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/mdlayher/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Kernel ABI of the proc connector (linux/connector.h, linux/cn_proc.h).
const (
	netlinkConnector = 11 // NETLINK_CONNECTOR
	cnIdxProc        = 1  // CN_IDX_PROC, also the multicast group
	cnValProc        = 1  // CN_VAL_PROC

	procCnMcastListen = 1 // PROC_CN_MCAST_LISTEN
	procCnMcastIgnore = 2 // PROC_CN_MCAST_IGNORE

	procEventNone = 0x00000000 // acknowledgement of a control message
	procEventFork = 0x00000001
	procEventExec = 0x00000002
	procEventExit = 0x80000000

	cnMsgLen     = 20 // struct cn_msg: id{idx,val}, seq, ack, len(u16), flags(u16)
	procEventHdr = 16 // struct proc_event: what, cpu, timestamp_ns(u64)

	// eventBuffer is the capacity of the Events channel; recvBuffer the
	// socket receive buffer requested, so that bursts (a parallel build)
	// do not overflow while the consumer catches up.
	eventBuffer = 4096
	recvBuffer  = 4 << 20

	ackTimeout = 2 * time.Second
)

// ProcConnector receives process events from the kernel's proc connector.
// It needs CAP_NET_ADMIN, and the initial user and PID namespaces.
type ProcConnector struct {
	conn   *netlink.Conn
	logf   func(format string, args ...any)
	events chan Event
	// bus, when set, receives the events instead of the channel.
	bus *events.Bus
	seq atomic.Uint32

	// filtered: a socket filter is attached (SetForks swaps it); forks:
	// forks are published (PublishProcEvents, while a subscriber wants
	// them); stopFollow ends the following of the bus's subscriptions.
	filtered   bool
	forks      atomic.Bool
	forksRead  atomic.Uint64 // fork events the socket delivered
	forkMu     sync.Mutex
	stopFollow func()

	closing   atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed when the receive loop has ended
	quit      chan struct{} // closed by Close
	err       error         // why the receive loop ended; read after done
	closeErr  error
}

// ListenProc subscribes to the proc connector. Events flow until Close.
func ListenProc(logf func(format string, args ...any)) (*ProcConnector, error) {
	return listenProcFiltered(logf, recvBuffer, eventBuffer, nil, nil)
}

// listenProc is ListenProc with the socket receive buffer (bytes) and the
// channel capacity given.
func listenProc(logf func(format string, args ...any), recvBuf, chanCap int) (*ProcConnector, error) {
	return listenProcFiltered(logf, recvBuf, chanCap, nil, nil)
}

// listenProcFiltered is listenProc with a socket filter (none if nil),
// attached before the subscription so that no event passes unfiltered,
// publishing on bus instead of the channel when bus is not nil.
func listenProcFiltered(logf func(format string, args ...any), recvBuf, chanCap int, filter []bpf.RawInstruction, bus *events.Bus) (*ProcConnector, error) {
	// With a filter, the socket joins the group only once the filter is
	// on: a socket bound to it receives events at once (another listener
	// has them sent), unfiltered.
	cfg := &netlink.Config{Groups: cnIdxProc}
	if filter != nil {
		cfg = &netlink.Config{}
	}
	conn, err := netlink.Dial(netlinkConnector, cfg)
	if err != nil {
		return nil, fmt.Errorf("listen proc connector: %w", errnoHint(err))
	}
	filtered := false
	if filter != nil {
		if err := conn.SetBPF(filter); err != nil {
			logf("proc connector: attach the event filter: %v (every event is read)", err)
		} else {
			filtered = true
		}
		if err := conn.JoinGroup(cnIdxProc); err != nil {
			conn.Close()
			return nil, fmt.Errorf("listen proc connector: join group: %w", errnoHint(err))
		}
	}
	p := &ProcConnector{
		filtered: filtered,
		conn:     conn,
		logf:     logf,
		events:   make(chan Event, chanCap),
		bus:      bus,
		done:     make(chan struct{}),
		quit:     make(chan struct{}),
	}
	p.seq.Store(uint32(os.Getpid())<<12 ^ uint32(time.Now().UnixNano()))
	if err := conn.SetReadBuffer(recvBuf); err != nil {
		logf("proc connector: set receive buffer to %d bytes: %v", recvBuf, err)
	}
	pending, err := p.subscribe()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("listen proc connector: %w", err)
	}
	go p.run(pending)
	return p, nil
}

// Events returns the event stream. It is closed after Close, or when
// receiving fails (see Err). When the consumer falls behind and the kernel
// drops events, an Event{Kind: Overflow} takes their place.
func (p *ProcConnector) Events() <-chan Event { return p.events }

// Err returns why the event stream ended early, or nil (still running, or
// ended by Close).
func (p *ProcConnector) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Close unsubscribes (PROC_CN_MCAST_IGNORE), closes the socket and waits
// until the Events channel is closed. It is safe to call more than once.
func (p *ProcConnector) Close() error {
	p.closeOnce.Do(func() {
		if p.stopFollow != nil {
			p.stopFollow()
		}
		p.closing.Store(true)
		close(p.quit)
		var errs []error
		if err := p.send(procCnMcastIgnore); err != nil {
			errs = append(errs, fmt.Errorf("unsubscribe proc connector: %w", err))
		}
		if err := p.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close proc connector: %w", err))
		}
		<-p.done
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// send sends a control message (listen or ignore).
func (p *ProcConnector) send(op uint32) error {
	_, err := p.sendNonce(op)
	return err
}

// sendNonce sends a control message and returns the nonce it carries in
// cn_msg's seq and ack fields. The kernel's acknowledgement carries
// ack = nonce+1 (its seq is the kernel's own counter on recent kernels).
func (p *ProcConnector) sendNonce(op uint32) (uint32, error) {
	nonce := p.seq.Add(1)
	data := make([]byte, cnMsgLen+4)
	binary.NativeEndian.PutUint32(data[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(data[4:], cnValProc)
	binary.NativeEndian.PutUint32(data[8:], nonce)
	binary.NativeEndian.PutUint32(data[12:], nonce)
	binary.NativeEndian.PutUint16(data[16:], 4) // len of the payload
	binary.NativeEndian.PutUint32(data[cnMsgLen:], op)
	_, err := p.conn.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.Done},
		Data:   data,
	})
	return nonce, err
}

// subscribe sends PROC_CN_MCAST_LISTEN and waits for the kernel's
// acknowledgement, which carries the permission check's result. Events
// that arrive first are returned, to be delivered before the rest.
func (p *ProcConnector) subscribe() ([]Event, error) {
	nonce, err := p.sendNonce(procCnMcastListen)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", errnoHint(err))
	}
	if err := p.conn.SetReadDeadline(time.Now().Add(ackTimeout)); err != nil {
		return nil, fmt.Errorf("subscribe: set deadline: %w", err)
	}
	defer p.conn.SetReadDeadline(time.Time{})
	var pending []Event
	for {
		msgs, err := p.conn.Receive()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The kernel stays silent to callers outside the initial
				// namespaces, and to unprivileged callers when nobody
				// else listens.
				if !haveCapNetAdmin() {
					return nil, fmt.Errorf("subscribe: no acknowledgement within %s: needs CAP_NET_ADMIN", ackTimeout)
				}
				return nil, fmt.Errorf("subscribe: no acknowledgement within %s (the proc connector answers only in the initial user and PID namespaces)", ackTimeout)
			}
			if errors.Is(err, syscall.ENOBUFS) {
				pending = append(pending, Event{Kind: Overflow})
				continue
			}
			return nil, fmt.Errorf("subscribe: %w", errnoHint(err))
		}
		for _, m := range msgs {
			if ack, errno, ok := parseAck(m.Data); ok {
				if ack != nonce+1 {
					continue // another listener's acknowledgement
				}
				if errno != 0 {
					return nil, fmt.Errorf("subscribe: %w", errnoHint(syscall.Errno(errno)))
				}
				return pending, nil
			}
			if ev, ok := parseEvent(m.Data); ok {
				pending = append(pending, ev)
			}
		}
	}
}

func (p *ProcConnector) run(pending []Event) {
	defer close(p.done)
	defer close(p.events)
	for _, ev := range pending {
		if !p.emit(ev) {
			return
		}
	}
	rc, err := p.conn.SyscallConn()
	if err != nil {
		if p.closing.Load() {
			return // closed while the pending events went out
		}
		p.err = fmt.Errorf("receive proc events: %w", err)
		p.logf("%v", p.err)
		return
	}
	r := newBatchReceiver()
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = r.recv(int(fd))
			return rerr != unix.EAGAIN // false: wait until readable
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			if p.closing.Load() {
				return
			}
			if errors.Is(err, syscall.ENOBUFS) {
				p.logf("proc connector: receive buffer overflowed, events lost")
				if !p.emit(Event{Kind: Overflow}) {
					return
				}
				continue
			}
			p.err = fmt.Errorf("receive proc events: %w", err)
			p.logf("%v", p.err)
			return
		}
		for i := 0; i < n; i++ {
			ok := true
			parseDatagram(r.datagram(i), func(payload []byte) {
				if ev, isEv := parseEvent(payload); isEv && ok {
					ok = p.emit(ev)
				}
			})
			if !ok {
				return
			}
		}
	}
}

// emit delivers ev, blocking while the channel is full (the socket buffer
// then absorbs the burst, and overflows into an Overflow event), or
// publishes it on the bus, which never blocks (a subscriber that falls
// behind counts its drops). It returns false when Close was called.
func (p *ProcConnector) emit(ev Event) bool {
	if p.bus != nil {
		if ev.Kind == Fork {
			p.forksRead.Add(1)
			if !p.forks.Load() {
				return !p.closing.Load()
			}
		}
		if be, ok := ev.BusEvent(); ok {
			p.bus.Publish(be)
		}
		return !p.closing.Load()
	}
	select {
	case p.events <- ev:
		return true
	case <-p.quit:
		return false
	}
}

// parseAck recognises an acknowledgement (PROC_EVENT_NONE) and returns
// its ack field (the request's ack + 1) and its error number.
func parseAck(b []byte) (ack uint32, errno uint32, ok bool) {
	if len(b) < cnMsgLen+procEventHdr+4 {
		return 0, 0, false
	}
	if binary.NativeEndian.Uint32(b[0:]) != cnIdxProc || binary.NativeEndian.Uint32(b[4:]) != cnValProc {
		return 0, 0, false
	}
	ev := b[cnMsgLen:]
	if binary.NativeEndian.Uint32(ev[0:]) != procEventNone {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(b[12:]), binary.NativeEndian.Uint32(ev[procEventHdr:]), true
}

// parseEvent decodes a fork, exec or exit event; other kinds are ignored.
func parseEvent(b []byte) (Event, bool) {
	if len(b) < cnMsgLen+procEventHdr {
		return Event{}, false
	}
	if binary.NativeEndian.Uint32(b[0:]) != cnIdxProc || binary.NativeEndian.Uint32(b[4:]) != cnValProc {
		return Event{}, false
	}
	ev := b[cnMsgLen:]
	d := ev[procEventHdr:]
	u := func(i int) int { return int(int32(binary.NativeEndian.Uint32(d[4*i:]))) }
	switch binary.NativeEndian.Uint32(ev[0:]) {
	case procEventFork: // parent_pid, parent_tgid, child_pid, child_tgid
		if len(d) < 16 {
			return Event{}, false
		}
		return Event{Kind: Fork, ParentPID: u(0), ParentTGID: u(1), PID: u(2), TGID: u(3)}, true
	case procEventExec: // process_pid, process_tgid
		if len(d) < 8 {
			return Event{}, false
		}
		return Event{Kind: Exec, PID: u(0), TGID: u(1)}, true
	case procEventExit: // process_pid, process_tgid, exit_code, exit_signal, parent_pid, parent_tgid
		if len(d) < 12 {
			return Event{}, false
		}
		e := Event{Kind: Exit, PID: u(0), TGID: u(1), ExitCode: u(2)}
		if len(d) >= 24 {
			e.ParentPID, e.ParentTGID = u(4), u(5)
		}
		return e, true
	}
	return Event{}, false
}

// errnoHint adds what is missing to permission errors.
func errnoHint(err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("needs CAP_NET_ADMIN: %w", err)
	}
	return err
}

// haveCapNetAdmin reports whether CAP_NET_ADMIN (bit 12) is in this
// process's effective capabilities, from /proc/self/status.
func haveCapNetAdmin() bool {
	const capNetAdmin = 12
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<capNetAdmin) != 0
		}
	}
	return false
}

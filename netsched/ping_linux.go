package netsched

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Pinger sends a probe to a reflector every interval and reports each
// answer: the auto rate's delay monitor (package autorate). To an IPv4
// reflector it sends ICMP timestamp requests, whose replies carry the
// reflector's receive and transmit times: each answer gives the delay of
// each direction apart (one-way, offset by the two clocks' difference),
// so that a queue on the download path is not read as the upload's. A
// reflector that answers echo requests but not timestamps (many filter
// them; IPv6 has none) gets echo requests, and the answers give round
// trips only; a reflector that stops answering timestamps is asked with
// echoes too after silentFor, and one settled on echoes is asked for a
// timestamp now and then. Its requests carry label as their socket
// priority (the interactive lane's class), so that lanes' own upload tree
// queues them behind interactive traffic only and the delays measure the
// link's queue, not lanes'. It opens a raw ICMP socket (root) in the
// calling thread's network namespace.
type Pinger struct {
	conn   *net.IPConn
	target netip.Addr
	id     uint16
	proto  int // 1 (ICMP) or 58 (ICMPv6)
	stop   chan struct{}
	done   sync.WaitGroup

	mu     sync.Mutex
	mode   PingMode
	sent   map[pingKey]time.Time
	seq    uint16
	lost   uint64
	got    uint64
	echoes int // echo answers while probing
	// auto is set when the pinger chose its mode (timestamps asked for,
	// IPv4): it asks again when the reflector changes its mind.
	auto       bool
	lastAnswer time.Time // of a request that counts
	lastAsk    time.Time // a timestamp request sent while settled on echoes
}

// pingKey is a request: its kind and sequence number.
type pingKey struct {
	timestamp bool
	seq       uint16
}

// maxPending bounds the requests awaiting an answer, and lostAfter how
// long one waits: older ones count as lost. probeEchoes is how many echo
// answers, without a timestamp answer, settle a reflector as echo-only.
// A pinger that chose its mode probes again (both kinds) after silentFor
// without an answer to timestamps, so that a reflector that stops
// answering them (a firewall rule added) is still measured by echoes; and
// settled on echoes it asks for a timestamp every askAgain, so that one
// that starts answering them gets one-way delays again.
const (
	maxPending  = 64
	lostAfter   = 2 * time.Second
	probeEchoes = 5
	silentFor   = PingSilence
	askAgain    = 10 * time.Second
)

// ICMP timestamp message types (RFC 792).
const (
	icmpTimestamp      = 13
	icmpTimestampReply = 14
)

// StartPinger starts probing target every interval; out gets every answer
// (from the Pinger's reading goroutine: it must not block long). With
// want PingTimestamp it sends timestamp requests where target answers
// them (IPv4) and echo requests otherwise; with PingEcho, echo requests.
func StartPinger(target netip.Addr, interval time.Duration, label uint32, want PingMode, out func(PingSample)) (*Pinger, error) {
	if !target.IsValid() || interval <= 0 || (want != PingTimestamp && want != PingEcho) {
		return nil, fmt.Errorf("ping: bad target %v, interval %v or mode %v", target, interval, want)
	}
	target = target.Unmap()
	network, proto, any := "ip4:icmp", 1, "0.0.0.0"
	mode := PingProbing
	if target.Is6() {
		network, proto, any = "ip6:ipv6-icmp", 58, "::"
	}
	if target.Is6() || want == PingEcho {
		mode = PingEcho
	}
	pc, err := net.ListenPacket(network, any)
	if err != nil {
		return nil, fmt.Errorf("ping %s: open a raw ICMP socket: %w", target, err)
	}
	conn := pc.(*net.IPConn)
	if label != 0 {
		rc, err := conn.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PRIORITY, int(label))
			})
			err = errors.Join(cerr, err)
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("ping %s: label the socket %x: %w", target, label, err)
		}
	}
	var idb [2]byte
	rand.Read(idb[:])
	now := time.Now()
	p := &Pinger{conn: conn, target: target, id: binary.BigEndian.Uint16(idb[:]), proto: proto,
		stop: make(chan struct{}), sent: map[pingKey]time.Time{}, mode: mode,
		auto: mode == PingProbing, lastAnswer: now, lastAsk: now}
	p.done.Add(2)
	go p.send(interval)
	go p.read(out)
	return p, nil
}

// ID is the ICMP identifier of the pinger's requests (and of their
// replies): Enforcer.SetProbeClass classifies the replies by it.
func (p *Pinger) ID() uint16 { return p.id }

// Mode returns what the pinger sends now.
func (p *Pinger) Mode() PingMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Counts returns how many requests were answered and how many were lost
// (unanswered after lostAfter, or while maxPending later ones went out).
// While probing, the timestamp requests count neither way.
func (p *Pinger) Counts() (answered, lost uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got, p.lost
}

// Close stops the pinger and waits for its goroutines; the requests still
// unanswered count as lost.
func (p *Pinger) Close() error {
	close(p.stop)
	err := p.conn.Close()
	p.done.Wait()
	p.mu.Lock()
	for k := range p.sent {
		p.forget(k)
	}
	p.mu.Unlock()
	return err
}

// counts reports whether requests of kind k count as answered or lost in
// the current mode.
func (p *Pinger) counts(k pingKey) bool {
	return k.timestamp == (p.mode == PingTimestamp)
}

// forget drops request k as unanswered (p.mu held).
func (p *Pinger) forget(k pingKey) {
	delete(p.sent, k)
	if p.counts(k) {
		p.lost++
	}
}

// settle sets the mode once probing shows it (p.mu held): the requests of
// the other kind still pending are dropped without counting.
func (p *Pinger) settle(m PingMode) {
	p.mode = m
	for k := range p.sent {
		if !p.counts(k) {
			delete(p.sent, k)
		}
	}
}

// msOfDay is t as an ICMP timestamp: milliseconds since midnight UT.
func msOfDay(t time.Time) uint32 { return uint32(t.UnixMilli() % msPerDay) }

const msPerDay = 24 * 60 * 60 * 1000

// msBetween is b − a for two ICMP timestamps, across midnight: within
// half a day either way.
func msBetween(a, b uint32) time.Duration {
	d := (int64(b) - int64(a)) % msPerDay
	switch {
	case d > msPerDay/2:
		d -= msPerDay
	case d <= -msPerDay/2:
		d += msPerDay
	}
	return time.Duration(d) * time.Millisecond
}

func (p *Pinger) send(interval time.Duration) {
	defer p.done.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	dst := &net.IPAddr{IP: net.IP(p.target.AsSlice())}
	for {
		p.mu.Lock()
		p.seq++
		seq := p.seq
		now := time.Now()
		for k, at := range p.sent {
			if uint16(seq-k.seq) >= maxPending || now.Sub(at) > lostAfter {
				p.forget(k)
			}
		}
		if p.auto && p.mode == PingTimestamp && now.Sub(p.lastAnswer) >= silentFor {
			p.mode, p.echoes = PingProbing, 0 // both kinds again
		}
		mode := p.mode
		ask := p.auto && mode == PingEcho && now.Sub(p.lastAsk) >= askAgain
		if ask {
			p.lastAsk = now
		}
		p.mu.Unlock()
		if mode != PingEcho || ask {
			p.write(dst, pingKey{true, seq})
		}
		if mode != PingTimestamp {
			p.write(dst, pingKey{false, seq})
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// write sends request k and records when it went out.
func (p *Pinger) write(dst *net.IPAddr, k pingKey) {
	var b []byte
	var err error
	now := time.Now()
	if k.timestamp {
		// RFC 792: identifier, sequence number, then the originate,
		// receive and transmit timestamps; the reflector fills the
		// last two.
		body := make([]byte, 16)
		binary.BigEndian.PutUint16(body[0:], p.id)
		binary.BigEndian.PutUint16(body[2:], k.seq)
		binary.BigEndian.PutUint32(body[4:], msOfDay(now))
		b, err = (&icmp.Message{Type: ipv4.ICMPType(icmpTimestamp), Body: &icmp.RawBody{Data: body}}).Marshal(nil)
	} else {
		var typ icmp.Type = ipv4.ICMPTypeEcho
		if p.proto == 58 {
			typ = ipv6.ICMPTypeEchoRequest
		}
		// The kernel computes an ICMPv6 checksum itself (raw ICMPv6
		// sockets); Marshal computes ICMP's.
		b, err = (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: int(p.id), Seq: int(k.seq), Data: []byte("lanes-autorate")}}).Marshal(nil)
	}
	if err != nil {
		return
	}
	// Recorded before it goes: a near reflector's answer can be read
	// before WriteTo returns.
	p.mu.Lock()
	p.sent[k] = now
	p.mu.Unlock()
	if _, err := p.conn.WriteTo(b, dst); err != nil {
		p.mu.Lock()
		delete(p.sent, k)
		p.mu.Unlock()
	}
}

func (p *Pinger) read(out func(PingSample)) {
	defer p.done.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := p.conn.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			select {
			case <-p.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if a, ok := from.(*net.IPAddr); !ok || !a.IP.Equal(net.IP(p.target.AsSlice())) {
			continue
		}
		s, k, ok := p.parse(buf[:n], now)
		if !ok {
			continue
		}
		p.mu.Lock()
		at, ok := p.sent[k]
		if ok {
			delete(p.sent, k)
			switch {
			case p.mode == PingProbing && k.timestamp:
				p.settle(PingTimestamp)
			case p.mode == PingProbing:
				if p.echoes++; p.echoes >= probeEchoes {
					p.settle(PingEcho)
					p.lastAsk = now
				}
			case p.mode == PingEcho && k.timestamp && p.auto:
				p.settle(PingTimestamp) // answers timestamps again
			}
			ok = p.counts(k) || p.mode == PingProbing
			if ok {
				p.got++
				p.lastAnswer = now
			}
		}
		p.mu.Unlock()
		if ok {
			s.RTT, s.At = now.Sub(at), now
			out(s)
		}
	}
}

// parse reads an answer to one of the pinger's requests: its key and, for
// a timestamp reply, the one-way delays.
func (p *Pinger) parse(b []byte, now time.Time) (PingSample, pingKey, bool) {
	if len(b) < 8 || binary.BigEndian.Uint16(b[4:]) != p.id {
		return PingSample{}, pingKey{}, false
	}
	k := pingKey{seq: binary.BigEndian.Uint16(b[6:])}
	s := PingSample{Seq: k.seq}
	switch {
	case p.proto == 58 && b[0] == byte(ipv6.ICMPTypeEchoReply):
	case p.proto == 1 && b[0] == byte(ipv4.ICMPTypeEchoReply):
	case p.proto == 1 && b[0] == icmpTimestampReply && len(b) >= 20:
		k.timestamp = true
		orig, recv, xmit := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:]), binary.BigEndian.Uint32(b[16:])
		// RFC 792: a reflector without a standard clock sets the high
		// bit; its answer still times the round trip.
		if recv&(1<<31) == 0 && xmit&(1<<31) == 0 {
			s.OneWay = true
			s.Up = msBetween(orig, recv)
			s.Down = msBetween(xmit, msOfDay(now))
		}
	default:
		return PingSample{}, pingKey{}, false
	}
	return s, k, true
}

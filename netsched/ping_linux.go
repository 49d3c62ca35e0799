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

// Pinger sends an ICMP echo request to a reflector every interval and
// reports each answer's round trip: the auto rate's delay monitor
// (package autorate). Its requests carry label as their socket priority
// (the interactive lane's class), so that lanes' own upload tree queues
// them behind interactive traffic only and the round trip measures the
// link's queue, not lanes'. It opens a raw ICMP socket (root) in the
// calling thread's network namespace.
type Pinger struct {
	conn   *net.IPConn
	target netip.Addr
	id     uint16
	proto  int // 1 (ICMP) or 58 (ICMPv6)
	stop   chan struct{}
	done   sync.WaitGroup

	mu   sync.Mutex
	sent map[uint16]time.Time
	seq  uint16
	lost uint64
	got  uint64
}

// maxPending bounds the requests awaiting an answer, and lostAfter how
// long one waits: older ones count as lost.
const (
	maxPending = 64
	lostAfter  = 2 * time.Second
)

// StartPinger starts pinging target every interval; out gets every answer
// (from the Pinger's reading goroutine: it must not block long).
func StartPinger(target netip.Addr, interval time.Duration, label uint32, out func(PingSample)) (*Pinger, error) {
	if !target.IsValid() || interval <= 0 {
		return nil, fmt.Errorf("ping: bad target %v or interval %v", target, interval)
	}
	target = target.Unmap()
	network, proto, any := "ip4:icmp", 1, "0.0.0.0"
	if target.Is6() {
		network, proto, any = "ip6:ipv6-icmp", 58, "::"
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
	p := &Pinger{conn: conn, target: target, id: binary.BigEndian.Uint16(idb[:]), proto: proto,
		stop: make(chan struct{}), sent: map[uint16]time.Time{}}
	p.done.Add(2)
	go p.send(interval)
	go p.read(out)
	return p, nil
}

// Counts returns how many requests were answered and how many were lost
// (unanswered after lostAfter, or while maxPending later ones went out).
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
	p.lost += uint64(len(p.sent))
	clear(p.sent)
	p.mu.Unlock()
	return err
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
		for s, at := range p.sent {
			if uint16(seq-s) >= maxPending || now.Sub(at) > lostAfter {
				delete(p.sent, s)
				p.lost++
			}
		}
		p.mu.Unlock()
		var typ icmp.Type = ipv4.ICMPTypeEcho
		if p.proto == 58 {
			typ = ipv6.ICMPTypeEchoRequest
		}
		// The kernel computes an ICMPv6 checksum itself (raw ICMPv6
		// sockets); Marshal computes ICMP's.
		b, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: int(p.id), Seq: int(seq), Data: []byte("lanes-autorate")}}).Marshal(nil)
		if err == nil {
			now := time.Now()
			if _, err := p.conn.WriteTo(b, dst); err == nil {
				p.mu.Lock()
				p.sent[seq] = now
				p.mu.Unlock()
			}
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
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
		m, err := icmp.ParseMessage(p.proto, buf[:n])
		if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
			continue
		}
		echo, ok := m.Body.(*icmp.Echo)
		if !ok || uint16(echo.ID) != p.id {
			continue
		}
		seq := uint16(echo.Seq)
		p.mu.Lock()
		at, ok := p.sent[seq]
		if ok {
			delete(p.sent, seq)
			p.got++
		}
		p.mu.Unlock()
		if ok {
			out(PingSample{RTT: now.Sub(at), At: now, Seq: seq})
		}
	}
}

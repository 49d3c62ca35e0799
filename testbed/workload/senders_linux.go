package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pulseLowat bounds the data the pulse sender leaves unsent in its socket
// (TCP_NOTSENT_LOWAT): what it wrote during an on-window is on the wire
// about a round trip later, so that the intensity is the share of time the
// flow has data to send and not the time a large socket buffer takes to
// drain. The congestion window still grows to the path's BDP.
const pulseLowat = 16 << 10

// sendPulse writes to a TCP connection as fast as the socket takes data
// during the on-window of each period, and nothing in the rest.
func sendPulse(ctx context.Context, g GenRequest) (GenStats, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if g.CC != "" {
				if serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, g.CC); serr != nil {
					serr = fmt.Errorf("congestion control %s: %w", g.CC, serr)
					return
				}
			}
			if g.SndBuf > 0 {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, g.SndBuf); serr != nil {
					serr = fmt.Errorf("SO_SNDBUF: %w", serr)
					return
				}
			}
			if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, pulseLowat); serr != nil {
				serr = fmt.Errorf("TCP_NOTSENT_LOWAT: %w", serr)
			}
		})
		return errors.Join(err, serr)
	}}
	conn, err := d.DialContext(ctx, "tcp4", g.To)
	if err != nil {
		return GenStats{}, fmt.Errorf("pulse: dial %s: %w", g.To, err)
	}
	defer conn.Close()
	buf := make([]byte, 64<<10)
	var st GenStats
	start := time.Now()
	end := start.Add(g.Duration)
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		until, on := duty(start, now, g.Period, g.Intensity)
		if !on {
			sleepUntil(until)
			continue
		}
		if until.After(end) {
			until = end
		}
		conn.SetWriteDeadline(until)
		for time.Now().Before(until) {
			n, err := conn.Write(buf)
			st.Bytes += int64(n)
			if err != nil {
				if isTimeout(err) {
					break
				}
				return st, fmt.Errorf("pulse: write: %w", err)
			}
		}
	}
	return st, nil
}

// sendGreedy sends datagrams from a non-blocking socket with IP_RECVERR
// (without it Linux hides a qdisc's drops from UDP senders) as fast as the
// socket and the cap allow; on ENOBUFS or EAGAIN it sleeps 10–15 ms, as
// seed 003's background does.
func sendGreedy(ctx context.Context, g GenRequest) (GenStats, error) {
	ap, err := netip.ParseAddrPort(g.To)
	if err != nil || !ap.Addr().Is4() {
		return GenStats{}, fmt.Errorf("greedy: address %q: want an IPv4 host:port", g.To)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return GenStats{}, fmt.Errorf("greedy: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1); err != nil {
		return GenStats{}, fmt.Errorf("greedy: IP_RECVERR: %w", err)
	}
	// SO_SNDBUFFORCE (root) lifts the limit of net.core.wmem_max.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, g.SndBuf) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, g.SndBuf)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return GenStats{}, fmt.Errorf("greedy: connect %s: %w", g.To, err)
	}
	rng := rand.New(rand.NewPCG(g.Seed, 3))
	msg := make([]byte, g.PacketBytes)
	var st GenStats
	start := time.Now()
	end := start.Add(g.Duration)
	for i := 0; ctx.Err() == nil; i++ {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		if g.Rate > 0 {
			due := start.Add(time.Duration(float64(st.Bytes*8) / float64(g.Rate) * 1e9))
			if due.Sub(now) > time.Millisecond {
				sleepUntil(due)
			}
		}
		msg[0], msg[1], msg[2], msg[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		_, err := unix.Write(fd, msg)
		switch {
		case err == nil:
			st.Bytes += int64(len(msg))
		case errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ECONNREFUSED):
			// A full qdisc or socket, or an ICMP error for an earlier
			// datagram (IP_RECVERR reports those on the next send).
			st.Stalls++
			sleepUntil(time.Now().Add(10*time.Millisecond + time.Duration(rng.Int64N(int64(5*time.Millisecond)))))
		case errors.Is(err, unix.EINTR):
		default:
			return st, fmt.Errorf("greedy: send: %w", err)
		}
	}
	return st, nil
}

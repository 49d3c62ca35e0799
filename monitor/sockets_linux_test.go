package monitor

import (
	"net"
	"os"
	"testing"
)

// A process's UDP socket is counted through /proc/PID/io, with and
// without UDP sock_diag (anyOther: a kernel without udp_diag); a socket
// the reading does not know is not counted when UDP sock_diag answered.
func TestSocketsProcessUDP(t *testing.T) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // bound only: no traffic
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := ReadSockets()
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Process(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.Sockets < 1 || c.Events == 0 || c.Bytes == 0 {
		t.Errorf("with UDP sock_diag: %+v, want the UDP socket and this process's read/write calls and bytes", c)
	}
	for name, fallback := range map[string]*Sockets{
		"no UDP sock_diag": {tcp: s.tcp, udp: map[uint32]bool{}, anyOther: true},
		"no sock_diag":     {tcp: map[uint32]SocketCounters{}, udp: map[uint32]bool{}, procIO: true},
	} {
		c, err := fallback.Process(os.Getpid())
		if err != nil || c.Sockets < 1 || c.Events == 0 {
			t.Errorf("%s: %+v, %v: want the socket counted through /proc/PID/io", name, c, err)
		}
	}
	none := &Sockets{tcp: map[uint32]SocketCounters{}, udp: map[uint32]bool{}}
	if c, _ := none.Process(os.Getpid()); c.Sockets != 0 || c.Events != 0 {
		t.Errorf("a reading that knows none of the sockets counted %+v", c)
	}
	if _, err := s.Process(1 << 30); err != ErrGone {
		t.Errorf("a process that does not exist: %v, want ErrGone", err)
	}
}

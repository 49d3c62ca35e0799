package multinet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/intnw"
)

// The seed's sensor without Intentional Networking defers a send while
// its socket has not taken what it was given: over a loopback TCP
// connection whose peer does not read, sends go until the socket's
// buffers are full, then one is deferred, and its callback runs once the
// peer reads and the socket takes the rest; a cancelled callback never
// runs.
func TestSelectDefers(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := acceptOne(ln)
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	// Small buffers, so that they fill at once: 64 KB each way.
	c.(*net.TCPConn).SetWriteBuffer(32 << 10)
	peer.(*net.TCPConn).SetReadBuffer(32 << 10)
	s := selecting{newStream(c)}
	defer s.close()

	msg := make([]byte, 16<<10)
	ran := make(chan int, 2)
	var cancelled func() bool
	sent := 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no send deferred for long after %d messages (%d KB)", sent, sent*16)
		}
		_, cancel, err := s.sendOrDefer(intnw.BGLarge, nil, msg, func() { ran <- 1 })
		if err != nil {
			t.Fatal(err)
		}
		if cancel == nil {
			sent++
			continue
		}
		// Deferred: for a moment while the writer hands the last
		// message to the socket, or until the peer reads (the buffers
		// full).
		select {
		case <-ran:
			continue
		case <-time.After(300 * time.Millisecond):
		}
		// A second deferral, cancelled at once: its callback must never
		// run.
		_, c2, err := s.sendOrDefer(intnw.BGLarge, nil, msg, func() { ran <- 2 })
		if err != nil || c2 == nil {
			t.Fatalf("a send behind a deferred one: cancel %v, err %v; want it deferred", c2 != nil, err)
		}
		if !c2() {
			t.Fatal("cancelling a pending callback says it had run")
		}
		cancelled = c2
		break
	}
	t.Logf("deferred for good after %d messages of 16 KB", sent)
	if sent < 2 {
		t.Errorf("deferred after %d messages: the socket took none", sent)
	}
	// The peer reads everything sent: the socket takes the rest.
	go io.Copy(io.Discard, peer)
	select {
	case n := <-ran:
		if n != 1 {
			t.Fatalf("callback %d ran, want the pending one (1)", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the callback did not run after the peer read")
	}
	if cancelled() {
		t.Error("cancelling a cancelled callback says it was pending")
	}
	// With the socket's buffer free again, a send goes at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, c, err := s.sendOrDefer(intnw.BGSmall, nil, msg[:100], func() {})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		c()
		time.Sleep(20 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Error("sends still deferred 5 s after the peer began reading")
	}
	select {
	case n := <-ran:
		t.Errorf("callback %d ran again", n)
	case <-time.After(100 * time.Millisecond):
	}
}

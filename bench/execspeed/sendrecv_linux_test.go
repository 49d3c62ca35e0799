package execspeed

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inNetns runs f on a thread in the network namespace ns (None: a thread
// of its own, for f to leave the host's namespace).
func inNetns(ns netns.NsHandle, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the thread ends with the goroutine, still in ns
		if ns.IsOpen() {
			if err := netns.Set(ns); err != nil {
				panic(err)
			}
		}
		f()
	}()
	<-done
}

// TestSendReceive: the sender's datagrams reach a receiver in a network
// namespace of the test's own (198.18.0.1 on its loopback), and the
// arrivals give a rate and gaps.
func TestSendReceive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	var ns netns.NsHandle
	inNetns(netns.None(), func() {
		var err error
		if ns, err = netns.New(); err != nil {
			t.Error(err)
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err == nil {
			err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("198.18.0.1"), Mask: net.CIDRMask(32, 32)}})
		}
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	defer ns.Close()
	ctx := context.Background()
	got := make(chan *Arrivals, 1)
	go inNetns(ns, func() {
		a, err := Receive(ctx, "198.18.0.1:47123", 700*time.Millisecond, true)
		if err != nil {
			t.Error(err)
		}
		got <- a
	})
	time.Sleep(50 * time.Millisecond)
	var n int
	var err error
	inNetns(ns, func() {
		n, err = Send(ctx, SendOptions{Addr: "198.18.0.1:47123", Work: 50, Duration: 500 * time.Millisecond})
	})
	if err != nil || n == 0 {
		t.Fatalf("Send: %d, %v", n, err)
	}
	a := <-got
	if a == nil || len(a.At) == 0 || a.Bytes != len(a.At)*Payload {
		t.Fatalf("received %+v", a)
	}
	if r := a.Rate(0, time.Second); r <= 0 {
		t.Errorf("rate %g", r)
	}
	if g := a.Gaps(0, time.Second); len(g) != len(a.At)-1 {
		t.Errorf("%d gaps for %d arrivals", len(g), len(a.At))
	}
	if _, err := Send(ctx, SendOptions{Addr: "198.18.0.1:1", Work: -1, Duration: time.Second}); err == nil {
		t.Error("negative work accepted")
	}
}

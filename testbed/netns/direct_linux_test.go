package netns

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDirect: a datagram from Src reaches Dst over the pair's veth, and
// Close removes both namespaces.
func TestDirect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	d, err := NewDirect(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := make(chan string, 1)
	var pc net.PacketConn
	if err := Do(d.Dst, func() error {
		var err error
		pc, err = net.ListenPacket("udp", d.DstAddr.String()+":4711")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 100)
		pc.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, _, _ := pc.ReadFrom(buf)
		got <- string(buf[:n])
	}()
	if err := Do(d.Src, func() error {
		c, err := net.Dial("udp", d.DstAddr.String()+":4711")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "hello" {
		t.Errorf("received %q", s)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{d.Src, d.Dst} {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); !os.IsNotExist(err) {
			t.Errorf("namespace %s left: %v", ns, err)
		}
	}
}

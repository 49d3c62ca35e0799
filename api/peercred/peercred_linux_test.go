package peercred

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// The server side of a Unix socket sees this process's credentials;
// a connection that is not a Unix socket is refused, named.
func TestGet(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("unix", sock); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cr, err := Get(c)
	if err != nil {
		t.Fatal(err)
	}
	want := Creds{PID: os.Getpid(), UID: os.Getuid(), GID: os.Getgid()}
	if cr != want {
		t.Errorf("got %+v, want %+v", cr, want)
	}
	if cr.IsRoot() != (os.Getuid() == 0) {
		t.Errorf("IsRoot %v for uid %d", cr.IsRoot(), cr.UID)
	}

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		if c, err := net.Dial("tcp", tcp.Addr().String()); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	tc, err := tcp.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := Get(tc); err == nil {
		t.Error("Get on a TCP connection: no error")
	}
}

package peercred

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Get returns the credentials of the peer of a Unix socket connection.
func Get(c net.Conn) (Creds, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Creds{}, fmt.Errorf("peer credentials: %T is not a unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Creds{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Creds{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return Creds{}, fmt.Errorf("peer credentials: SO_PEERCRED: %w", serr)
	}
	return Creds{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

//go:build !linux

package intnw

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Outside Linux a path's socket is not measured (its hint stands), no
// address is watched, and namespaces and interface binding are refused.

type sockStats struct {
	rtt, minRTT  time.Duration
	deliveryRate float64
	appLimited   bool
	outq         int
	delivered    uint32
	bytesAcked   uint64
	mss          uint32
	retrans      uint32
	ok           bool
}

func readSockStats(*net.TCPConn) sockStats { return sockStats{} }

func socketQueue(*net.TCPConn) int { return 0 }

func tuneSocket(c *net.TCPConn, _ time.Duration) error { return c.SetNoDelay(true) }

func bindToDevice(string) func(string, string, syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error {
		return errors.New("intnw: binding a path to a device needs Linux")
	}
}

func (c *Conn) watchAddresses() func() { return func() {} }

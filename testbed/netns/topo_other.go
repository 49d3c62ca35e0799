//go:build !linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

func unsupported(op string) error {
	return fmt.Errorf("%s: network namespaces: %w", op, errors.ErrUnsupported)
}

// New is only implemented on Linux.
func New(paths int, logf func(string, ...any)) (*Topology, error) {
	return nil, unsupported("new topology")
}

// Close is only implemented on Linux.
func (t *Topology) Close() error { return unsupported("close topology") }

// Namespaces lists every namespace of the topology, ends first.
func (t *Topology) Namespaces() []string { return nil }

// Do is only implemented on Linux.
func Do(ns string, fn func() error) error { return unsupported("enter namespace") }

// Command is only implemented on Linux; the command it returns fails.
func Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "false")
}

// Sweep is only implemented on Linux.
func Sweep(logf func(string, ...any)) error { return unsupported("sweep") }

// LockHost is only implemented on Linux.
func LockHost(ctx context.Context, waiting func()) (func(), error) {
	return nil, unsupported("lock testbed")
}

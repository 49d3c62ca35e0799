package vmlane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// QEMU is how a guest is booted.
type QEMU struct {
	Binary  string        // qemu-system-x86_64
	MemMB   int           // guest memory
	CPUs    int           // vCPUs
	Timeout time.Duration // the whole boot, tests and power-off
	Append  string        // extra kernel command line
}

// ErrNoQEMU says that QEMU is not installed.
var ErrNoQEMU = errors.New("qemu-system-x86_64 not found: run `lanes-vmlane --install` (apt-get install qemu-system-x86 busybox-static)")

// Boot runs vmlinux with initrd under software emulation and returns the
// serial console transcript. Never KVM: /dev/kvm on the development
// machine is PVM and hangs stock kernels while burning a core. The
// console is also copied to echo as it arrives. A timeout is an error,
// returned with the transcript so far.
func (q QEMU) Boot(ctx context.Context, vmlinux, initrd string, echo io.Writer) (string, error) {
	bin, err := exec.LookPath(q.Binary)
	if err != nil {
		return "", ErrNoQEMU
	}
	ctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	args := []string{
		"-nodefaults", "-no-reboot", "-display", "none",
		// thread=single: with multi-threaded TCG, a vCPU can run a stale
		// translation of kernel text that another vCPU is patching with
		// int3 (static keys), and the 7.x guest oopses ("Oops: int3" in
		// get_page_from_freelist). One host thread also leaves the other
		// core of a shared machine free.
		"-accel", "tcg,thread=single", "-cpu", "max", "-M", "q35",
		"-smp", strconv.Itoa(q.CPUs), "-m", strconv.Itoa(q.MemMB) + "M",
		"-serial", "stdio",
		"-kernel", vmlinux, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet loglevel=1 " + q.Append,
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	w := io.Writer(&out)
	if echo != nil {
		w = io.MultiWriter(&out, echo)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return out.String(), fmt.Errorf("qemu: no power-off within %s (killed)", q.Timeout)
	}
	if err != nil {
		return out.String(), fmt.Errorf("qemu: %w", err)
	}
	return out.String(), nil
}

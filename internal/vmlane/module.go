package vmlane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SelfRel is this package: its own tests boot VMs and are never run
// inside one.
const SelfRel = "internal/vmlane"

// InstallPackages are the Debian packages the lane needs on the host
// (debootstrap builds the systemd guest's root filesystem, kmod's depmod
// indexes its modules).
var InstallPackages = []string{"qemu-system-x86", "busybox-static", "iproute2", "xz-utils", "zstd", "debootstrap", "kmod"}

// ModuleRoot returns the directory of the Go module the command runs in
// (the lanes repository, whose packages the lane builds).
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := goCmd(ctx, "", nil, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module: run lanes-vmlane from the lanes repository")
	}
	return filepath.Dir(gomod), nil
}

package vmlane

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestRemoveBuildUnmounts checks that a rootfs build directory with file
// systems left mounted in it (as a killed debootstrap leaves proc and
// sys) is unmounted and removed, and that nothing outside it is touched.
func TestRemoveBuildUnmounts(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	build := filepath.Join(dir, ".build-1")
	keep := filepath.Join(dir, ".build-10") // a name that build is a prefix of
	for _, d := range []string{filepath.Join(build, "root/proc"), filepath.Join(build, "root/sys"), keep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(build, "root/proc"), filepath.Join(build, "root/sys"), keep} {
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { syscall.Unmount(keep, syscall.MNT_DETACH) })
	if err := removeBuild(build); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", build, err)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mounts), " "+keep+" ") {
		t.Errorf("%s was unmounted too", keep)
	}
	if strings.Contains(string(mounts), build+"/") {
		t.Errorf("a mount under %s is left", build)
	}
}

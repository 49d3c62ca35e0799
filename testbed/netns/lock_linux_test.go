//go:build linux

package netns

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestFlockHolders(t *testing.T) {
	locks := "1: FLOCK  ADVISORY  WRITE 4830 fe:00:9773057 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 1275 fe:00:9773057 0 EOF\n" +
		"2: FLOCK  ADVISORY  READ 77 fe:00:9773057 0 EOF\n" +
		"3: POSIX  ADVISORY  WRITE 88 fe:00:9773057 0 EOF\n" +
		"4: FLOCK  ADVISORY  WRITE 99 fe:00:1234 0 EOF\n" +
		"5: FLOCK  ADVISORY  WRITE 100 103:02:9773057 0 EOF\n"
	for _, tt := range []struct {
		major, minor uint32
		ino          uint64
		want         []int
	}{
		{0xfe, 0, 9773057, []int{4830}}, // the waiter (->), a shared and a POSIX lock are not holders
		{0xfe, 0, 1234, []int{99}},
		{0x103, 2, 9773057, []int{100}}, // majors above 0xff print in three digits
		{0xfe, 1, 9773057, nil},
	} {
		got := flockHolders(locks, tt.major, tt.minor, tt.ino)
		if len(got) != len(tt.want) {
			t.Errorf("%x:%x:%d: holders %v, want %v", tt.major, tt.minor, tt.ino, got, tt.want)
			continue
		}
		for _, pid := range tt.want {
			if !got[pid] {
				t.Errorf("%x:%x:%d: holders %v, want %v", tt.major, tt.minor, tt.ino, got, tt.want)
			}
		}
	}
}

// lockChildEnv names the lock file that TestLockChild takes when the test
// binary is run again under flock(1).
const lockChildEnv = "LANES_TEST_LOCK_CHILD"

// Run under `flock FILE`, a testbed user must not wait for the lock its
// ancestor holds for it; a lock held by another process (here a sibling
// flock) must still be waited for.
func TestLockUnderAncestor(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	path := filepath.Join(t.TempDir(), "testbed.lock")

	// Ancestor: flock runs this test binary's TestLockChild.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "flock", "-w", "5", path, os.Args[0], "-test.run=^TestLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lock under an ancestor's flock: %v\n%s", err, out)
	}

	// Not an ancestor: a sibling flock holds the file.
	holder := exec.Command("flock", path, "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		holders, err := lockHolders(f)
		if err != nil {
			t.Fatal(err)
		}
		if holders[holder.Process.Pid] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sibling flock did not take the lock within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer wcancel()
	unlock, err := lockFile(wctx, path, nil)
	if err == nil {
		unlock()
		t.Fatal("took a lock that a sibling holds")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock held by a sibling: %v, want a wait until the deadline", err)
	}
}

// TestLockChild is TestLockUnderAncestor's child, run under flock(1).
func TestLockChild(t *testing.T) {
	path := os.Getenv(lockChildEnv)
	if path == "" {
		t.Skip("run by TestLockUnderAncestor")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	unlock, err := lockFile(ctx, path, nil)
	if err != nil {
		t.Fatalf("lock held by an ancestor: %v", err)
	}
	unlock()
}

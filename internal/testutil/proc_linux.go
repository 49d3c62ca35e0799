package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ProcCPUTime returns the CPU time (user + system) a process has used, from
// /proc/PID/stat, in USER_HZ (1/100 s) resolution.
func ProcCPUTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(ut+st) * time.Second / 100
}

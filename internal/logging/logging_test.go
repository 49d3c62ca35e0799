package logging

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestJournal(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"info with attrs", func(l *slog.Logger) { l.Info("lanesd listening", "socket", "/run/lanes/lanes.sock") }, "<6>lanesd listening socket=/run/lanes/lanes.sock\n"},
		{"warning", func(l *slog.Logger) { l.Warn("reload failed") }, "<4>reload failed\n"},
		{"error", func(l *slog.Logger) { l.Error("restore", "err", "busy") }, "<3>restore err=busy\n"},
		{"one word", func(l *slog.Logger) { l.Info("bye") }, "<6>bye\n"},
		{"quotes kept inside", func(l *slog.Logger) { l.Info(`moved "x"`, "n", 2) }, "<6>moved \"x\" n=2\n"},
		{"debug filtered", func(l *slog.Logger) { l.Debug("noise") }, ""},
		{"with attrs", func(l *slog.Logger) { l.With("lane", "background").Warn("cap") }, "<4>cap lane=background\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			tt.log(New(&b, slog.LevelInfo, true))
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, slog.LevelWarn, false)
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "level=WARN msg=shown k=1") || !strings.Contains(s, "time=") {
		t.Errorf("text log %q", s)
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want slog.Level
		err  bool
	}{
		{"debug", slog.LevelDebug, false}, {"INFO", slog.LevelInfo, false}, {"", slog.LevelInfo, false},
		{"warning", slog.LevelWarn, false}, {"warn", slog.LevelWarn, false}, {"error", slog.LevelError, false},
		{"loud", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseLevel(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// ToJournal matches $JOURNAL_STREAM against the file's device and inode.
func TestToJournal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env  string
		want bool
	}{
		{"", false},
		{"garbage", false},
		{strings.Join([]string{u(uint64(st.Dev)), u(st.Ino)}, ":"), true},
		{strings.Join([]string{u(uint64(st.Dev)), u(st.Ino + 1)}, ":"), false},
	}
	for _, tt := range tests {
		t.Setenv("JOURNAL_STREAM", tt.env)
		if got := ToJournal(f); got != tt.want {
			t.Errorf("JOURNAL_STREAM=%q: %v, want %v", tt.env, got, tt.want)
		}
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

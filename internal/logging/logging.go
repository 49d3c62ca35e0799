package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ParseLevel reads a --log-level value: debug, info, warn(ing) or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}

// New returns a logger writing to w at level and above: journald's
// format when journal is true, else slog's text format.
func New(w io.Writer, level slog.Level, journal bool) *slog.Logger {
	if journal {
		return slog.New(newJournal(w, level))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// ToJournal tells whether f is the stream systemd connected to the
// journal for this service ($JOURNAL_STREAM names its device and inode,
// see systemd.exec(5)): a descriptor merely inherited from a service by
// a child run elsewhere does not match.
func ToJournal(f *os.File) bool {
	v := os.Getenv("JOURNAL_STREAM")
	dev, ino, ok := strings.Cut(v, ":")
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	d, err1 := strconv.ParseUint(dev, 10, 64)
	i, err2 := strconv.ParseUint(ino, 10, 64)
	return err1 == nil && err2 == nil && uint64(st.Dev) == d && st.Ino == i
}

// Printf adapts a logger to the printf-style log functions of the
// packages (level info).
func Printf(l *slog.Logger, level slog.Level) func(string, ...any) {
	return func(format string, args ...any) {
		if l.Enabled(context.Background(), level) {
			l.Log(context.Background(), level, fmt.Sprintf(format, args...))
		}
	}
}

// journal formats records as "<prio>message key=value ...": slog's text
// format without the time and level, which journald keeps in its own
// fields.
type journal struct {
	mu    *sync.Mutex
	buf   *bytes.Buffer
	inner slog.Handler // writes into buf
	w     io.Writer
}

func newJournal(w io.Writer, level slog.Level) *journal {
	buf := &bytes.Buffer{}
	inner := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		}})
	return &journal{mu: &sync.Mutex{}, buf: buf, inner: inner, w: w}
}

// priority is the syslog priority of a level: err 3, warning 4, info 6,
// debug 7.
func priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

func (j *journal) Enabled(ctx context.Context, l slog.Level) bool { return j.inner.Enabled(ctx, l) }

func (j *journal) Handle(ctx context.Context, r slog.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf.Reset()
	if err := j.inner.Handle(ctx, r); err != nil {
		return err
	}
	// The text handler writes `msg="the message" k=v`: the journal shows
	// the message itself first.
	line := j.buf.String()
	if rest, ok := strings.CutPrefix(line, "msg="); ok {
		if msg, tail, err := unquoteHead(rest); err == nil {
			line = msg + tail
		}
	}
	_, err := fmt.Fprintf(j.w, "<%d>%s", priority(r.Level), line)
	return err
}

// unquoteHead splits a text-handler value at its end: the (unquoted)
// value and what follows it.
func unquoteHead(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		v, tail, _ := strings.Cut(s, " ")
		if tail != "" {
			tail = " " + tail
		} else {
			v = strings.TrimSuffix(v, "\n")
			tail = "\n"
		}
		return v, tail, nil
	}
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}

func (j *journal) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &journal{mu: j.mu, buf: j.buf, inner: j.inner.WithAttrs(attrs), w: j.w}
}

func (j *journal) WithGroup(name string) slog.Handler {
	return &journal{mu: j.mu, buf: j.buf, inner: j.inner.WithGroup(name), w: j.w}
}

package procwatch

import (
	"errors"
	"testing"
	"time"
)

// A path is read once per ExeID a TTL; errors are not kept.
func TestExePaths(t *testing.T) {
	var c ExePaths
	t0 := time.Unix(1000, 0)
	a, b := ExeID{1, 2, 3}, ExeID{1, 2, 4}
	reads := 0
	read := func(p string, err error) func() (string, error) {
		return func() (string, error) { reads++; return p, err }
	}
	for i, s := range []struct {
		id        ExeID
		at        time.Duration
		read      func() (string, error)
		want      string
		wantErr   bool
		wantReads int
	}{
		{id: a, at: 0, read: read("/usr/bin/make", nil), want: "/usr/bin/make", wantReads: 1},
		{id: a, at: 500 * time.Millisecond, read: read("/renamed", nil), want: "/usr/bin/make", wantReads: 1},
		{id: b, at: 600 * time.Millisecond, read: read("/usr/bin/cc", nil), want: "/usr/bin/cc", wantReads: 2},
		{id: a, at: time.Second, read: read("/renamed", nil), want: "/renamed", wantReads: 3},
		{id: b, at: 2 * time.Second, read: read("", errors.New("gone")), wantErr: true, wantReads: 4},
		{id: b, at: 2 * time.Second, read: read("/usr/bin/cc", nil), want: "/usr/bin/cc", wantReads: 5},
		{id: b, at: time.Second, read: read("/earlier", nil), want: "/earlier", wantReads: 6}, // a clock that went back
	} {
		got, err := c.Path(s.id, t0.Add(s.at), s.read)
		if (err != nil) != s.wantErr || got != s.want || reads != s.wantReads {
			t.Errorf("step %d: %q, %v after %d reads; want %q, error %v, %d reads", i, got, err, reads, s.want, s.wantErr, s.wantReads)
		}
	}
}

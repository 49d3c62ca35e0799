package testutil

import (
	"fmt"
	"slices"
	"testing"
)

// recorder is a testing.TB that keeps what Attempts reports.
type recorder struct {
	testing.TB
	errors, logs []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func TestAttempts(t *testing.T) {
	for _, tt := range []struct {
		name      string
		n         int
		misses    [][]string // what each try misses; past the end: nothing
		wantTries int
		wantErrs  []string
		wantLogs  int
	}{
		{"first try meets", 3, nil, 1, nil, 0},
		{"second try meets", 3, [][]string{{"slow"}}, 2, nil, 2},
		{"every try misses: the last try's misses fail", 3, [][]string{{"a"}, {"b", "c"}, {"d"}}, 3, []string{"d"}, 3},
		{"one try", 1, [][]string{{"a", "b"}}, 1, []string{"a", "b"}, 0},
		{"n below one is one try", 0, [][]string{{"a"}}, 1, []string{"a"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			tries := 0
			Attempts(r, tt.n, func(try int) []string {
				tries++
				if try != tries {
					t.Errorf("try numbered %d, want %d", try, tries)
				}
				if try <= len(tt.misses) {
					return tt.misses[try-1]
				}
				return nil
			})
			if tries != tt.wantTries {
				t.Errorf("%d tries, want %d", tries, tt.wantTries)
			}
			if !slices.Equal(r.errors, tt.wantErrs) {
				t.Errorf("errors %q, want %q", r.errors, tt.wantErrs)
			}
			if len(r.logs) != tt.wantLogs {
				t.Errorf("logged %q, want %d lines", r.logs, tt.wantLogs)
			}
		})
	}
}

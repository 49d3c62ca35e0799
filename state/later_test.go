package state

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPutLater: staged entries are invisible to the database until a
// flush, which every reader does first; a dropped entry never reaches
// it; Close writes what is staged.
func TestPutLater(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(KindProc, "1", "old"); err != nil {
		t.Fatal(err)
	}
	s.PutLater([]Entry{{Kind: KindProc, Key: "1", Value: "new"}, {Kind: KindProc, Key: "2", Value: "two"}, {Kind: KindProc, Key: "3", JSON: []byte(`"three"`)}})
	if n := s.Staged(); n != 3 {
		t.Fatalf("Staged = %d, want 3", n)
	}
	// Dropping 1 (staged over a stored record) leaves the stored one;
	// 4 was never staged and is handed back for DeleteMany.
	if rest := s.DropLater(KindProc, []string{"1", "4"}); !slices.Equal(rest, []string{"4"}) {
		t.Errorf("DropLater = %v, want [4]", rest)
	}
	if err := s.FlushOlder(time.Hour, 100); err != nil || s.Staged() != 2 {
		t.Errorf("FlushOlder(1h, 100) = %v with %d staged, want nothing flushed", err, s.Staged())
	}
	if err := s.FlushOlder(time.Hour, 1); err != nil || s.Staged() != 0 {
		t.Errorf("FlushOlder(1h, 1) = %v with %d staged, want all flushed", err, s.Staged())
	}
	// Only what is old enough goes: 7 was staged before 8 and the cut.
	s.PutLater([]Entry{{Kind: KindProc, Key: "7", Value: "seven"}})
	time.Sleep(30 * time.Millisecond)
	s.PutLater([]Entry{{Kind: KindProc, Key: "8", Value: "eight"}})
	if err := s.FlushOlder(20*time.Millisecond, 100); err != nil || s.Staged() != 1 {
		t.Errorf("FlushOlder(20ms, 100) = %v with %d staged, want 8 left staged", err, s.Staged())
	}
	if rest := s.DropLater(KindProc, []string{"7", "8"}); !slices.Equal(rest, []string{"7"}) {
		t.Errorf("DropLater(7, 8) = %v, want [7] (flushed), 8 cancelled", rest)
	}
	if err := s.DeleteMany(KindProc, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	// Staged again, an entry is as old as its latest staging.
	s.PutLater([]Entry{{Kind: KindProc, Key: "9", Value: "nine"}})
	time.Sleep(30 * time.Millisecond)
	s.PutLater([]Entry{{Kind: KindProc, Key: "9", Value: "nine again"}})
	if err := s.FlushOlder(20*time.Millisecond, 100); err != nil || s.Staged() != 1 {
		t.Errorf("FlushOlder(20ms, 100) = %v with %d staged, want 9 left staged (staged again since)", err, s.Staged())
	}
	if rest := s.DropLater(KindProc, []string{"9"}); len(rest) != 0 {
		t.Errorf("DropLater(9) = %v, want it cancelled", rest)
	}
	s.PutLater([]Entry{{Kind: KindProc, Key: "5", Value: "five"}})
	tests := []struct {
		key, want string
	}{
		{"1", "old"}, {"2", "two"}, {"3", "three"}, {"5", "five"},
	}
	for _, tt := range tests {
		var got string
		if err := s.Get(KindProc, tt.key, &got); err != nil || got != tt.want {
			t.Errorf("Get(%s) = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
	s.PutLater([]Entry{{Kind: KindProc, Key: "6", Value: "six"}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got string
	if err := s.Get(KindProc, "6", &got); err != nil || got != "six" {
		t.Errorf("after Close and Open: Get(6) = %q, %v; want six", got, err)
	}
	if err := s.Get(KindProc, "4", &got); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(4) = %v, want ErrNotFound", err)
	}
	recs, err := s.List(KindProc)
	if err != nil || len(recs) != 5 {
		t.Errorf("List = %d records, %v; want 5", len(recs), err)
	}
}

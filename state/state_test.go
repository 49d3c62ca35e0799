package state

import (
	"errors"
	"testing"
)

func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	type grp struct{ Paths []string }
	steps := []struct {
		op       string
		kind     string
		key      string
		val      grp
		wantN    int
		wantPath string
	}{
		{"put", KindGroup, "lanes-background", grp{[]string{"/a"}}, 1, "/a"},
		{"put", KindGroup, "lanes-interactive", grp{[]string{"/b"}}, 2, "/b"},
		{"put", KindGroup, "lanes-background", grp{[]string{"/c"}}, 2, "/c"}, // replace
		{"del", KindGroup, "lanes-interactive", grp{}, 1, ""},
		{"del", KindGroup, "missing", grp{}, 1, ""},
	}
	for _, st := range steps {
		switch st.op {
		case "put":
			if err := s.Put(st.kind, st.key, st.val); err != nil {
				t.Fatal(err)
			}
			var got grp
			if err := s.Get(st.kind, st.key, &got); err != nil {
				t.Fatal(err)
			}
			if got.Paths[0] != st.wantPath {
				t.Errorf("%s %s: got %v want %s", st.op, st.key, got, st.wantPath)
			}
		case "del":
			if err := s.Delete(st.kind, st.key); err != nil {
				t.Fatal(err)
			}
			var got grp
			if err := s.Get(st.kind, st.key, &got); !errors.Is(err, ErrNotFound) {
				t.Errorf("get after delete: %v, want ErrNotFound", err)
			}
		}
		if n, err := s.Count(); err != nil || n != st.wantN {
			t.Errorf("after %s %s: count %d (%v), want %d", st.op, st.key, n, err, st.wantN)
		}
	}
	// Survives reopening: what a restart after a crash sees.
	s.Close()
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	recs, err := s2.List(KindGroup)
	if err != nil || len(recs) != 1 || recs[0].Key != "lanes-background" {
		t.Fatalf("after reopen: %v %v", recs, err)
	}
}

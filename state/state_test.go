package state

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// Open refuses every kind of damage seen, with a *CorruptError, and
// MoveAside lets a new store start.
func TestOpenDetectsCorruption(t *testing.T) {
	// fill writes a store with records and leaves it as a crash would
	// (ckpt false: the records only in the write-ahead log) or a clean
	// close (true: in the database file).
	fill := func(t *testing.T, dir string, ckpt bool) string {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := s.Put(KindProc, strconv.Itoa(i), map[string]int{"pid": i}); err != nil {
				t.Fatal(err)
			}
		}
		if !ckpt {
			// Keep the log: copy it away before Close folds it in.
			wal, err := os.ReadFile(s.Path() + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			os.WriteFile(s.Path()+"-wal", wal, 0o600)
			return s.Path()
		}
		s.Close()
		return s.Path()
	}
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7919 + 13)
		}
		return b
	}
	cases := []struct {
		name    string
		ckpt    bool
		corrupt func(t *testing.T, path string)
		want    string // in the error
	}{
		{"truncated to 0 bytes", true, func(t *testing.T, p string) { os.Truncate(p, 0) }, "empty"},
		{"garbage write-ahead log", false, func(t *testing.T, p string) {
			fi, _ := os.Stat(p + "-wal")
			os.WriteFile(p+"-wal", garbage(int(fi.Size())), 0o600)
		}, "write-ahead log"},
		{"random bytes in the file", true, func(t *testing.T, p string) {
			fi, _ := os.Stat(p)
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.WriteAt(garbage(int(fi.Size())-100), 100)
			f.Close()
		}, "corrupt"},
		{"not a database", true, func(t *testing.T, p string) { os.WriteFile(p, garbage(8192), 0o600) }, "SQLite cannot read it"},
		{"malformed schema", true, func(t *testing.T, p string) {
			db, err := sql.Open("sqlite", "file:"+p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.Exec(`PRAGMA writable_schema = ON`)
			if _, err := db.Exec(`UPDATE sqlite_master SET sql = 'CREATE TABLE objects (kind' WHERE name = 'objects'`); err != nil {
				t.Fatal(err)
			}
		}, "corrupt"},
		{"foreign table", true, func(t *testing.T, p string) {
			db, _ := sql.Open("sqlite", "file:"+p)
			defer db.Close()
			db.Exec(`DROP TABLE objects`)
			if _, err := db.Exec(`CREATE TABLE objects (a, b)`); err != nil {
				t.Fatal(err)
			}
		}, "columns"},
		{"a directory", true, func(t *testing.T, p string) { os.Remove(p); os.Mkdir(p, 0o700) }, "regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.corrupt(t, fill(t, dir, c.ckpt))
			_, err := Open(dir)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open: %v, want it to say %q", err, c.want)
			}
			if c.name == "a directory" {
				os.RemoveAll(filepath.Join(dir, FileName))
			} else if aside, err := MoveAside(dir); err != nil {
				t.Fatalf("MoveAside: %v", err)
			} else if _, err := os.Stat(aside); err != nil {
				t.Errorf("moved aside to %s: %v", aside, err)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatalf("Open after moving aside: %v", err)
			}
			defer s.Close()
			if n, err := s.Count(); err != nil || n != 0 {
				t.Errorf("new store: %d records (%v)", n, err)
			}
		})
	}
}

// A store reopened after a clean close or a crash is not reported.
func TestOpenSoundStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.PutMany([]Entry{{Kind: KindProc, Key: "1", Value: 1}, {Kind: KindProc, Key: "2", JSON: []byte("2")}})
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if err := s.DeleteMany(KindProc, []string{"1", "3"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count(); n != 1 {
		t.Errorf("after PutMany and DeleteMany: %d records, want 1", n)
	}
}

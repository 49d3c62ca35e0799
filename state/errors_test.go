package state

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every operation says what it was doing when it fails, and a failed
// write leaves the store as it was.
func TestStoreErrors(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(KindProc, "1", map[string]int{"pid": 1}); err != nil {
		t.Fatal(err)
	}
	unencodable := map[string]any{"ch": make(chan int)}
	var n int
	for _, tt := range []struct {
		name string
		op   func() error
		want string
		is   error
	}{
		{"put unencodable", func() error { return s.Put(KindProc, "2", unencodable) }, "encode proc 2", nil},
		{"get missing", func() error { var v any; return s.Get(KindProc, "9", &v) }, "proc 9", ErrNotFound},
		{"get into the wrong type", func() error { return s.Get(KindProc, "1", &n) }, "decode proc 1", nil},
		{"put many, one unencodable", func() error {
			return s.PutMany([]Entry{{Kind: KindProc, Key: "3", Value: 3}, {Kind: KindProc, Key: "4", Value: unencodable}})
		}, "encode proc 4", nil},
		{"put many, raw JSON kept as given", func() error {
			return s.PutMany([]Entry{{Kind: KindProc, Key: "5", JSON: []byte(`{"pid":5}`)}})
		}, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
	// The failed PutMany is all or nothing: 3 was not kept either.
	var v any
	if err := s.Get(KindProc, "3", &v); !errors.Is(err, ErrNotFound) {
		t.Errorf("record 3 of a failed batch: %v, want ErrNotFound (rolled back)", err)
	}
	if c, err := s.Count(); err != nil || c != 2 {
		t.Errorf("count %d (%v), want 2 (records 1 and 5)", c, err)
	}
}

// A closed store fails every operation with an error naming it.
func TestClosedStore(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var v any
	for _, tt := range []struct {
		name string
		op   func() error
		want string
	}{
		{"put", func() error { return s.Put(KindProc, "1", 1) }, "record proc 1"},
		{"get", func() error { return s.Get(KindProc, "1", &v) }, "read proc 1"},
		{"delete", func() error { return s.Delete(KindProc, "1") }, "forget proc 1"},
		{"list", func() error { _, err := s.List(KindProc); return err }, "list proc"},
		{"count", func() error { _, err := s.Count(); return err }, "count records"},
		{"put many", func() error { return s.PutMany([]Entry{{Kind: KindProc, Key: "1", Value: 1}}) }, "begin"},
		{"delete many", func() error { return s.DeleteMany(KindProc, []string{"1"}) }, "begin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "closed") {
				t.Errorf("on a closed store: %v, want an error with %q and \"closed\"", err, tt.want)
			}
		})
	}
	// Empty batches need no database.
	if err := s.PutMany(nil); err != nil {
		t.Errorf("PutMany(nil) on a closed store: %v", err)
	}
	if err := s.DeleteMany(KindProc, nil); err != nil {
		t.Errorf("DeleteMany(nil) on a closed store: %v", err)
	}
}

// Open cannot make its directory where a file is.
func TestOpenStateDirIsAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(f)
	if err == nil || !strings.Contains(err.Error(), "create state dir") {
		t.Fatalf("Open(a file): %v, want a create state dir error", err)
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		t.Errorf("Open(a file) = %v: not a corrupt store", err)
	}
}

// walHeader builds a valid WAL header with the given magic (byte order).
func walHeader(magic, version uint32) []byte {
	b := make([]byte, walHeaderLen)
	binary.BigEndian.PutUint32(b[0:], magic)
	binary.BigEndian.PutUint32(b[4:], version)
	binary.BigEndian.PutUint32(b[8:], 4096)
	var order binary.ByteOrder = binary.LittleEndian
	if magic == walMagicBE {
		order = binary.BigEndian
	}
	var s0, s1 uint32
	for i := 0; i < 24; i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	binary.BigEndian.PutUint32(b[24:], s0)
	binary.BigEndian.PutUint32(b[28:], s1)
	return b
}

func TestCheckWALHeader(t *testing.T) {
	badSum := walHeader(walMagicLE, walVersion)
	badSum[31] ^= 1
	for _, tt := range []struct {
		name string
		b    []byte
		want string // "" for a valid (or ignorable) header
	}{
		{"little-endian checksums", walHeader(walMagicLE, walVersion), ""},
		{"big-endian checksums", walHeader(walMagicBE, walVersion), ""},
		{"shorter than a header", []byte{1, 2, 3}, ""},
		{"no magic", walHeader(0x12345678, walVersion), "no WAL magic"},
		{"other version", walHeader(walMagicLE, 3007001), "format version 3007001"},
		{"bad checksum", badSum, "bad header checksum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := checkWALHeader(tt.b)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("checkWALHeader = %q, want %q", got, tt.want)
			}
		})
	}
}

// A write-ahead log that cannot be read is reported, naming it, and the
// corrupt error unwraps to the cause.
func TestOpenUnreadableWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	wal := filepath.Join(dir, FileName+"-wal")
	os.Remove(wal)
	if err := os.Mkdir(wal, 0o700); err != nil { // reading a directory fails, for root too
		t.Fatal(err)
	}
	_, err = Open(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cannot read its write-ahead log") {
		t.Fatalf("Open with an unreadable log: %v", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || ce.Unwrap() == nil {
		t.Errorf("the corrupt error does not unwrap to the read error: %v", err)
	}
}

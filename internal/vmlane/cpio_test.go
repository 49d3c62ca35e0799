package vmlane

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

type cpioFile struct {
	mode         uint32
	data         string
	major, minor uint32
}

// readCpio parses a newc archive independently of the writer.
func readCpio(t *testing.T, b []byte) (map[string]cpioFile, []string) {
	t.Helper()
	files := map[string]cpioFile{}
	var order []string
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("bad header at %d: %v", off, err)
		}
		return uint32(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic at %d", off)
		}
		mode, size, major, minor, nameSize := field(1), int(field(6)), field(9), field(10), int(field(11))
		name := string(b[off+110 : off+110+nameSize-1])
		dataOff := align(off + 110 + nameSize)
		if name == "TRAILER!!!" {
			if rest := b[dataOff:]; len(rest) != 0 {
				t.Fatalf("%d bytes after the trailer", len(rest))
			}
			return files, order
		}
		files[name] = cpioFile{mode, string(b[dataOff : dataOff+size]), major, minor}
		order = append(order, name)
		off = align(dataOff + size)
	}
}

func TestWriteCpio(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host.bin")
	if err := os.WriteFile(host, []byte("from the host!"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := Tree{}
	tr.File("init", 0o755, []byte("#!/bin/sh\n"))
	tr.Copy("/usr/sbin/tc", 0o755, host)
	tr.Symlink("bin/sh", "/bin/busybox")
	tr.CharDev("dev/console", 5, 1)
	tr.Dir("a/b/c")
	var buf bytes.Buffer
	n, err := tr.WriteCpio(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || n%4 != 0 {
		t.Errorf("wrote %d bytes, buffer %d", n, buf.Len())
	}
	files, order := readCpio(t, buf.Bytes())
	want := map[string]cpioFile{
		"init":        {modeFile | 0o755, "#!/bin/sh\n", 0, 0},
		"usr":         {modeDir | 0o755, "", 0, 0},
		"usr/sbin":    {modeDir | 0o755, "", 0, 0},
		"usr/sbin/tc": {modeFile | 0o755, "from the host!", 0, 0},
		"bin":         {modeDir | 0o755, "", 0, 0},
		"bin/sh":      {modeLink | 0o777, "/bin/busybox", 0, 0},
		"dev":         {modeDir | 0o755, "", 0, 0},
		"dev/console": {modeChar | 0o600, "", 5, 1},
		"a":           {modeDir | 0o755, "", 0, 0},
		"a/b":         {modeDir | 0o755, "", 0, 0},
		"a/b/c":       {modeDir | 0o755, "", 0, 0},
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("archive holds\n%v\nwant\n%v", files, want)
	}
	seen := map[string]bool{}
	for _, name := range order {
		if dir := filepath.Dir(name); dir != "." && !seen[dir] {
			t.Errorf("%s comes before its directory %s", name, dir)
		}
		seen[name] = true
	}
}

// TestTreeOwnerAndMode checks that Chown and Chmod reach the archive's
// headers (uid, gid, and mode with setuid and sticky bits) and that
// Chmod keeps the entry's type.
func TestTreeOwnerAndMode(t *testing.T) {
	tr := Tree{}
	tr.File("usr/bin/chage", 0o755, []byte("x"))
	tr.Chmod("usr/bin/chage", 0o2755)
	tr.Chown("usr/bin/chage", 0, 42)
	tr.Dir("tmp")
	tr.Chmod("tmp", 0o1777)
	tr.Chown("nothing/here", 1, 1) // no entry: nothing happens
	var buf bytes.Buffer
	if _, err := tr.WriteCpio(&buf); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr["nothing/here"]; ok {
		t.Error("Chown added an entry")
	}
	header := func(name string) (mode, uid, gid uint64) {
		b := buf.Bytes()
		i := bytes.Index(b, []byte(name+"\x00"))
		if i < 110 {
			t.Fatalf("%s not in the archive", name)
		}
		h := b[i-110 : i]
		f := func(n int) uint64 {
			v, err := strconv.ParseUint(string(h[6+8*n:14+8*n]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		return f(1), f(2), f(3)
	}
	if mode, uid, gid := header("usr/bin/chage"); mode != modeFile|0o2755 || uid != 0 || gid != 42 {
		t.Errorf("usr/bin/chage: mode %o uid %d gid %d, want %o 0 42", mode, uid, gid, modeFile|0o2755)
	}
	if mode, _, _ := header("tmp"); mode != modeDir|0o1777 {
		t.Errorf("tmp: mode %o, want %o", mode, modeDir|0o1777)
	}
}

func TestBzImagePayload(t *testing.T) {
	xz := []byte{0xfd, '7', 'z', 'X', 'Z', 0, 1, 2, 3, 4, 5, 6}
	tests := []struct {
		name     string
		payload  []byte
		setup    byte
		wantCmd  string
		wantSize bool
		wantErr  bool
	}{
		{"xz", xz, 27, "xz", true, false},
		{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 9, 9, 9, 9}, 30, "zstd", true, false},
		{"gzip, setup_sects 0 means 4", []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0, "gzip", false, false},
		{"unknown", []byte{1, 2, 3, 4, 5, 6}, 10, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sects := int(tt.setup)
			if sects == 0 {
				sects = 4
			}
			pm := (sects + 1) * 512
			img := make([]byte, pm+100+len(tt.payload)+50)
			img[0x1f1] = tt.setup
			copy(img[0x202:], "HdrS")
			binary.LittleEndian.PutUint32(img[0x248:], 100)
			binary.LittleEndian.PutUint32(img[0x24c:], uint32(len(tt.payload)))
			copy(img[pm+100:], tt.payload)
			got, err := bzImagePayload(img)
			if err != nil || !bytes.Equal(got, tt.payload) {
				t.Fatalf("payload %x %v, want %x", got, err, tt.payload)
			}
			argv, sized, err := payloadDecompressor(got)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decompressor error %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (argv[0] != tt.wantCmd || sized != tt.wantSize) {
				t.Errorf("decompressor %v sized %v, want %s %v", argv, sized, tt.wantCmd, tt.wantSize)
			}
		})
	}
	if _, err := bzImagePayload(make([]byte, 4096)); err == nil {
		t.Error("an image without HdrS was accepted")
	}
}

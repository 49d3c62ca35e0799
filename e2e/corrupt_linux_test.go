package e2e

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// checkpoint folds the write-ahead log into the database file, as a clean
// close does, so that corrupting the file corrupts the records.
func checkpoint(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatalf("checkpoint %s: %v", path, err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM objects WHERE kind = 'proc'`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("before corrupting: %d process records (%v), want some", n, err)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// The state database corrupted in each way seen (issue 12): the corruption
// is reported (log and `lanes status`), and the moved process goes back to
// its own cgroup with its own I/O priority, whether lanesd restarts and
// stops or `lanesd --cleanup` runs.
func TestStateCorruption(t *testing.T) {
	corruptions := []struct {
		name string
		// health is the code `lanes status` must show.
		health  string
		corrupt func(t *testing.T, db string)
	}{
		{"truncated to 0 bytes", "state-corrupt", func(t *testing.T, db string) {
			checkpoint(t, db)
			if err := os.Truncate(db, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage write-ahead log", "state-corrupt", func(t *testing.T, db string) {
			fi, err := os.Stat(db + "-wal")
			if err != nil || fi.Size() == 0 {
				t.Fatalf("no write-ahead log to corrupt after kill -9 (%v)", err)
			}
			if err := os.WriteFile(db+"-wal", randomBytes(t, int(fi.Size())), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"random bytes in the database file", "state-corrupt", func(t *testing.T, db string) {
			checkpoint(t, db)
			fi, err := os.Stat(db)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(db, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Keep the 100-byte header: SQLite reads the file as its own
			// and finds the pages garbage.
			if _, err := f.WriteAt(randomBytes(t, int(fi.Size())-100), 100); err != nil {
				t.Fatal(err)
			}
		}},
		{"malformed schema", "state-corrupt", func(t *testing.T, db string) {
			checkpoint(t, db)
			d, err := sql.Open("sqlite", "file:"+db)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, q := range []string{`PRAGMA writable_schema = ON`,
				`UPDATE sqlite_master SET sql = 'CREATE TABLE objects (kind' WHERE name = 'objects'`} {
				if _, err := d.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}},
	}
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range corruptions {
		afters := []string{"restart and stop", "cleanup"}
		if testutil.Emulated() {
			// Under emulation (the kernel matrix) a lanesd start takes
			// seconds: each corruption meets one of the two, in turn, and
			// every corruption and every way after it is still run once.
			afters = afters[i%2 : i%2+1]
		}
		for _, after := range afters {
			t.Run(c.name+"/"+after, func(t *testing.T) {
				e := newEnv(t, "")
				// The process starts in a cgroup of its own, at be/3.
				orig := h.Group(fmt.Sprintf("lanestest-orig-%d-%d", os.Getpid(), i))
				if _, err := orig.Create(); err != nil {
					t.Fatal(err)
				}
				p := spawn(t, nil, "sleep", "60")
				pid := p.Process.Pid
				t.Cleanup(func() {
					p.Process.Kill()
					p.Wait()
					orig.Remove()
				})
				if err := orig.AddProc(pid); err != nil {
					t.Fatal(err)
				}
				if err := disk.SetIOPrio(pid, lane.IOBestEffort, 3); err != nil {
					t.Fatal(err)
				}
				before := membership(t, pid)
				e.start()
				if r := e.lanes("move", strconv.Itoa(pid), "background"); r.code != 0 {
					t.Fatal(r.stderr)
				}
				if got := laneOf(t, pid); got != "lanes-background" {
					t.Fatalf("after move: in %q", got)
				}
				e.kill9()
				c.corrupt(t, filepath.Join(e.stateDir, "state.db"))

				var log string
				switch after {
				case "restart and stop":
					e.start()
					var st api.Status
					e.lanesJSON(&st, "status")
					var h *api.Health
					for i := range st.Health {
						if st.Health[i].Code == c.health {
							h = &st.Health[i]
						}
					}
					if h == nil {
						t.Errorf("lanes status: no %s health entry: %+v", c.health, st.Health)
					} else if !strings.Contains(h.Message, "lanesd --cleanup") || !strings.Contains(h.Message, "rebuilt 1 process") {
						t.Errorf("health %s: %q: want the recovery command and 1 rebuilt record", h.Code, h.Message)
					}
					if out := e.lanes("status"); !strings.Contains(out.stdout, c.health) {
						t.Errorf("lanes status does not show %s:\n%s", c.health, out.stdout)
					}
					e.stop()
					log = e.log.String()
				case "cleanup":
					cmd := exec.Command(e.bin, append(e.daemonArgs(), "--cleanup")...)
					cmd.Env = append(os.Environ(), roleEnv+"=lanesd")
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("lanesd --cleanup: %v\n%s", err, out)
					}
					log = string(out)
				}
				if !strings.Contains(log, "corrupt") {
					t.Errorf("the log does not report the corruption:\n%s", log)
				}
				if aside, _ := filepath.Glob(filepath.Join(e.stateDir, "state.db.corrupt-*")); len(aside) == 0 {
					t.Errorf("the corrupt database was not kept aside")
				}
				noLanesObjects(t)
				if got := membership(t, pid); got.V1[cgroup.CPU] != before.V1[cgroup.CPU] || got.V2 != before.V2 {
					t.Errorf("after %s: in %+v, want %+v", after, got, before)
				}
				if cl, lvl, err := disk.GetIOPrio(pid); err != nil || cl != lane.IOBestEffort || lvl != 3 {
					t.Errorf("after %s: I/O priority %s/%d (%v), want best-effort/3", after, cl, lvl, err)
				}
			})
		}
	}
}

package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/state"
)

// The record of a moved process goes when the process exits (lanesd sees
// the exit), without a `lanes ps`, reload or stop; a live one's stays.
func TestRecordsPrunedOnExit(t *testing.T) {
	e := newEnv(t, "")
	e.start()
	live := spawn(t, nil, "sleep", "60")
	dying := spawn(t, nil, "sleep", "60")
	if r := e.lanes("move", strconv.Itoa(live.Process.Pid), strconv.Itoa(dying.Process.Pid), "background"); r.code != 0 {
		t.Fatalf("move: %d %s", r.code, r.stderr)
	}
	store, err := state.Open(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	has := func(pid int) bool {
		var v map[string]any
		return store.Get(state.KindProc, strconv.Itoa(pid), &v) == nil
	}
	if !has(live.Process.Pid) || !has(dying.Process.Pid) {
		t.Fatal("moved processes have no record")
	}
	dying.Process.Kill()
	dying.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for has(dying.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if has(dying.Process.Pid) {
		t.Errorf("record of exited process %d still there after 5s", dying.Process.Pid)
	}
	if !has(live.Process.Pid) {
		t.Errorf("record of live process %d dropped", live.Process.Pid)
	}
}

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
	dying.Process.Kill()
	dying.Wait()
	// lanesd holds its database exclusively while it runs: give it time to
	// act on the exit event, then read the records it left, as a crash
	// would leave them.
	time.Sleep(2 * time.Second)
	e.kill9()
	store, err := state.Open(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	has := func(pid int) bool {
		var v map[string]any
		return store.Get(state.KindProc, strconv.Itoa(pid), &v) == nil
	}
	if has(dying.Process.Pid) {
		t.Errorf("record of exited process %d still there 2 s after its exit", dying.Process.Pid)
	}
	if !has(live.Process.Pid) {
		t.Errorf("record of live process %d dropped", live.Process.Pid)
	}
	store.Close()
	// A restart adopts the live process and a stop puts it back.
	e.start()
	e.stop()
}

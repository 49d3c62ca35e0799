package daemon

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/state"
)

// stateReport is what opening the state store found wrong, for the log and
// `lanes status` ("" codes when all was well).
type stateReport struct {
	corrupt string // why the database was moved aside
	aside   string // where it went
}

// openState opens the state store in dir. A corrupt database is moved
// aside (kept for inspection) and a new one opened: what it held is
// rebuilt from the lane groups' own records by recoverState.
func openState(dir string, logf func(string, ...any)) (*state.Store, stateReport, error) {
	var rep stateReport
	store, err := state.Open(dir)
	var ce *state.CorruptError
	if !errors.As(err, &ce) {
		return store, rep, err
	}
	rep.corrupt = ce.Error()
	logf("%v", ce)
	aside, merr := state.MoveAside(dir)
	if merr != nil {
		return nil, rep, fmt.Errorf("%w; moving it aside failed: %v (remove or repair it by hand, then start again)", err, merr)
	}
	rep.aside = aside
	logf("moved the corrupt state database aside to %s; starting a new one", aside)
	store, err = state.Open(dir)
	if err != nil {
		return nil, rep, fmt.Errorf("new state database after moving the corrupt one aside: %w", err)
	}
	return store, rep, nil
}

// recoverState rebuilds the records the store lacks from the groups' own
// records and returns the health problems to report: a corrupt database,
// records that were missing, moves without a second record. Every problem
// is logged.
func recoverState(eng *enforce.Engine, store *state.Store, rep stateReport, stateDir string, logf func(string, ...any)) map[string]string {
	problems := map[string]string{}
	rc, err := eng.Recover()
	if err != nil {
		logf("rebuild state records from lanes' groups: %v", err)
		problems["state-recover"] = "rebuilding records from lanes' groups failed: " + err.Error()
	}
	recovery := fmt.Sprintf("to put every process back and remove lanes' groups: stop lanesd, then run `lanesd --cleanup --state-dir %s`", stateDir)
	if rep.corrupt != "" {
		problems["state-corrupt"] = fmt.Sprintf("%s; moved aside to %s; rebuilt %d process and %d group records from lanes' groups; %s",
			rep.corrupt, rep.aside, rc.Rebuilt, rc.Groups, recovery)
	} else if rc.Rebuilt > 0 {
		problems["state-records-lost"] = fmt.Sprintf("state database %s lacked the records of %d moved processes (truncated or replaced?); rebuilt from lanes' groups; %s",
			store.Path(), rc.Rebuilt, recovery)
	}
	if rc.Rebuilt > 0 || rc.Groups > 0 {
		logf("rebuilt %d process records and %d group records from lanes' groups (%d stale notes removed)", rc.Rebuilt, rc.Groups, rc.Pruned)
	}
	for code, msg := range problems {
		if code != "state-recover" {
			logf("%s: %s", code, msg)
		}
	}
	return problems
}

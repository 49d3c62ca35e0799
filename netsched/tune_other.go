//go:build !linux

package netsched

import "errors"

// ErrNotShaped is returned by the run-time class changes when no
// interface is shaped (in the direction asked for).
var ErrNotShaped = errors.New("no interface is shaped")

// SetLaneRate changes a lane's class's rate at run time (Linux only).
func (e *Enforcer) SetLaneRate(laneName string, download bool, rate uint64) error {
	return errUnsupported
}

// SetLaneCeil changes a lane's class's ceiling at run time (Linux only).
func (e *Enforcer) SetLaneCeil(laneName string, download bool, ceil uint64) error {
	return errUnsupported
}

// LaneRates returns a lane's class's rate and ceiling (Linux only).
func (e *Enforcer) LaneRates(laneName string, download bool) (rate, ceil uint64, err error) {
	return 0, 0, errUnsupported
}

// RestoreLane ends the run-time changes of a lane's classes (Linux only).
func (e *Enforcer) RestoreLane(laneName string) error { return errUnsupported }

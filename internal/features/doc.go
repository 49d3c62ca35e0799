// Package features probes the running kernel for the mechanisms lanes can
// use and says, for each, which backend is in use and why.
//
// Probes follow one convention: a nil error means the feature is
// available; an error wrapping ErrNotSupported means it is conclusively
// missing; any other error is inconclusive (a probe that could not run) and
// is never cached. Only conclusive answers are cached.
//
// Enforcer packages (cpu, disk, netsched) report the backend they chose as
// a Mechanism; `lanes doctor` prints the list.
package features

// Package enforce puts processes into lanes on this host. It composes the
// cgroup, cpu and disk enforcers (and, when configured, network
// classification), moves whole process trees all or nothing, records every
// change in the state store, and undoes them: on a clean stop it restores
// the host as it found it, after a crash it adopts or removes what a
// previous run left.
//
// lanesd uses it, and so does `lanes run` when no daemon is running. The
// API types, the CLI's client code and the config model must not import it.
package enforce

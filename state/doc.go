// Package state records every kernel object lanes creates or changes (cgroups,
// moved processes with where they came from, controller switches, qdiscs),
// in a SQLite database, so that a clean stop can restore the host as it was
// found and a start after a crash can adopt or remove what a previous run
// left behind.
//
// It knows nothing of cgroups or qdiscs: records are typed keys with JSON
// payloads that the enforcers define. Each kind has one owner, the package
// that makes the kernel change it records, writes the record before the
// change and deletes it once the change is undone: enforce owns KindGroup,
// KindProc and KindSubtree (cgroups, moved processes, controllers
// enabled), netsched owns KindQdisc (a shaped interface, with its
// original root tree and segment sizes). The daemon opens the store and
// hands it to them (enforce.Options.Store, netsched.WithStore) and writes
// no records itself; daemon-less `lanes run` (enforce.Alone) opens its
// own.
package state

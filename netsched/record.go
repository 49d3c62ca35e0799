package netsched

import (
	"encoding/json"

	"github.com/lanes-qos/lanes/state"
)

// ifaceRecord is what the state store keeps of an interface lanes shapes
// (kind state.KindQdisc, key: the interface). Its JSON is the one lanesd
// wrote before netsched kept its own records, so that a run after a crash
// of an older lanesd still reads it.
type ifaceRecord struct {
	Iface string `json:"iface"`
	Rate  uint64 `json:"rate"`
	// Sizes are the interface's GSO/GRO limits before lanes bounded them
	// (nil until lanes bounds them): a run after a crash puts them back.
	Sizes *SegmentSizes `json:"sizes,omitempty"`
	// Tree is the interface's root qdisc tree before lanes replaced it
	// (nil over the kernel's default root): a run after a crash replays
	// it once Cleanup has removed lanes' tree.
	Tree *TreeSnapshot `json:"tree,omitempty"`
}

// WithStore makes the Enforcer record each interface it shapes in s
// before it changes the interface (kind state.KindQdisc: the original
// root tree and segment sizes, each before lanes changes it), and delete the
// record once the interface is given back (Remove, or an Apply that
// failed and undid itself). CleanupRecorded uses the records after a
// crash. Without a store nothing is recorded.
func WithStore(s *state.Store) Option { return func(o *options) { o.store = s } }

// CleanupRecorded removes what a crashed run recorded in store: when
// records of shaped interfaces are left, it runs Cleanup, gives each
// recorded interface its original segment sizes and root tree back
// (RestoreSizes, RestoreTree) and deletes the records. Errors are logged:
// a start goes on with what could be cleaned.
func CleanupRecorded(logf func(string, ...any), store *state.Store, opts ...Option) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	recs, err := store.List(state.KindQdisc)
	if err != nil {
		logf("network cleanup: %v", err)
		return
	}
	if len(recs) == 0 {
		return
	}
	logf("removing the network trees of a previous run (%d interface(s))", len(recs))
	if err := Cleanup(logf, opts...); err != nil {
		logf("network cleanup: %v", err)
	}
	for _, r := range recs {
		var rec ifaceRecord
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			logf("network cleanup: record %s: %v", r.Key, err)
			continue
		}
		if rec.Sizes != nil {
			if err := RestoreSizes(logf, rec.Iface, *rec.Sizes, opts...); err != nil {
				logf("network cleanup: %v", err)
			}
		}
		if err := RestoreTree(logf, rec.Iface, rec.Tree, opts...); err != nil {
			logf("network cleanup: %v", err)
		}
	}
	for _, r := range recs {
		if err := store.Delete(state.KindQdisc, r.Key); err != nil {
			logf("network cleanup: %v", err)
		}
	}
}

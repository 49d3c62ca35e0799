package state

import (
	"fmt"
	"testing"
	"time"
)

// The event history keeps the newest keep events, none older than maxAge,
// across batches, and pages in insertion order.
func TestEventHistoryRetention(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rec := func(seq int, age time.Duration) EventRecord {
		return EventRecord{Run: 7, Seq: uint64(seq), Time: now.Add(-age), Topic: "net.link.eth0", Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
	}
	cases := []struct {
		name      string
		batches   [][]EventRecord
		keep      int
		maxAge    time.Duration
		wantSeqs  []uint64
		wantPrune int64
	}{
		{"under the limit", [][]EventRecord{{rec(1, 0), rec(2, 0)}}, 5, 0, []uint64{1, 2}, 0},
		{"count limit across batches", [][]EventRecord{{rec(1, 0), rec(2, 0), rec(3, 0)}, {rec(4, 0), rec(5, 0)}}, 3, 0, []uint64{3, 4, 5}, 2},
		{"count limit within a batch", [][]EventRecord{{rec(1, 0), rec(2, 0), rec(3, 0), rec(4, 0)}}, 1, 0, []uint64{4}, 3},
		{"age limit", [][]EventRecord{{rec(1, 3*time.Hour), rec(2, 2*time.Hour), rec(3, time.Minute)}}, 100, time.Hour, []uint64{3}, 2},
		{"no age limit", [][]EventRecord{{rec(1, 300*time.Hour), rec(2, 0)}}, 100, 0, []uint64{1, 2}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var pruned int64
			for _, b := range tc.batches {
				n, err := s.AppendEvents(b, tc.keep, tc.maxAge, now)
				if err != nil {
					t.Fatal(err)
				}
				pruned += n
			}
			// Page through two at a time, as a stream does.
			var got []uint64
			var after int64
			for {
				page, err := s.EventsAfter(after, time.Time{}, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page {
					if r.Run != 7 || r.Topic != "net.link.eth0" || string(r.Data) != fmt.Sprintf(`{"seq":%d}`, r.Seq) {
						t.Errorf("record %+v", r)
					}
					got = append(got, r.Seq)
					after = r.ID
				}
				if len(page) < 2 {
					break
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantSeqs) || pruned != tc.wantPrune {
				t.Errorf("kept %v (pruned %d), want %v (pruned %d)", got, pruned, tc.wantSeqs, tc.wantPrune)
			}
			n, _, err := s.EventCount()
			if err != nil || n != len(tc.wantSeqs) {
				t.Errorf("EventCount %d, %v", n, err)
			}
		})
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendEvents(nil, 0, 0, now); err == nil {
		t.Error("keep 0 accepted")
	}
}

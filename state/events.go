package state

import (
	"database/sql"
	"fmt"
	"time"
)

// The event history (issue 14): a second table, apart from the records of
// kernel objects, holding recent events of lanesd's event channels so that
// a client can replay what happened before it connected (`lanes events
// --since`). The daemon's history writer appends in batches and prunes as
// it writes; nothing here knows what an event contains beyond its topic,
// time and sequence number.

// EventRecord is one event in the history.
type EventRecord struct {
	// ID orders the history (insertion order), across daemon runs.
	ID int64
	// Run identifies the daemon run that published it (the run's start
	// time in ns): sequence numbers restart with every run.
	Run   int64
	Seq   uint64
	Time  time.Time
	Topic string
	// Data is the whole event, JSON-encoded by the writer.
	Data []byte
}

// initEvents creates the history table and its time index when missing
// (the schema's only migration so far: a database from before issue 14
// gains the table at its next open).
func initEvents(db *sql.DB, path string) error {
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS events (
			id INTEGER PRIMARY KEY,
			run INTEGER NOT NULL,
			seq INTEGER NOT NULL,
			time INTEGER NOT NULL,
			topic TEXT NOT NULL,
			data TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS events_time ON events(time)`,
	} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("init state %s: event history: %w", path, err)
		}
	}
	return nil
}

// AppendEvents adds recs to the history in one transaction and prunes it
// in the same one: only the newest keep events stay, none older than
// maxAge before now (maxAge 0: no age limit). It returns how many events
// were pruned. The IDs of recs are ignored (the table assigns them).
func (s *Store) AppendEvents(recs []EventRecord, keep int, maxAge time.Duration, now time.Time) (pruned int64, err error) {
	if keep <= 0 {
		return 0, fmt.Errorf("append events: keep %d: want at least 1", keep)
	}
	err = s.tx(func(tx *sql.Tx) error {
		if len(recs) > 0 {
			st, err := tx.Prepare(`INSERT INTO events(run, seq, time, topic, data) VALUES(?, ?, ?, ?, ?)`)
			if err != nil {
				return fmt.Errorf("append events: %w", err)
			}
			defer st.Close()
			for _, r := range recs {
				if _, err := st.Exec(r.Run, int64(r.Seq), r.Time.UnixNano(), r.Topic, string(r.Data)); err != nil {
					return fmt.Errorf("append event %s #%d: %w", r.Topic, r.Seq, err)
				}
			}
		}
		res, err := tx.Exec(`DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?`, keep)
		if err != nil {
			return fmt.Errorf("prune events beyond %d: %w", keep, err)
		}
		n, _ := res.RowsAffected()
		pruned += n
		if maxAge > 0 {
			res, err := tx.Exec(`DELETE FROM events WHERE time < ?`, now.Add(-maxAge).UnixNano())
			if err != nil {
				return fmt.Errorf("prune events older than %s: %w", maxAge, err)
			}
			n, _ := res.RowsAffected()
			pruned += n
		}
		return nil
	})
	return pruned, err
}

// EventsAfter returns up to limit events of the history with an ID above
// afterID and a time at or after since, in order: a reader pages through
// the history with the last ID it got, holding the database for one page
// at a time.
func (s *Store) EventsAfter(afterID int64, since time.Time, limit int) ([]EventRecord, error) {
	rows, err := s.db.Query(`SELECT id, run, seq, time, topic, data FROM events
		WHERE id > ? AND time >= ? ORDER BY id LIMIT ?`, afterID, since.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("read event history: %w", err)
	}
	defer rows.Close()
	var out []EventRecord
	for rows.Next() {
		var r EventRecord
		var seq, t int64
		var data string
		if err := rows.Scan(&r.ID, &r.Run, &seq, &t, &r.Topic, &data); err != nil {
			return nil, fmt.Errorf("read event history: %w", err)
		}
		r.Seq, r.Time, r.Data = uint64(seq), time.Unix(0, t), []byte(data)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read event history: %w", err)
	}
	return out, nil
}

// EventCount returns how many events the history holds and the oldest
// one's time (zero when empty).
func (s *Store) EventCount() (n int, oldest time.Time, err error) {
	var t sql.NullInt64
	if err := s.db.QueryRow(`SELECT COUNT(*), MIN(time) FROM events`).Scan(&n, &t); err != nil {
		return 0, time.Time{}, fmt.Errorf("count event history: %w", err)
	}
	if t.Valid {
		oldest = time.Unix(0, t.Int64)
	}
	return n, oldest, nil
}

package state

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Kinds of records. Each enforcer owns its kinds.
const (
	KindGroup   = "group"   // a cgroup lanes created; key: group name
	KindProc    = "proc"    // a process lanes moved; key: pid
	KindSubtree = "subtree" // a controller lanes enabled in a subtree_control; key: path
	KindQdisc   = "qdisc"   // a qdisc tree lanes installed; key: interface
)

// ErrNotFound is returned by Get for a missing record.
var ErrNotFound = errors.New("record not found")

// Store is a persistent set of records, safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// Record is one stored entry.
type Record struct {
	Kind    string
	Key     string
	Data    json.RawMessage
	Created time.Time
}

// Open opens (creating if needed) the database in dir.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS objects (
		kind TEXT NOT NULL,
		key TEXT NOT NULL,
		data TEXT NOT NULL,
		created INTEGER NOT NULL,
		PRIMARY KEY (kind, key))`); err != nil {
		db.Close()
		return nil, fmt.Errorf("init state %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Path returns the database file path.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Put stores v (JSON-encoded) under kind/key, replacing any earlier value
// but keeping its creation time.
func (s *Store) Put(kind, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", kind, key, err)
	}
	_, err = s.db.Exec(`INSERT INTO objects(kind, key, data, created) VALUES(?, ?, ?, ?)
		ON CONFLICT(kind, key) DO UPDATE SET data = excluded.data`,
		kind, key, string(b), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("record %s %s: %w", kind, key, err)
	}
	return nil
}

// Get decodes the record kind/key into v; ErrNotFound if absent.
func (s *Store) Get(kind, key string, v any) error {
	var data string
	err := s.db.QueryRow(`SELECT data FROM objects WHERE kind = ? AND key = ?`, kind, key).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %s: %w", kind, key, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read %s %s: %w", kind, key, err)
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return fmt.Errorf("decode %s %s: %w", kind, key, err)
	}
	return nil
}

// Delete removes kind/key; deleting a missing record is not an error.
func (s *Store) Delete(kind, key string) error {
	if _, err := s.db.Exec(`DELETE FROM objects WHERE kind = ? AND key = ?`, kind, key); err != nil {
		return fmt.Errorf("forget %s %s: %w", kind, key, err)
	}
	return nil
}

// List returns the records of a kind, oldest first.
func (s *Store) List(kind string) ([]Record, error) {
	rows, err := s.db.Query(`SELECT kind, key, data, created FROM objects WHERE kind = ? ORDER BY created, key`, kind)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var data string
		var created int64
		if err := rows.Scan(&r.Kind, &r.Key, &data, &created); err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		r.Data = json.RawMessage(data)
		r.Created = time.Unix(0, created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	return out, nil
}

// Count returns how many records of all kinds are stored.
func (s *Store) Count() (int, error) {
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM objects`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	return n, nil
}

package state

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Kinds of records. Each kind is written by one package only (see the
// package doc).
const (
	KindGroup   = "group"   // enforce: a cgroup lanes created; key: group name
	KindProc    = "proc"    // enforce: a process lanes moved; key: pid
	KindSubtree = "subtree" // enforce: a controller lanes enabled in a subtree_control; key: path
	KindQdisc   = "qdisc"   // netsched: a qdisc tree lanes installed; key: interface
	KindNice    = "nice"    // enforce: a process whose threads' nice a boost changed; key: pid
	KindSched   = "sched"   // enforce: a process whose threads a reservation put under SCHED_DEADLINE; key: pid
)

// ErrNotFound is returned by Get for a missing record.
var ErrNotFound = errors.New("record not found")

// Store is a persistent set of records, safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	// put and del are PutMany's and DeleteMany's statements, prepared once:
	// a process storm writes a batch every few milliseconds, and SQLite's
	// prepare was a third of each transaction's cost.
	put, del *sql.Stmt

	// mu guards later, the entries PutLater staged, and order, their keys
	// in the order they were staged (with keys since dropped, flushed or
	// staged again, skipped when met), so that FlushOlder finds the
	// oldest without a look at every entry.
	mu    sync.Mutex
	later map[laterKey]laterEntry
	order []laterRef
	seq   int
}

type laterRef struct {
	laterKey
	seq int
	at  time.Time
}

type laterKey struct{ kind, key string }

type laterEntry struct {
	Entry
	seq int
	at  time.Time // when it was staged
}

// Record is one stored entry.
type Record struct {
	Kind    string
	Key     string
	Data    json.RawMessage
	Created time.Time
}

// FileName is the database's file name in the state directory; SQLite
// keeps its write-ahead log beside it (FileName + "-wal", "-shm").
const FileName = "state.db"

// CorruptError says the database cannot be trusted: SQLite cannot read it,
// its integrity check fails, its schema is not lanes', its write-ahead log
// is not one, or the file is empty although it was written before. The
// records it held are lost (see MoveAside); Open returns it instead of
// opening such a file, so that a loss is never silent.
type CorruptError struct {
	Path   string
	Reason string
	Err    error // the underlying error, if any
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("state database %s is corrupt: %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Open opens (creating if needed) the database in dir, after checking that
// it is sound: an error wrapping *CorruptError if it is not.
//
// Commits are not synced to disk (synchronous=NORMAL with the write-ahead
// log): a record must outlive a crash of lanesd, which it does in the page
// cache, not a power loss, after which the kernel objects it describes
// (cgroups, qdiscs, moved processes) are gone too. The store holds the
// file's lock while open (locking_mode=EXCLUSIVE): one process owns it,
// and its transactions take no file locks.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := checkFiles(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=locking_mode(EXCLUSIVE)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := initSchema(db, path); err != nil {
		db.Close()
		return nil, err
	}
	if err := initEvents(db, path); err != nil {
		db.Close()
		return nil, err
	}
	st := &Store{db: db, path: path}
	if st.put, err = db.Prepare(putSQL); err == nil {
		st.del, err = db.Prepare(deleteSQL)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open state %s: prepare: %w", path, err)
	}
	return st, nil
}

const (
	putSQL = `INSERT INTO objects(kind, key, data, created) VALUES(?, ?, ?, ?)
			ON CONFLICT(kind, key) DO UPDATE SET data = excluded.data`
	deleteSQL = `DELETE FROM objects WHERE kind = ? AND key = ?`
)

// initSchema checks the database's integrity and creates or checks the
// objects table.
func initSchema(db *sql.DB, path string) error {
	corrupt := func(reason string, err error) error {
		return fmt.Errorf("open state: %w", &CorruptError{Path: path, Reason: reason, Err: err})
	}
	rows, err := db.Query(`PRAGMA integrity_check`)
	if err != nil {
		if isCorruptErr(err) {
			return corrupt("SQLite cannot read it", err)
		}
		return fmt.Errorf("open state %s: integrity check: %w", path, err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return corrupt("integrity check", err)
		}
		if line != "ok" && len(problems) < 3 {
			problems = append(problems, line)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return corrupt("integrity check", err)
	}
	if len(problems) > 0 {
		return corrupt("integrity check failed: "+strings.Join(problems, "; "), nil)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS objects (
		kind TEXT NOT NULL,
		key TEXT NOT NULL,
		data TEXT NOT NULL,
		created INTEGER NOT NULL,
		PRIMARY KEY (kind, key))`); err != nil {
		if isCorruptErr(err) {
			return corrupt("cannot create its table", err)
		}
		return fmt.Errorf("init state %s: %w", path, err)
	}
	// The table must be lanes': the four columns, in order.
	cols, err := db.Query(`SELECT name FROM pragma_table_info('objects') ORDER BY cid`)
	if err != nil {
		return corrupt("cannot read its schema", err)
	}
	var names []string
	for cols.Next() {
		var n string
		if err := cols.Scan(&n); err != nil {
			cols.Close()
			return corrupt("cannot read its schema", err)
		}
		names = append(names, n)
	}
	cols.Close()
	if got := strings.Join(names, ","); got != "kind,key,data,created" {
		return corrupt(fmt.Sprintf("table objects has columns (%s), want (kind,key,data,created)", got), nil)
	}
	if _, err := db.Exec(`SELECT kind, key, data, created FROM objects LIMIT 1`); err != nil {
		return corrupt("cannot read its records", err)
	}
	return nil
}

// isCorruptErr reports whether a SQLite error says the file is not a
// sound database (rather than, e.g., busy or out of disk space).
func isCorruptErr(err error) bool {
	msg := err.Error()
	for _, s := range []string{"malformed", "not a database", "corrupt", "SQLITE_CORRUPT", "SQLITE_NOTADB", "unsupported file format", "disk I/O error"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// checkFiles checks what SQLite would accept silently while losing
// records: an empty database file (truncated) and a write-ahead log that is
// not one (SQLite ignores a log with a bad header, and every transaction in
// it). A file that cannot be read is reported too.
func checkFiles(path string) error {
	corrupt := func(reason string, err error) error {
		return fmt.Errorf("open state: %w", &CorruptError{Path: path, Reason: reason, Err: err})
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new store
	}
	if err != nil {
		return corrupt("cannot stat it", err)
	}
	if !fi.Mode().IsRegular() {
		return corrupt("not a regular file ("+fi.Mode().Type().String()+")", nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return corrupt("cannot read it", err)
	}
	f.Close()
	wal, werr := os.ReadFile(path + "-wal")
	if werr != nil && !errors.Is(werr, os.ErrNotExist) {
		return corrupt("cannot read its write-ahead log "+path+"-wal", werr)
	}
	if len(wal) > 0 {
		if reason := checkWALHeader(wal); reason != "" {
			return corrupt("its write-ahead log "+path+"-wal "+reason+" (SQLite would ignore it and the records in it)", nil)
		}
	}
	// Open creates the database and writes its table at once, so an empty
	// file with no log to go with it has lost what was written to it.
	if fi.Size() == 0 && len(wal) == 0 {
		return corrupt("the file is empty (0 bytes): it was truncated", nil)
	}
	return nil
}

// WAL header (https://sqlite.org/fileformat.html#wal_file_format).
const (
	walHeaderLen = 32
	walMagicLE   = 0x377f0682 // checksums computed little-endian
	walMagicBE   = 0x377f0683 // big-endian
	walVersion   = 3007000
)

// checkWALHeader returns why b does not start with a valid SQLite WAL
// header, or "" if it does. A log shorter than its header is one SQLite
// never finished writing (it ignores it; nothing was committed in it).
func checkWALHeader(b []byte) string {
	if len(b) < walHeaderLen {
		return ""
	}
	magic := binary.BigEndian.Uint32(b[0:])
	if magic != walMagicLE && magic != walMagicBE {
		return fmt.Sprintf("has no WAL magic number (%#08x)", magic)
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != walVersion {
		return fmt.Sprintf("has WAL format version %d, want %d", v, walVersion)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if magic == walMagicBE {
		order = binary.BigEndian
	}
	var s0, s1 uint32
	for i := 0; i < 24; i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	if s0 != binary.BigEndian.Uint32(b[24:]) || s1 != binary.BigEndian.Uint32(b[28:]) {
		return "has a bad header checksum"
	}
	return ""
}

// MoveAside renames the database in dir and its write-ahead log and shared
// memory files to <name>.corrupt-<time>[-wal|-shm], keeping them for
// inspection, so that Open starts a new one. It returns the new name of
// the database file.
func MoveAside(dir string) (string, error) {
	path := filepath.Join(dir, FileName)
	aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405.000"))
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(path+suffix, aside+suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("move %s aside: %w", path+suffix, err))
		}
	}
	return aside, errors.Join(errs...)
}

// Path returns the database file path.
func (s *Store) Path() string { return s.path }

// Close writes what PutLater staged and closes the database.
func (s *Store) Close() error {
	err := s.Flush()
	s.put.Close()
	s.del.Close()
	return errors.Join(err, s.db.Close())
}

// Put stores v (JSON-encoded) under kind/key, replacing any earlier value
// but keeping its creation time.
func (s *Store) Put(kind, key string, v any) error {
	if err := s.Flush(); err != nil {
		return err
	}
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
	if err := s.Flush(); err != nil {
		return err
	}
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
	if err := s.Flush(); err != nil {
		return err
	}
	if _, err := s.db.Exec(`DELETE FROM objects WHERE kind = ? AND key = ?`, kind, key); err != nil {
		return fmt.Errorf("forget %s %s: %w", kind, key, err)
	}
	return nil
}

// List returns the records of a kind, oldest first.
func (s *Store) List(kind string) ([]Record, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
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
	if err := s.Flush(); err != nil {
		return 0, err
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM objects`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count records: %w", err)
	}
	return n, nil
}

// Entry is one record to put in a batch: Value, JSON-encoded, or JSON
// as it is when set (already encoded by the caller).
type Entry struct {
	Kind, Key string
	Value     any
	JSON      []byte
}

// PutMany stores every entry (as Put does) in one transaction: all or none.
func (s *Store) PutMany(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := s.Flush(); err != nil {
		return err
	}
	return s.putMany(entries)
}

func (s *Store) putMany(entries []Entry) error {
	now := time.Now().UnixNano()
	return s.tx(func(tx *sql.Tx) error {
		st := tx.Stmt(s.put)
		defer st.Close()
		for _, e := range entries {
			b := e.JSON
			if b == nil {
				var err error
				if b, err = json.Marshal(e.Value); err != nil {
					return fmt.Errorf("encode %s %s: %w", e.Kind, e.Key, err)
				}
			}
			if _, err := st.Exec(e.Kind, e.Key, string(b), now); err != nil {
				return fmt.Errorf("record %s %s: %w", e.Kind, e.Key, err)
			}
		}
		return nil
	})
}

// DeleteMany removes the records kind/key for every key, in one
// transaction; missing records are not an error.
func (s *Store) DeleteMany(kind string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.Flush(); err != nil {
		return err
	}
	return s.tx(func(tx *sql.Tx) error {
		st := tx.Stmt(s.del)
		defer st.Close()
		for _, k := range keys {
			if _, err := st.Exec(kind, k); err != nil {
				return fmt.Errorf("forget %s %s: %w", kind, k, err)
			}
		}
		return nil
	})
}

func (s *Store) tx(fn func(*sql.Tx) error) error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("state %s: begin: %w", s.path, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state %s: commit: %w", s.path, err)
	}
	return nil
}

// PutLater stages entries to be stored (as PutMany) by the next Flush:
// every other method of the store, and Close, flushes first, so they see
// them. It is for records that have a copy elsewhere until they are
// flushed (lanes' process records have one in their group, from which a
// start after a crash rebuilds what the store lacks), and many of which
// go again soon (the children of a process storm): DropLater cancels a
// staged entry without touching the database. A later PutLater of the
// same kind/key replaces the staged entry.
func (s *Store) PutLater(entries []Entry) {
	if len(entries) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.later == nil {
		s.later = map[laterKey]laterEntry{}
	}
	now := time.Now()
	for _, e := range entries {
		s.seq++
		k := laterKey{e.Kind, e.Key}
		s.later[k] = laterEntry{Entry: e, seq: s.seq, at: now}
		s.order = append(s.order, laterRef{laterKey: k, seq: s.seq, at: now})
	}
}

// DropLater cancels the staged entries of kind with these keys and
// returns the keys that had none staged (for DeleteMany). A cancelled
// entry leaves the database as it was before its PutLater.
func (s *Store) DropLater(kind string, keys []string) (rest []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		lk := laterKey{kind, k}
		if _, ok := s.later[lk]; ok {
			delete(s.later, lk)
			continue
		}
		rest = append(rest, k)
	}
	return rest
}

// Staged is how many entries PutLater staged and no Flush wrote yet.
func (s *Store) Staged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.later)
}

// FlushOlder writes the staged entries that are at least age old, or
// every staged entry when more than max are staged; younger ones stay
// staged (a process that exits meanwhile never reaches the database).
func (s *Store) FlushOlder(age time.Duration, max int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.later) > max {
		return s.flushLocked(func(laterEntry) bool { return true })
	}
	// The oldest entry still staged as it was: none old enough, nothing
	// to write (the common case, in a storm of short-lived processes).
	for len(s.order) > 0 {
		r := s.order[0]
		if e, ok := s.later[r.laterKey]; ok && e.seq == r.seq {
			break
		}
		s.order = s.order[1:]
	}
	cut := time.Now().Add(-age)
	if len(s.order) == 0 || s.order[0].at.After(cut) {
		if len(s.order) == 0 {
			s.order = nil // let the array go
		}
		return nil
	}
	return s.flushLocked(func(e laterEntry) bool { return !e.at.After(cut) })
}

// Flush writes what PutLater staged, in one transaction. On an error the
// entries stay staged.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked(func(laterEntry) bool { return true })
}

// flushLocked writes the staged entries that due accepts, in one
// transaction, and unstages them.
func (s *Store) flushLocked(due func(laterEntry) bool) error {
	if len(s.later) == 0 {
		return nil
	}
	var staged []laterEntry
	for _, e := range s.later {
		if due(e) {
			staged = append(staged, e)
		}
	}
	if len(staged) == 0 {
		return nil
	}
	sort.Slice(staged, func(i, j int) bool { return staged[i].seq < staged[j].seq })
	entries := make([]Entry, len(staged))
	for i, e := range staged {
		entries[i] = e.Entry
	}
	if err := s.putMany(entries); err != nil {
		return err
	}
	for _, e := range staged {
		delete(s.later, laterKey{e.Kind, e.Key})
	}
	return nil
}

package peercred

// Creds are a peer's credentials as the kernel recorded them at connect time.
type Creds struct {
	PID int
	UID int
	GID int
}

// IsRoot reports whether the peer runs as uid 0.
func (c Creds) IsRoot() bool { return c.UID == 0 }

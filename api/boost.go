package api

// RouteContact tells lanesd that a contact began or ended (seed 000's
// oracle): the connectivity monitor's events do the same for the host's
// default route; this is for a contact lanes cannot see, such as a
// network emulator's on/off schedule or a mobility model.
const RouteContact = "/v1/contact" // POST ContactRequest

// ContactRequest begins (Up) or ends a contact for the lanes with a boost
// policy; Lanes limits it to some of them (empty: all).
type ContactRequest struct {
	Up    bool     `json:"up"`
	Lanes []string `json:"lanes,omitempty"`
}

// ContactResponse says what the request changed.
type ContactResponse struct {
	// Lanes are the boosting lanes the request reached.
	Lanes []string `json:"lanes"`
	// Changed is how many processes' priorities changed at once (a
	// contact's first boosts come as the lanes' processes communicate).
	Changed int `json:"changed"`
}

// BoostLane is one boosting lane in lanes status.
type BoostLane struct {
	Lane string `json:"lane"`
	// Policy as the config reads: "incr: nice -1 to -20, a step every 1
	// events, clamp -20, reset".
	Policy  string `json:"policy"`
	Contact bool   `json:"contact"`
	// Source of the last contact change: "net.connectivity" or "api".
	Source  string        `json:"source,omitempty"`
	Boosted []BoostedProc `json:"boosted,omitempty"`
}

// BoostedProc is a process holding a boost.
type BoostedProc struct {
	PID  int `json:"pid"`
	Nice int `json:"nice"`
	Orig int `json:"orig_nice"`
	// Progress is what the policy counted: events, nanoseconds or bytes.
	Progress float64 `json:"progress"`
}

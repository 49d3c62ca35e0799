package api

// ReserveLane is one lane with a CPU reservation in lanes status.
type ReserveLane struct {
	Lane string `json:"lane"`
	// Percent is the reservation, in percent of one CPU.
	Percent float64 `json:"percent"`
	// Mechanism enforces the reservation: "SCHED_DEADLINE" (each thread
	// its share of the runtime every 10 ms) or "CFS bandwidth" (the
	// lane's group at the highest weight with a quota every 10 ms); Why
	// says why the fallback is in use.
	Mechanism string `json:"mechanism"`
	Why       string `json:"why,omitempty"`
	// Mode is "guarantee" (the reservation in force) or "beyond" (idle
	// CPU only, as much as there is).
	Mode string `json:"mode"`
	// Usage and Wait are the lane's CPU and its threads' wait for a CPU
	// over the last second, in CPUs; HostIdle the host's idle CPUs.
	Usage    float64 `json:"usage"`
	Wait     float64 `json:"wait"`
	HostIdle float64 `json:"host_idle"`
	// Threads are the lane's threads now; Changes the mode changes so
	// far.
	Threads int `json:"threads"`
	Changes int `json:"changes"`
	// Splits counts the rounds of deadline runtimes given to threads
	// (new threads, and shares that moved by a fifth).
	Splits int `json:"splits"`
	// Stalls counts deadline threads given their own policy back because
	// they were runnable without running for three periods (paying back
	// an overrun the kernel's tick let them make).
	Stalls int    `json:"stalls"`
	Error  string `json:"error,omitempty"`
}

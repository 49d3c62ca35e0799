package api

import "time"

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

// ReserveAssist is the tick assist of the reservations under CFS
// bandwidth in lanes status: a SCHED_FIFO thread on each CPU where a
// reserved lane's threads run, waking every Every so that the kernel
// charges the lane's quota that finely, not at its tick. It runs while a
// lane under the guarantee uses at least half of its reservation.
type ReserveAssist struct {
	Every time.Duration `json:"every_ns"`
	// Why says why this period (or why none).
	Why     string `json:"why"`
	Running bool   `json:"running"`
	// CPUs are the CPUs it runs on now; MostCPUs the most it ran on.
	CPUs     []int `json:"cpus,omitempty"`
	MostCPUs int   `json:"most_cpus"`
	// Starts counts its starts; CPUTime is the CPU its threads have used
	// (its cost), and Ran how long it has run in all.
	Starts  int           `json:"starts"`
	CPUTime time.Duration `json:"cpu_time_ns"`
	Ran     time.Duration `json:"ran_ns"`
	Error   string        `json:"error,omitempty"`
}

package ledbat

// Name is the congestion control's name, as in
// /proc/sys/net/ipv4/tcp_available_congestion_control and TCP_CONGESTION.
const Name = "lanes_ledbat"

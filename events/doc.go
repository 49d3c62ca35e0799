// Package events is lanesd's event channels (seed 004, Q-Fabric): the one
// way events move inside the daemon, between monitors that publish what
// they observe, controllers that act on it, applications that report their
// own quality and receive directives, and — through a bridge — other hosts.
//
// An Event has a source, a topic, a time, an optional deadline and a
// payload of named values. Topics are dot-separated tokens
// ("proc.exec", "lane.background.cpu", "app.1234.report"); a subscription
// names patterns in which "*" matches one token and ">" (last) matches one
// or more, as NATS subjects do, so that a bridge can carry a topic as a
// subject unchanged.
//
// Every subscription has its own bounded queue and a stated drop policy:
// a publisher never waits for a subscriber. Events that do not fit are
// dropped and counted (DropNewest keeps what is queued, DropOldest makes
// room), and an event whose deadline has passed when its subscriber takes
// it is dropped and counted as expired, as the seed's ECalls queue
// discards events that missed their deadline.
//
// A subscription may carry two filters written in CEL
// (github.com/google/cel-go), the counterpart of the seed's E-code: the
// OUT filter runs in the publisher before the event is queued (what is
// not wanted costs no queue space), the IN filter in the subscriber
// before the event is handed over. Both are compiled once, type-checked
// against the event's fields, and run under a cost limit, so that a
// filter can neither loop nor block the bus.
package events

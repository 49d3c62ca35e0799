// Package bridge carries a host's event channels to and from other hosts
// over NATS (seed 004's channels across machines): the events a host
// exports leave its bus as NATS subjects lanes.<host>.<topic>, and the
// events other hosts export on the patterns it imports arrive on its bus
// with their topic unchanged and the source host/<their host>/<their
// source>. An imported event is never exported again, so that two hosts
// that export and import the same topics do not echo each other.
//
// NATS core delivers at most once. While the server is unreachable the
// bridge holds exported events in a bounded buffer (drop-oldest) and sends
// them in order on reconnect; every exported event is sent, still
// buffered, or counted as lost (Stats). Imported events are checked
// (events.ValidateEvent) and refused with a count when bad.
package bridge

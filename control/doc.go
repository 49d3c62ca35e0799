// Package control is lanes' controllers (seed 004, Q-Fabric chapter 5): a
// controller watches one metric — a monitor's value such as a lane's CPU
// usage, or an application's own quality report such as its frames per
// second — against a target, and moves actuators (a lane's CPU weight and
// cap, its network rate and ceiling per direction, an application's
// directive) to bring the metric back.
//
// It is pure Go in the style of idletime: no system calls, the clock
// injected, every decision returned as an Action value. The daemon feeds a
// Controller the samples it takes off the event bus, applies the actions
// through the packages that own the knobs (enforce for CPU, netsched for
// HTB classes, the bus for directives) and publishes each one on
// controller.<name>.action, so that history explains why a knob moved.
//
// # Laws
//
// The error is target − value, or with a target range min..max the
// distance outside it (0 inside: the range is the dead band). A positive
// error means "the metric is too low: give it more".
//
// LawPI is a proportional–integral law in velocity form: at each action
// (at most once per Period) the controller output changes by
//
//	Δu = kp·(e − e_prev) + ki·e·dt
//
// and each actuator moves by weight·Δu from where it is, clamped to its
// [min, max] and to its rate limit (max change per second × dt). The
// integral lives in the actuators' positions themselves, so an actuator
// held at a bound stops integrating there: there is no windup, and when
// the error turns the actuator leaves the bound on the next action.
// A weight converts the law's output into the knob's unit and says its
// direction (a quality directive has a negative weight: more CPU wanted
// means less quality asked for).
//
// LawCEL runs a CEL handler (events.Compile, under events'
// FilterCostLimit) that sees the metric's event (topic, payload, ...)
// and value, error, dt (seconds since the last action), lane, target
// (map: value, min, max) and knobs (each actuator's current value by
// name: the knob, or for a directive its key). It returns a map of knob
// (or directive key) to new value, or a list of such maps (merged in
// order); every value is clamped and rate-limited like the PI's.
//
// # Integrated mode
//
// A controller with several actuators moves them all from one error —
// the seed's integrated resource management and application adaptation
// (§5.4: CPU priority, the network scheduler's share and vic's quality
// moved together held 20 fps where either alone could not). Order says
// how the law's output is shared:
//
//   - OrderTogether: every actuator moves by its weight at once (the
//     seed's integrated arm: resources raised and quality lowered at
//     the same time, each by its own share).
//   - OrderSequence: actuators are used in the order given, the next
//     taking only what the previous could not (it reached a bound); when
//     the error turns they are given back in reverse order. The seed's
//     degrade policy is an order: list the resources first and the
//     directive last to degrade the application's quality only when the
//     lane can get no more CPU or bandwidth ("resources first", what its
//     QoS manager does for a high-priority stream), or the directive
//     first to lower quality before taking resources from others
//     ("directive first", the seed's treatment of its low-priority
//     streams, which degrade first).
package control

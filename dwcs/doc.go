// Package dwcs is Dynamic Window-Constrained Scheduling (seed 004,
// Q-Fabric §2.4.1): the scheduler lanes uses to turn a periodic
// reservation with a loss tolerance into CPU settings, and to order the
// packets of periodic streams a sender paces in user space.
//
// A stream has a period T, a service time C and a window constraint x/y:
// in every window of y consecutive periods it may miss at most x, a miss
// being a period in which it did not receive its C. Its minimum
// utilisation is (1 − x/y)·C/T; as long as the streams' minimum
// utilisations add up to at most 1, DWCS guarantees every window (the
// seed's guarantee (b), proved for C = k and the same period T = n·k for
// every stream).
//
// # Rules
//
// Each stream carries its current constraint x'/y', which starts at x/y.
// When a stream receives its C within its period (rule a): if y' > x',
// y'−−; else if y' = x' > 0, both decrement; at x' = y' = 0 both reset to
// x/y. When a period ends without its C (rule b): if x' > 0 both
// decrement (and reset at 0/0); else y'++, and the miss is a violation.
//
// Among the streams with service left in their period the scheduler runs
// the first by the seed's Table 1: the earliest deadline (the end of the
// period); at equal deadlines the tightest current constraint x'/y'; at
// equal deadlines and zero constraints the highest denominator y'; at
// equal deadlines and equal non-zero constraints the lowest numerator x';
// otherwise first come, first served (the earlier release, then the order
// the streams were given in).
//
// A stream is served once per period, C ticks of it, unless it is work
// conserving: then, when no stream has service left in its period, it may
// run ahead in its period's spare time (counted as extra, not as service
// of a later period).
//
// The guarantee holds for streams that share one period; with periods
// that differ the seed's rules do violate windows of sets whose minimum
// utilisation is below 1 (in TestMixedPeriodsOutsideTheGuarantee, 45 of
// 100 random sets with periods that are multiples of one base, 85 of 100
// with any periods, had a window violated): the guarantee is one period
// per resource. Under overload (minimum utilisation 110-200 %) windows are
// violated but every stream is still served and its longest run of
// misses does not grow with time (the seed's guarantee (a), a bounded
// delay of service).
//
// Like idletime and autorate the package is pure: time is a tick count
// the caller advances, and every outcome is returned. Sim runs a stream
// set for a number of ticks and checks each stream's windows on its own
// tally, independent of the scheduler's x'/y' bookkeeping.
package dwcs

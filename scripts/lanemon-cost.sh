#!/bin/sh
# lanemon-cost.sh PERIOD [SECONDS] — lanesd's CPU time over SECONDS (30)
# with 10 lanes (the three built-ins and 7 more) and the lane monitors on
# poll period PERIOD ("1h" is a baseline: no sample in the window). Run as
# root under the testbed lock (lanesd creates top-level lanes-* groups):
#   go build -o /tmp/lanesd ./cmd/lanesd
#   flock /run/lanes-testbed.lock scripts/lanemon-cost.sh 100ms
set -eu
period=$1
secs=${2:-30}
lanesd=${LANESD:-/tmp/lanesd}
dir=$(mktemp -d /tmp/lanemon-cost.XXXXXX)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
{
	printf '[daemon]\nsocket = "%s/lanes.sock"\nstate_dir = "%s/state"\n' "$dir" "$dir"
	printf '[monitor]\nperiod = "%s"\n' "$period"
	for i in 1 2 3 4 5 6 7; do printf '[lanes.extra%d]\n' "$i"; done
} >"$dir/lanes.toml"
"$lanesd" --config "$dir/lanes.toml" 2>"$dir/log" &
pid=$!
sleep 3
ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
sleep "$secs"
t1=$(ticks)
grep -m1 'lane monitors' "$dir/log" || true
echo "period $period: lanesd used $(( (t1 - t0) * 1000 / hz )) ms of CPU in $secs s"

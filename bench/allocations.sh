#!/usr/bin/env bash
# Where a proxied request's garbage comes from: V8's sampling heap profiler, counting collected
# objects too, over a measured window of the built gateway under wrk, printed as bytes per request
# by function and by call path. The allocation rate sets how often the young generation is
# collected; unlike CPU time it does not move with the machine's load.
#
#   npm run bench:allocations                               # builds dist/, then profiles
#   DIST=dist-old bash bench/allocations.sh                # another build
#
# The setup is bench/gateway-under-test.sh's. Settings: WARM_S (30), MEASURE_S (5), DIST (dist),
# BENCH_DATABASE_URL (postgres on 127.0.0.1), KEEP_PROFILE (a file to copy the profile to: it opens
# in Chrome's DevTools, Memory tab). ~1 minute.
WARM_S=${WARM_S:-30}
MEASURE_S=${MEASURE_S:-5}
NAME=allocations
source "$(dirname "$0")/gateway-under-test.sh"
export ALLOCATION_PROFILE="$work/allocations.heapprofile"
start_service -- --require "$PWD/bench/allocation-sampler.cjs"

load "$WARM_S"
kill -USR2 "$service_pid"
sleep 0.5
load "$MEASURE_S" "$work/measured.txt"
kill -USR2 "$service_pid"
for _ in $(seq 1 100); do [ -s "$ALLOCATION_PROFILE" ] && break; sleep 0.2; done
requests=$(awk '/requests in/ { print $1 }' "$work/measured.txt")
[ -n "${KEEP_PROFILE:-}" ] && cp "$ALLOCATION_PROFILE" "$KEEP_PROFILE"
tsx bench/allocation-summary.ts "$ALLOCATION_PROFILE" "$requests"

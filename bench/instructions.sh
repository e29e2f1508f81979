#!/usr/bin/env bash
# Instructions per proxied request, counted by valgrind's callgrind: the gateway's CPU cost in a
# unit that does not move with the machine's load (a busy or slow VM spreads wall-clock CPU per
# request by ±20 %; two runs of this mostly agree within ~0.5 %, but a run can settle in a slower
# JIT state: once +18 %, bench/README.md). For comparing two versions of the code, not for the
# targets of issue 21, which are in `npm run bench`. Load nothing else meanwhile: a window with few
# requests is dominated by the service's timers.
#
#   npm run bench:instructions                              # builds dist/, then counts
#   DIST=dist-old bash bench/instructions.sh               # another build, e.g. of the commit before
#
# It starts an nginx upstream answering a fixed body, the service (`WORKERS=1`, a database of its
# own on PostgreSQL: PGlite would run its WebAssembly under valgrind too) under callgrind with
# `npm start`'s flags, registers the `ingress` service and a policy allowing the admin, warms the
# gateway with wrk (JIT tiers settle after ~50k requests; under callgrind a request takes ~3 ms),
# then counts a measured window. Needs valgrind, wrk, nginx (Debian: valgrind wrk nginx-light).
# The setup is bench/gateway-under-test.sh's. Settings: WARM_S (300), MEASURE_S (30), DIST (dist),
# BENCH_DATABASE_URL (postgres on 127.0.0.1),
# KEEP_PROFILE (a file to copy the measured window's callgrind profile to, for callgrind_annotate),
# NODE_EXTRA_FLAGS (e.g. --perf-basic-prof: KEEP_PROFILE.map then names the JIT code's addresses),
# TARGET (`gateway`, or `bare-proxy`: bench/bare-proxy.ts with the same flags, the floor to compare
# with), CACHE_SIM (1: callgrind also simulates the caches, and the reads, writes and misses per
# request are printed too; about twice as slow, and the simulated caches are one core's, with
# nothing else running on it).
WARM_S=${WARM_S:-300}
MEASURE_S=${MEASURE_S:-30}
NAME=instructions
TOOLS='valgrind callgrind_control'
source "$(dirname "$0")/gateway-under-test.sh"
cache_flags=()
[ "${CACHE_SIM:-}" = 1 ] && cache_flags=(--cache-sim=yes)
case "${TARGET:-gateway}" in
  gateway) start=start_service ;;
  bare-proxy) start=start_bare_proxy ;;
  *) echo "TARGET is gateway or bare-proxy, not $TARGET" >&2; exit 2 ;;
esac
$start valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" --dump-instr=no "${cache_flags[@]}" -- ${NODE_EXTRA_FLAGS:-}

# valgrind runs node as its own process: callgrind_control finds it by the service's pid.
load "$WARM_S" "$work/warm.txt"
callgrind_control -z "$service_pid" > /dev/null 2>&1
load "$MEASURE_S" "$work/measured.txt"
callgrind_control -d "$service_pid" > /dev/null 2>&1
sleep 2

requests=$(awk '/requests in/ { print $1 }' "$work/measured.txt")
warmed=$(awk '/requests in/ { print $1 }' "$work/warm.txt")
non2xx=$(awk '/Non-2xx/ { print $NF }' "$work/measured.txt")
dump=$(ls "$work"/callgrind.*.1 | head -1)
total=$(awk '!found && /^(summary|totals):/ { print $2; found = 1 }' "$dump")
# The main thread is everything under node's event loop; the rest is V8's and libuv's threads
# (GC helpers, concurrent compilation), which move more from run to run.
main=$(callgrind_annotate --threshold=100 "$dump" 2>/dev/null | awk '!found && /SpinEventLoopInternal/ { gsub(",", "", $1); print $1; found = 1 }')
[ -n "${KEEP_PROFILE:-}" ] && cp "$dump" "$KEEP_PROFILE" && { cp "/tmp/perf-$service_pid.map" "$KEEP_PROFILE.map" 2>/dev/null || true; }
echo "instructions per proxied request (${TARGET:-gateway}, $DIST; warmed by $warmed requests, measured over $requests${non2xx:+, $non2xx non-2xx}):"
echo "  main thread $((main / requests))   all threads $((total / requests))"
if [ "${CACHE_SIM:-}" = 1 ]; then
  # Every event callgrind counted, per request, all threads and main thread (the events line names
  # them: Ir instructions, Dr/Dw data reads/writes, I1mr/D1mr/D1mw first-level misses, ILmr/DLmr/DLmw
  # last-level misses).
  events=$(awk '/^events:/ { $1 = ""; print; exit }' "$dump")
  totals=$(awk '!found && /^(summary|totals):/ { $1 = ""; print; found = 1 }' "$dump")
  # (callgrind_annotate prints "." for an event a function never had: a 0, kept in its column.)
  mains=$(callgrind_annotate --threshold=100 "$dump" 2>/dev/null | awk '!found && /SpinEventLoopInternal/ { for (i = 1; i < NF; i++) if ($i ~ /^[0-9,]+$/ || $i == ".") { gsub(",", "", $i); printf "%s ", ($i == "." ? 0 : $i) } found = 1 }')
  echo "per request, all threads (main thread):"
  paste <(tr ' ' '\n' <<< "$events" | grep .) <(tr ' ' '\n' <<< "$totals" | grep .) <(tr ' ' '\n' <<< "$mains" | grep .) |
    awk -v n="$requests" '{ printf "  %-6s %10.1f (%.1f)\n", $1, $2 / n, $3 / n }'
fi

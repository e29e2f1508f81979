#!/usr/bin/env bash
# Instructions per proxied request, counted by valgrind's callgrind: the gateway's CPU cost in a
# unit that does not move with the machine's load (a busy or slow VM spreads wall-clock CPU per
# request by ±20 %; two runs of this agree within ~0.5 %). For comparing two versions of the code,
# not for the targets of issue 21, which are in `npm run bench`.
#
#   npm run bench:instructions                              # builds dist/, then counts
#   DIST=dist-old bash bench/instructions.sh               # another build, e.g. of the commit before
#
# It starts an nginx upstream answering a fixed body, the service (`WORKERS=1`, a database of its
# own on PostgreSQL: PGlite would run its WebAssembly under valgrind too) under callgrind with
# `npm start`'s flags, registers the `ingress` service and a policy allowing the admin, warms the
# gateway with wrk (JIT tiers settle after ~50k requests; under callgrind a request takes ~3 ms),
# then counts a measured window. Needs valgrind, wrk, nginx (Debian: valgrind wrk nginx-light).
# Settings: WARM_S (300), MEASURE_S (30), DIST (dist), BENCH_DATABASE_URL (postgres on 127.0.0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
WARM_S=${WARM_S:-300}
MEASURE_S=${MEASURE_S:-30}
DIST=${DIST:-dist}
ADMIN_URL=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
[ -f "$DIST/main.js" ] || { echo "no $DIST/main.js: run npm run build first" >&2; exit 2; }
for tool in valgrind callgrind_control wrk nginx psql; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: valgrind wrk nginx-light postgresql-client)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/kg-instructions-XXXXXX)
database="kg_instructions_$$"
service_pid=''
nginx_pid=''
cleanup() {
  [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null || true
  psql "$ADMIN_URL" -qc "drop database if exists $database" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# The upstream: one nginx worker answering a fixed body, as bench/ingress.ts's.
upstream_port=$(free_port)
mkdir -p "$work"/nginx/{body,proxy,fastcgi,uwsgi,scgi}
cat > "$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy; fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
  server { listen 127.0.0.1:$upstream_port; location / { default_type application/json; return 200 '{"ok":true}'; } }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!

# The policy: the shipped files, and one allowing the admin everything on the `ingress` service.
cp -r policies "$work/policies"
printf 'p, admin, *, /**, *, allow\n' > "$work/policies/ingress.csv"

psql "$ADMIN_URL" -qc "create database $database" >/dev/null
port=$(free_port)
password="instructions-$$-secret"
base="http://127.0.0.1:$port"
DATABASE_URL="${ADMIN_URL%/*}/$database" WORKERS=1 POLICY_DIR="$work/policies" PORT=$port ADMIN_PASSWORD=$password \
  LOG_LEVEL=warn AUTH_RATE_LIMIT_PER_ADDRESS=0 AUTH_RATE_LIMIT_PER_USER=0 \
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" --dump-instr=no \
  node --min-semi-space-size=16 --max-semi-space-size=16 "$DIST/main.js" > "$work/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 600); do
  curl -s -o /dev/null "$base/v3" && break
  kill -0 "$service_pid" 2>/dev/null || { echo "the service exited:" >&2; tail -20 "$work/service.log" >&2; exit 1; }
  sleep 1
done

token=$(curl -si -X POST "$base/v3/auth/tokens" -H 'content-type: application/json' -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"},\"password\":\"$password\"}}},\"scope\":{\"project\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"}}}}}" |
  awk 'tolower($1) == "x-subject-token:" { print $2 }' | tr -d '\r')
service_id=$(curl -s -X POST "$base/v3/services" -H "x-auth-token: $token" -H 'content-type: application/json' -d '{"service":{"type":"ingress","name":"ingress"}}' |
  node -e "let s='';process.stdin.on('data',(c)=>s+=c).on('end',()=>console.log(JSON.parse(s).service.id))")
curl -s -o /dev/null -X POST "$base/v3/endpoints" -H "x-auth-token: $token" -H 'content-type: application/json' \
  -d "{\"endpoint\":{\"service_id\":\"$service_id\",\"interface\":\"internal\",\"url\":\"http://127.0.0.1:$upstream_port\"}}"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "x-auth-token: $token" "$base/ingress/x")
[ "$status" = 200 ] || { echo "a proxied request answered $status, not 200" >&2; exit 1; }

# valgrind runs node as its own process: callgrind_control finds it by the service's pid.
wrk -t1 -c4 -d"${WARM_S}s" -H "X-Auth-Token: $token" "$base/ingress/x" > "$work/warm.txt"
callgrind_control -z "$service_pid" > /dev/null 2>&1
wrk -t1 -c4 -d"${MEASURE_S}s" -H "X-Auth-Token: $token" "$base/ingress/x" > "$work/measured.txt"
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
echo "instructions per proxied request ($DIST; warmed by $warmed requests, measured over $requests${non2xx:+, $non2xx non-2xx}):"
echo "  main thread $((main / requests))   all threads $((total / requests))"

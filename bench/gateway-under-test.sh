# Sourced by bench/instructions.sh and bench/allocations.sh: the built service (`WORKERS=1`, a
# PostgreSQL database of its own, `npm start`'s node flags) behind which one nginx worker answers a
# fixed body at /ingress/x, with an admin token the policy allows there. The caller sets DIST, NAME
# (for temp names) and TOOLS (commands it needs besides wrk, nginx, psql and curl), then calls
# start_service (or start_bare_proxy) with the command that wraps node (none, or e.g. valgrind ...)
# and any node flags.
# Afterwards: $work (a temp directory, removed on exit), $service_pid, $base, $token.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The project's Node (npm scripts put it first on PATH; a shell may not: /usr/bin/node is another one).
export PATH="$PWD/node_modules/.bin:$PATH"
DIST=${DIST:-dist}
ADMIN_URL=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
[ -f "$DIST/main.js" ] || { echo "no $DIST/main.js: run npm run build first" >&2; exit 2; }
for tool in wrk nginx psql curl ${TOOLS:-}; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: valgrind wrk nginx-light postgresql-client curl)" >&2; exit 2; }
done

work=$(mktemp -d "/tmp/kg-$NAME-XXXXXX")
database="kg_${NAME}_$$"
service_pid=''
nginx_pid=''
cleanup() {
  [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null || true
  psql "$ADMIN_URL" -qc "drop database if exists $database" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# npm start's node flags, read where the benchmark and the test of the Dockerfile read them.
start_flags=$(tsx -e "import { startNodeFlags } from './bench/processes.ts'; console.log(startNodeFlags().join(' '))")
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# The upstream: one nginx worker answering a fixed body, as bench/ingress.ts's.
upstream_port=$(free_port)
mkdir -p "$work"/nginx/{body,proxy,fastcgi,uwsgi,scgi}
cat > "$work/nginx/nginx.conf" <<CONF
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
CONF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!

# The policy: the shipped files, and one allowing the admin everything on the `ingress` service.
cp -r policies "$work/policies"
printf 'p, admin, *, /**, *, allow\n' > "$work/policies/ingress.csv"

# wait_for_service URL NAME: until URL answers (up to 10 minutes: valgrind starts slowly), or the process exits.
wait_for_service() {
  for _ in $(seq 1 600); do
    curl -s -o /dev/null "$1" && return
    kill -0 "$service_pid" 2>/dev/null || { echo "the $2 exited:" >&2; tail -20 "$work/service.log" >&2; exit 1; }
    sleep 1
  done
}

# start_service [wrapper command and its arguments] -- [node flags]
start_service() {
  local wrapper=()
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do wrapper+=("$1"); shift; done
  [ "$#" -gt 0 ] && shift
  psql "$ADMIN_URL" -qc "create database $database" >/dev/null
  local port password
  port=$(free_port)
  password="$NAME-$$-secret"
  base="http://127.0.0.1:$port"
  DATABASE_URL="${ADMIN_URL%/*}/$database" WORKERS=1 POLICY_DIR="$work/policies" PORT=$port ADMIN_PASSWORD=$password \
    LOG_LEVEL=warn AUTH_RATE_LIMIT_PER_ADDRESS=0 AUTH_RATE_LIMIT_PER_USER=0 \
    "${wrapper[@]}" node "$@" $start_flags "$DIST/main.js" > "$work/service.log" 2>&1 &
  service_pid=$!
  wait_for_service "$base/v3" service
  token=$(curl -si -X POST "$base/v3/auth/tokens" -H 'content-type: application/json' -d "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"},\"password\":\"$password\"}}},\"scope\":{\"project\":{\"name\":\"admin\",\"domain\":{\"id\":\"default\"}}}}}" |
    awk 'tolower($1) == "x-subject-token:" { print $2 }' | tr -d '\r')
  local service_id status
  service_id=$(curl -s -X POST "$base/v3/services" -H "x-auth-token: $token" -H 'content-type: application/json' -d '{"service":{"type":"ingress","name":"ingress"}}' |
    node -e "let s='';process.stdin.on('data',(c)=>s+=c).on('end',()=>console.log(JSON.parse(s).service.id))")
  curl -s -o /dev/null -X POST "$base/v3/endpoints" -H "x-auth-token: $token" -H 'content-type: application/json' \
    -d "{\"endpoint\":{\"service_id\":\"$service_id\",\"interface\":\"internal\",\"url\":\"http://127.0.0.1:$upstream_port\"}}"
  status=$(curl -s -o /dev/null -w '%{http_code}' -H "x-auth-token: $token" "$base/ingress/x")
  [ "$status" = 200 ] || { echo "a proxied request answered $status, not 200" >&2; exit 1; }
}

# start_bare_proxy [wrapper command and its arguments] -- [node flags]: bench/bare-proxy.ts (node:http
# and the gateway's upstream client, nothing else) in front of the same upstream, with npm start's
# flags, as the service would be: the floor the gateway's own cost sits on. Sets the same variables
# as start_service ($token is sent and ignored).
start_bare_proxy() {
  local wrapper=()
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do wrapper+=("$1"); shift; done
  [ "$#" -gt 0 ] && shift
  local port
  port=$(free_port)
  base="http://127.0.0.1:$port"
  token=unused
  "${wrapper[@]}" node "$@" $start_flags --import=tsx bench/bare-proxy.ts "http://127.0.0.1:$upstream_port" "$port" > "$work/service.log" 2>&1 &
  service_pid=$!
  wait_for_service "$base/" 'bare proxy'
  local status
  status=$(curl -s -o /dev/null -w '%{http_code}' "$base/ingress/x")
  [ "$status" = 200 ] || { echo "a request through the bare proxy answered $status, not 200" >&2; exit 1; }
}

# load SECONDS [OUTPUT]: wrk at four connections on the proxied path.
load() { wrk -t1 -c4 -d"$1s" -H "X-Auth-Token: $token" "$base/ingress/x" > "${2:-/dev/null}"; }

#!/usr/bin/env bash
# rig.sh: a whole agentgate deployment on loopback, for trying faults by
# hand and for the fault suite (internal/faults): a 3-node nats-server
# JetStream cluster built from the module in go.mod, 3 gateways on it
# (NATS_REPLICAS=3) and Debian's nginx in front of them with the shipped
# deploy/nginx/agentgate.conf. Everything listens on 127.0.0.1 only.
#
#   scripts/rig.sh start DIR           start everything, wait until it is ready,
#                                      record it in DIR/rig.env
#   scripts/rig.sh stop DIR            stop exactly what start recorded
#   scripts/rig.sh status DIR          one line per process: role, pid, state
#   scripts/rig.sh kill-nats N DIR     SIGKILL nats node N (1-3)
#   scripts/rig.sh start-nats N DIR    start nats node N again, same store and ports
#   scripts/rig.sh restart-nats N DIR  kill-nats, then start-nats
#   scripts/rig.sh kill-gateway N DIR  SIGKILL gateway N
#   scripts/rig.sh term-gateway N DIR  SIGTERM gateway N (a drain) and wait for its exit
#   scripts/rig.sh start-gateway N DIR start gateway N again, same data and port
#   scripts/rig.sh restart-gateway N DIR  term-gateway, then start-gateway
#   scripts/rig.sh leftovers DIR       list live processes carrying this rig's
#                                      marker; exit 1 when there is one
#
# DIR/rig.env is shell (`. DIR/rig.env`): NATS<N>_PID, NATS<N>_PORT,
# NATS<N>_ROUTE_PORT, NATS<N>_MONITOR_PORT, NATS_URL, GATEWAY<N>_PID,
# GATEWAY<N>_PORT, GATEWAY<N>_URL, NGINX_PID, NGINX_PORT, NGINX_URL and,
# when the rig serves its own mock model, MOCK_PID and MOCK_URL. Logs are
# DIR/<role>/log (nginx: DIR/nginx/error.log and access.log).
#
# Settings, from the environment of `start`:
#   AGENTGATE_*            passed to every gateway over the rig's defaults
#                          (e.g. AGENTGATE_REPLICA_TTL=4s), and kept for
#                          start-gateway
#   RIG_BIN                a directory holding agentgate and nats-server
#                          (and mockmodel) already built; default DIR/bin,
#                          built there with `go build` when missing
#   RIG_ANTHROPIC_BASE_URL the model server the gateways' claude uses;
#                          default: the rig starts `mockmodel` on loopback
#                          with RIG_MOCK_SCENARIO (default tool) and
#                          RIG_MOCK_COMMAND
#   RIG_START              parallel (default: the 3 gateways at once, as an
#                          orchestrator starts them) or serial (each after
#                          the one before is ready)
#   RIG_START_RETRIES      in serial, how many times to start again a gateway
#                          that exits before it is ready (0), as a restart
#                          policy would; for tests of other faults than the
#                          cold start
#   RIG_TIMEOUT            seconds to wait for each part to be ready (60)
#   RIG_NGINX              nginx binary (default: nginx on PATH, /usr/sbin/nginx)
#   RIG_NGINX_CONF         the site config to serve (default: the shipped
#                          deploy/nginx/agentgate.conf)
#   RIG_WATCH_PID          a pid (a test's): when it is gone, the rig stops
#                          itself, so that a test killed by its timeout
#                          leaves nothing behind
#
# Of the site config only the `server ...;` lines of `upstream agentgate`
# (replaced by one line per gateway, keeping the first line's parameters)
# and its `listen` (127.0.0.1 and a free port, so that several rigs can run
# side by side and nothing listens beyond loopback) are rewritten; the rest
# is served as shipped, inside a wrapper nginx.conf of the rig's own.
#
# Every process the rig starts carries RIG_DIR=DIR and RIG_ROLE=<role> in
# its environment (nginx overwrites its own, so nginx is known by its
# command line); stop and the kill verbs signal a recorded pid only while
# that process is still the one the rig started.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
nodes=3

die() {
  echo "rig: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# setvar KEY VALUE records KEY=VALUE in rig.env, replacing an older value.
setvar() {
  local f="$dir/rig.env"
  touch "$f"
  case "$2" in *"'"*) die "$1: a value with a quote cannot be recorded: $2" ;; esac
  # One plain KEY='VALUE' a line, which both a shell and a test can read.
  { grep -v "^$1=" "$f" || true; printf "%s='%s'\n" "$1" "$2"; } >"$f.tmp"
  mv "$f.tmp" "$f"
}

load() {
  [ -f "$dir/rig.env" ] || die "no $dir/rig.env: was the rig started there?"
  # shellcheck disable=SC1091
  . "$dir/rig.env"
}

# getvar KEY prints KEY's value from rig.env, empty when unset.
getvar() { (load && eval "printf '%s' \"\${$1:-}\""); }

# owned PID ROLE: the process is alive (not a zombie) and is the one the rig
# started as ROLE.
owned() {
  local pid=$1 role=$2 state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ "$state" != Z ] && [ "$state" != X ] || return 1
  if [ "$role" = nginx ]; then
    # nginx writes its title over its environment: its master's title
    # keeps its command line, which names the rig's prefix.
    { tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-p $dir/nginx/"; } 2>/dev/null
  else
    local env
    env=$( { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null) || return 1
    grep -qxF "RIG_DIR=$dir" <<<"$env" && grep -qxF "RIG_ROLE=$role" <<<"$env"
  fi
}

# alive PID: the process exists and has not exited. The waits for a
# process the rig has just started use it rather than owned: while that
# process execs (setsid, env -i, then the program), /proc/PID/environ
# can be unreadable for a moment, and owned would take a process still
# starting for one that exited. A pid just spawned is not reused yet.
alive() {
  local pid=$1 state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ "$state" != Z ] && [ "$state" != X ]
}

# waitgone PID ROLE SECONDS: wait until the process is gone; 1 on timeout.
waitgone() {
  local pid=$1 role=$2 deadline=$((SECONDS + $3))
  while owned "$pid" "$role"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

# signal ROLE PIDVAR SIG: signal the recorded process if it is still ours.
signal() {
  local role=$1 pid
  pid=$(getvar "$2")
  if owned "$pid" "$role"; then
    if [ "$role" = watch ]; then
      # The watchdog leads its own process group: take its sleep too.
      kill "-$3" -- "-$pid" 2>/dev/null || true
    else
      kill "-$3" "$pid" 2>/dev/null || true
    fi
    return 0
  fi
  return 1
}

# inuse PORT: a socket, listening or connected, holds PORT on this side.
inuse() {
  if command -v ss >/dev/null; then
    [ -n "$(ss -Htan "sport = :$1" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

taken=" "
# freeport sets fp to a loopback port nobody listens on and the rig has not
# handed out yet. It runs in the script's own shell, never in $(...), so
# that taken and RANDOM's state carry over from one call to the next. A
# race with another program is possible; whatever then fails to listen
# fails start, loudly.
freeport() {
  local p low=32768
  # Below the kernel's ephemeral range, where no outgoing connection can
  # take the port between this choice and the listen.
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$low" -gt 12000 ] || die "the ephemeral port range starts at $low; the rig needs ports below it"
  for _ in $(seq 200); do
    p=$((10000 + (RANDOM * 32768 + RANDOM) % (low - 10000)))
    case "$taken" in *" $p "*) continue ;; esac
    if ! inuse "$p"; then
      taken="$taken$p "
      fp=$p
      return
    fi
  done
  die "no free port found"
}

# spawn ROLE LOG CMD...: start CMD in a session of its own (so that a
# terminal's ^C or the caller's exit does not reach it), detached from the
# caller, marked with the rig's variables; prints its pid.
spawn() {
  local role=$1 log=$2
  shift 2
  RIG_DIR=$dir RIG_ROLE=$role setsid "$@" </dev/null >>"$log" 2>&1 &
  echo $!
}

bins() {
  bin=${RIG_BIN:-$dir/bin}
  mkdir -p "$bin"
  bin=$(cd "$bin" && pwd)
  setvar RIG_BIN "$bin"
  local need=(agentgate:./cmd/gateway nats-server:github.com/nats-io/nats-server/v2)
  [ -n "${RIG_ANTHROPIC_BASE_URL:-}" ] || need+=(mockmodel:./cmd/mockmodel)
  for n in "${need[@]}"; do
    [ -x "$bin/${n%%:*}" ] && continue
    echo "rig: building ${n%%:*}" >&2
    (cd "$repo" && go build -o "$bin/${n%%:*}" "${n#*:}")
  done
}

natsconf() {
  local i=$1 routes="" j
  for j in $(seq $nodes); do
    routes="$routes    nats-route://127.0.0.1:$(getvar NATS${j}_ROUTE_PORT)
"
  done
  mkdir -p "$dir/nats$i/store"
  cat >"$dir/nats$i/nats.conf" <<EOF
# node $i of the rig's JetStream cluster (scripts/rig.sh)
server_name: n$i
listen: 127.0.0.1:$(getvar NATS${i}_PORT)
http: 127.0.0.1:$(getvar NATS${i}_MONITOR_PORT)
max_payload: 4MB
jetstream {
  store_dir: "$dir/nats$i/store"
  max_memory_store: 256MB
  max_file_store: 4GB
}
cluster {
  name: rig
  listen: 127.0.0.1:$(getvar NATS${i}_ROUTE_PORT)
  routes: [
$routes  ]
}
EOF
}

startnats() {
  local i=$1 pid
  [ -f "$dir/nats$i/nats.conf" ] || natsconf "$i"
  pid=$(spawn "nats$i" "$dir/nats$i/log" "$(getvar RIG_BIN)/nats-server" -c "$dir/nats$i/nats.conf")
  setvar "NATS${i}_PID" "$pid"
}

# waitnats N: the node answers its health check, which holds until it has
# joined the JetStream cluster's meta group.
waitnats() {
  local i=$1 pid port deadline=$((SECONDS + ${RIG_TIMEOUT:-60}))
  pid=$(getvar "NATS${i}_PID")
  port=$(getvar "NATS${i}_MONITOR_PORT")
  until curl -fs -o /dev/null "http://127.0.0.1:$port/healthz"; do
    alive "$pid" || { tail -n 20 "$dir/nats$i/log" >&2; die "nats node $i exited"; }
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$dir/nats$i/log" >&2; die "nats node $i not healthy within ${RIG_TIMEOUT:-60}s"; }
    sleep 0.1
  done
}

startgateway() {
  local i=$1 pid
  mkdir -p "$dir/gateway$i/data"
  # The gateway's whole environment, kept for start-gateway: the rig's
  # defaults, then every AGENTGATE_* of the caller's.
  if [ ! -f "$dir/gateway$i/env" ]; then
    {
      echo "PATH=$PATH"
      echo "HOME=$dir/gateway$i"
      echo "ANTHROPIC_BASE_URL=$(getvar MODEL_URL)"
      echo "ANTHROPIC_API_KEY=rig-mock-key"
      echo "AGENTGATE_ADDR=127.0.0.1:$(getvar GATEWAY${i}_PORT)"
      echo "AGENTGATE_NATS_URL=$(getvar NATS_URL)"
      echo "AGENTGATE_NATS_REPLICAS=$nodes"
      echo "AGENTGATE_REPLICA_ID=gateway-$i"
      echo "AGENTGATE_DATA_DIR=$dir/gateway$i/data"
      echo "AGENTGATE_AGENTS=claude"
      echo "AGENTGATE_CLAUDE_BIN=${AGENTGATE_CLAUDE_BIN:-$repo/tools/agents/node_modules/.bin/claude}"
      echo "AGENTGATE_KILL_GRACE=1s"
      echo "AGENTGATE_LOG_LEVEL=info"
      env | grep '^AGENTGATE_' | grep -v '^AGENTGATE_CLAUDE_BIN=' || true
    } | awk -F= '{ v[$1] = $0; if (!($1 in seen)) { seen[$1] = 1; k[++n] = $1 } } END { for (i = 1; i <= n; i++) print v[k[i]] }' >"$dir/gateway$i/env"
  fi
  local envs=()
  mapfile -t envs <"$dir/gateway$i/env"
  pid=$(spawn "gateway$i" "$dir/gateway$i/log" env -i RIG_DIR="$dir" RIG_ROLE="gateway$i" "${envs[@]}" "$(getvar RIG_BIN)/agentgate")
  setvar "GATEWAY${i}_PID" "$pid"
}

# waitgateway N: GET /readyz answers 200; fails at once if it exited.
waitgateway() {
  local i=$1 pid port deadline=$((SECONDS + ${RIG_TIMEOUT:-60}))
  pid=$(getvar "GATEWAY${i}_PID")
  port=$(getvar "GATEWAY${i}_PORT")
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
    if ! alive "$pid"; then
      echo "rig: gateway $i exited before it was ready; its log ends:" >&2
      tail -n 5 "$dir/gateway$i/log" >&2
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "rig: gateway $i not ready within ${RIG_TIMEOUT:-60}s" >&2
      return 1
    fi
    sleep 0.1
  done
}

nginxconf() {
  local site=${RIG_NGINX_CONF:-$repo/deploy/nginx/agentgate.conf} servers="" i user group
  [ -f "$site" ] || die "no nginx site config $site"
  for i in $(seq $nodes); do servers="$servers 127.0.0.1:$(getvar GATEWAY${i}_PORT)"; done
  mkdir -p "$dir/nginx/tmp"
  awk -v servers="$servers" -v listen="127.0.0.1:$(getvar NGINX_PORT)" '
    # Inside upstream agentgate, the first server line gives the
    # parameters of one line per gateway; later server lines go.
    /^[ \t]*upstream[ \t]+agentgate[ \t]*\{/ { inup = 1; print; next }
    inup && /^[ \t]*\}/ { inup = 0 }
    inup && /^[ \t]*server[ \t]/ {
      if (!done) {
        line = $0
        match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
        sub(/^[ \t]*server[ \t]+[^ \t;]+/, "", line)
        sub(/;.*$/, "", line)
        n = split(servers, s, " ")
        for (i = 1; i <= n; i++) print indent "server " s[i] line ";"
        done = 1
      }
      next
    }
    # The first listen of the site, on loopback and the rig s port; other
    # listens (another address family) would listen twice.
    /^[ \t]*listen[ \t]/ {
      if (!listened) {
        line = $0
        match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
        sub(/^[ \t]*listen[ \t]+[^ \t;]+/, "", line)
        print indent "listen " listen line
        listened = 1
      }
      next
    }
    { print }
    END { if (!done) exit 3 }
  ' "$site" >"$dir/nginx/agentgate.conf" || die "$site has no server line inside upstream agentgate { }"
  user=$(id -un)
  group=$(id -gn)
  cat >"$dir/nginx/nginx.conf" <<EOF
# The rig's nginx (scripts/rig.sh): its own pid, logs and temp paths, and
# the site config as shipped but for its upstream servers and listen.
daemon off;
master_process on;
worker_processes 2;
user $user $group;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log info;
events { worker_connections 1024; }
http {
  log_format rig '\$msec \$request_method \$request_uri \$status \$upstream_addr \$upstream_status \$request_time';
  access_log $dir/nginx/access.log rig;
  client_body_temp_path $dir/nginx/tmp/body;
  proxy_temp_path $dir/nginx/tmp/proxy;
  fastcgi_temp_path $dir/nginx/tmp/fastcgi;
  uwsgi_temp_path $dir/nginx/tmp/uwsgi;
  scgi_temp_path $dir/nginx/tmp/scgi;
  include $dir/nginx/agentgate.conf;
}
EOF
}

startnginx() {
  local ngx=${RIG_NGINX:-$(command -v nginx || echo /usr/sbin/nginx)} pid deadline
  [ -x "$ngx" ] || die "no nginx ($ngx); on Debian: apt-get install -y nginx-light"
  nginxconf
  "$ngx" -t -q -p "$dir/nginx/" -e "$dir/nginx/error.log" -c "$dir/nginx/nginx.conf" ||
    die "nginx rejects $dir/nginx/nginx.conf"
  pid=$(spawn nginx "$dir/nginx/log" "$ngx" -p "$dir/nginx/" -e "$dir/nginx/error.log" -c "$dir/nginx/nginx.conf")
  setvar NGINX_PID "$pid"
  deadline=$((SECONDS + ${RIG_TIMEOUT:-60}))
  until curl -fsS -o /dev/null "http://127.0.0.1:$(getvar NGINX_PORT)/healthz" 2>/dev/null; do
    alive "$pid" || { tail -n 20 "$dir/nginx/error.log" >&2; die "nginx exited"; }
    [ $SECONDS -lt $deadline ] || die "nginx not serving within ${RIG_TIMEOUT:-60}s"
    sleep 0.1
  done
}

startmock() {
  if [ -n "${RIG_ANTHROPIC_BASE_URL:-}" ]; then
    setvar MODEL_URL "$RIG_ANTHROPIC_BASE_URL"
    return
  fi
  local port pid deadline=$((SECONDS + ${RIG_TIMEOUT:-60}))
  freeport
  port=$fp
  mkdir -p "$dir/mock"
  local args=(-addr "127.0.0.1:$port" -scenario "${RIG_MOCK_SCENARIO:-tool}")
  [ -z "${RIG_MOCK_COMMAND:-}" ] || args+=(-command "$RIG_MOCK_COMMAND")
  pid=$(spawn mock "$dir/mock/log" "$(getvar RIG_BIN)/mockmodel" "${args[@]}")
  setvar MOCK_PID "$pid"
  setvar MOCK_URL "http://127.0.0.1:$port"
  setvar MODEL_URL "http://127.0.0.1:$port"
  until inuse "$port"; do
    alive "$pid" || die "mockmodel exited: $(tail -n 5 "$dir/mock/log")"
    [ $SECONDS -lt $deadline ] || die "mockmodel not listening"
    sleep 0.05
  done
}

cmd_start() {
  [ ! -f "$dir/rig.env" ] || die "$dir/rig.env exists: stop that rig first, or use another directory"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  touch "$dir/rig.env"
  if [ -n "${RIG_WATCH_PID:-}" ]; then
    mkdir -p "$dir/watch"
    setvar WATCH_PID "$(spawn watch "$dir/watch/log" bash "$0" __watch "$RIG_WATCH_PID" "$dir")"
  fi
  bins
  local i url=""
  for i in $(seq $nodes); do
    freeport && setvar "NATS${i}_PORT" "$fp"
    url="$url${url:+,}nats://127.0.0.1:$fp"
    freeport && setvar "NATS${i}_ROUTE_PORT" "$fp"
    freeport && setvar "NATS${i}_MONITOR_PORT" "$fp"
    freeport && setvar "GATEWAY${i}_PORT" "$fp"
    setvar "GATEWAY${i}_URL" "http://127.0.0.1:$fp"
  done
  setvar NATS_URL "$url"
  freeport && setvar NGINX_PORT "$fp"
  setvar NGINX_URL "http://127.0.0.1:$(getvar NGINX_PORT)"
  startmock
  for i in $(seq $nodes); do startnats "$i"; done
  for i in $(seq $nodes); do waitnats "$i"; done
  local failed=0
  if [ "${RIG_START:-parallel}" = serial ]; then
    local try
    for i in $(seq $nodes); do
      for try in $(seq 0 "${RIG_START_RETRIES:-0}"); do
        if [ "$try" -gt 0 ]; then
          echo "rig: starting gateway $i again (retry $try of ${RIG_START_RETRIES:-0})" >&2
        fi
        startgateway "$i"
        if waitgateway "$i"; then
          continue 2
        fi
      done
      failed=$((failed + 1))
    done
  else
    for i in $(seq $nodes); do startgateway "$i"; done
    for i in $(seq $nodes); do waitgateway "$i" || failed=$((failed + 1)); done
  fi
  [ $failed -eq 0 ] || die "$failed of $nodes gateways did not come up (stop the rig with: $0 stop $dir)"
  startnginx
  echo "rig: ready; nginx at $(getvar NGINX_URL), state in $dir/rig.env" >&2
}

# stopone ROLE PIDVAR SECONDS: SIGTERM, then SIGKILL after SECONDS.
stopone() {
  local pid
  pid=$(getvar "$2")
  signal "$1" "$2" TERM || return 0
  waitgone "$pid" "$1" "$3" && return 0
  echo "rig: $1 (pid $pid) still up after ${3}s; SIGKILL" >&2
  signal "$1" "$2" KILL || true
  waitgone "$pid" "$1" 10 || echo "rig: $1 (pid $pid) survived SIGKILL" >&2
}

cmd_stop() {
  load
  local i pids=()
  # The watchdog goes first, unless it is the one stopping the rig.
  [ "$(getvar WATCH_PID)" = $$ ] || stopone watch WATCH_PID 10
  stopone nginx NGINX_PID 10
  # The gateways drain together: at most their SHUTDOWN_GRACE each.
  for i in $(seq $nodes); do stopone "gateway$i" "GATEWAY${i}_PID" 60 & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || true; done
  pids=()
  for i in $(seq $nodes); do stopone "nats$i" "NATS${i}_PID" 20 & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || true; done
  stopone mock MOCK_PID 10
  cmd_leftovers >&2 || true
}

cmd_status() {
  load
  local role var pid
  for role in nats1 nats2 nats3 gateway1 gateway2 gateway3 nginx mock watch; do
    var=$(echo "$role" | tr a-z A-Z | sed -E 's/([0-9])$/\1/')_PID
    pid=$(getvar "$var")
    [ -n "$pid" ] || continue
    if owned "$pid" "$role"; then echo "$role $pid up"; else echo "$role $pid down"; fi
  done
}

# cmd_leftovers lists live processes of this rig: those marked with its
# directory, and nginx processes under its prefix (a master's workers are
# its children).
cmd_leftovers() {
  local found=0 p pid state cmdline parent
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" != $$ ] || continue
    if { tr '\0' '\n' <"$p/environ" | grep -qxF "RIG_DIR=$dir"; } 2>/dev/null ||
      { tr '\0' ' ' <"$p/cmdline" | grep -qF -- "-p $dir/nginx/"; } 2>/dev/null; then
      state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "$p/stat" 2>/dev/null) || continue
      [ "$state" != Z ] || continue
      # This script's own subshells carry the marker too.
      cmdline=$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
      # This script's own subshells share its marker, when the watchdog
      # runs this.
      parent=$(sed -E 's/^[0-9]+ \(.*\) [A-Za-z] ([0-9]+).*/\1/' "$p/stat" 2>/dev/null) || continue
      [ "$parent" != $$ ] || continue
      echo "left: pid $pid $cmdline"
      found=1
    fi
  done
  [ $found -eq 0 ]
}

# cmd_watch PID: wait for PID to be gone, then stop the rig.
cmd_watch() {
  while kill -0 "$1" 2>/dev/null; do sleep 1; done
  echo "rig: pid $1 is gone; stopping the rig" >&2
  cmd_stop
}

node() {
  [[ "${1:-}" =~ ^[1-3]$ ]] || die "node number must be 1 to $nodes, got '${1:-}'"
}

verb=${1:-}
case "$verb" in
start | stop | status | leftovers)
  [ $# -eq 2 ] || usage
  dir=$2
  ;;
__watch)
  [ $# -eq 3 ] || usage
  watched=$2
  dir=$3
  ;;
kill-nats | start-nats | restart-nats | kill-gateway | term-gateway | start-gateway | restart-gateway)
  [ $# -eq 3 ] || usage
  node "$2"
  n=$2
  dir=$3
  ;;
*) usage ;;
esac
[ "$verb" = start ] || { [ -d "$dir" ] && dir=$(cd "$dir" && pwd); }

case "$verb" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
leftovers) cmd_leftovers ;;
__watch) cmd_watch "$watched" ;;
kill-nats)
  load
  signal "nats$n" "NATS${n}_PID" KILL || die "nats node $n is not running"
  waitgone "$(getvar NATS${n}_PID)" "nats$n" 10
  ;;
start-nats)
  load
  ! owned "$(getvar NATS${n}_PID)" "nats$n" || die "nats node $n is running"
  startnats "$n"
  waitnats "$n"
  ;;
restart-nats)
  load
  signal "nats$n" "NATS${n}_PID" KILL || true
  waitgone "$(getvar NATS${n}_PID)" "nats$n" 10
  startnats "$n"
  waitnats "$n"
  ;;
kill-gateway)
  load
  signal "gateway$n" "GATEWAY${n}_PID" KILL || die "gateway $n is not running"
  waitgone "$(getvar GATEWAY${n}_PID)" "gateway$n" 10
  ;;
term-gateway)
  load
  signal "gateway$n" "GATEWAY${n}_PID" TERM || die "gateway $n is not running"
  waitgone "$(getvar GATEWAY${n}_PID)" "gateway$n" 120 || die "gateway $n still up 120s after SIGTERM"
  ;;
start-gateway)
  load
  ! owned "$(getvar GATEWAY${n}_PID)" "gateway$n" || die "gateway $n is running"
  startgateway "$n"
  waitgateway "$n" || exit 1
  ;;
restart-gateway)
  load
  if signal "gateway$n" "GATEWAY${n}_PID" TERM; then
    waitgone "$(getvar GATEWAY${n}_PID)" "gateway$n" 120 || die "gateway $n still up 120s after SIGTERM"
  fi
  startgateway "$n"
  waitgateway "$n" || exit 1
  ;;
esac

#!/usr/bin/env bash
# Runs a real Confluent-compatible Schema Registry for the registry serdes' tests: Apicurio
# Registry 2.4.2.Final, whose Confluent API is served under /apis/ccompat/v7. Needs only
# Java 17+ and Maven: the application is built once from Maven Central's jars (pom.xml
# here; see there why 2.4.2.Final) and cached under .cache/app. Its storage is H2 in a file
# under .cache/data, wiped on every start (not on restart).
#
#   registry.sh start    build the application once, start it on fresh storage, wait until
#                        it answers on its Confluent API, print its URL
#   registry.sh stop     stop it (TERM, then KILL after 20 s); idempotent
#   registry.sh kill     kill it with SIGKILL (a crash), keeping its data; idempotent
#   registry.sh restart  kill it with SIGKILL if it runs, then start it again on its data
#                        (the schemas and their ids are kept) and wait until ready
#   registry.sh status   print whether it runs; exit 0 if it does, 1 if not
#   registry.sh url      print the base URL the serdes take (Config.URLs)
#   registry.sh fetch    only build the application into the cache
#
# Environment (all optional):
#   KSTREAM_REGISTRY_PORT           HTTP port (default 18081)
#   KSTREAM_REGISTRY_CACHE          cache dir (default <this dir>/.cache)
#   KSTREAM_REGISTRY_JAVA           java binary (default $JAVA_HOME/bin/java, else java)
#   KSTREAM_REGISTRY_HEAP           -Xmx (default 512m)
#   KSTREAM_REGISTRY_START_TIMEOUT  seconds to wait for readiness (default 90)
#   KSTREAM_REGISTRY_MVN_ARGS       extra Maven args, e.g. -Dmaven.repo.local=/some/m2
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$(pwd -P)

PORT=${KSTREAM_REGISTRY_PORT:-18081}
CACHE=${KSTREAM_REGISTRY_CACHE:-$HERE/.cache}
HEAP=${KSTREAM_REGISTRY_HEAP:-512m}
START_TIMEOUT=${KSTREAM_REGISTRY_START_TIMEOUT:-90}
HOST=127.0.0.1
APP=$CACHE/app
DATA=$CACHE/data
PIDFILE=$CACHE/registry.pid
LOG=$CACHE/registry.log
RUNNER=apicurio-registry-runner-0-runner.jar
VERSION=$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' pom.xml)
URL=http://$HOST:$PORT/apis/ccompat/v7

if [[ -n ${KSTREAM_REGISTRY_JAVA:-} ]]; then
  JAVA=$KSTREAM_REGISTRY_JAVA
elif [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
  JAVA=$JAVA_HOME/bin/java
else
  JAVA=java
fi

log() { echo "registry.sh: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_alive PID: true if PID is a live registry JVM started by this script.
pid_alive() {
  local pid=$1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled PID: the command line must be our registry.
  if [[ -r /proc/$pid/cmdline ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$RUNNER" || return 1
  fi
}

running_pid() {
  local pid
  [[ -f $PIDFILE ]] || return 1
  pid=$(<"$PIDFILE")
  pid_alive "$pid" || return 1
  echo "$pid"
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# http_ok PATH: true if GET PATH answers 200 (with bash alone: no curl needed).
http_ok() {
  local status
  status=$( (
    exec 3<>"/dev/tcp/$HOST/$PORT" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s:%s\r\nAccept: application/json\r\n\r\n' "$1" "$HOST" "$PORT" >&3
    head -n 1 <&3
  ) 2>/dev/null) || return 1
  [[ $status == "HTTP/1."?" 200"* ]]
}

check_java() {
  command -v "$JAVA" >/dev/null 2>&1 || die "java not found (set KSTREAM_REGISTRY_JAVA or JAVA_HOME)"
  local v major
  v=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  major=${v%%.*}
  [[ $major =~ ^[0-9]+$ ]] || die "cannot tell the version of $JAVA"
  ((major >= 17)) || die "Apicurio Registry $VERSION needs Java 17+, $JAVA is Java $v"
}

# fetch: build the application into $APP once; build again when pom.xml or src/ change.
FETCH_SECS=0.0
fetch() {
  local stamp sum t0 build
  stamp=$APP/.build.sha256
  sum=$(cat pom.xml $(find src -type f | sort) | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$sum" && -f $APP/$RUNNER ]]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: needed once to build the registry"
  log "building Apicurio Registry $VERSION from Maven Central's jars into $APP"
  t0=$(now)
  build=$CACHE/build
  rm -rf "$build" "$APP.tmp"
  mkdir -p "$build"
  cp -R pom.xml src "$build/"
  # shellcheck disable=SC2086 # KSTREAM_REGISTRY_MVN_ARGS is a list of args
  if ! mvn -B -q -f "$build/pom.xml" ${KSTREAM_REGISTRY_MVN_ARGS:-} package -DskipTests \
      >"$CACHE/mvn.log" 2>&1; then
    tail -n 50 "$CACHE/mvn.log" >&2
    die "Maven could not build the registry (full output: $CACHE/mvn.log)"
  fi
  [[ -f $build/target/$RUNNER && -d $build/target/lib ]] ||
    die "Maven built no $RUNNER with its lib/ in $build/target"
  mkdir -p "$APP.tmp"
  mv "$build/target/$RUNNER" "$build/target/lib" "$APP.tmp/"
  echo "$sum" >"$APP.tmp/.build.sha256"
  rm -rf "$APP" "$build"
  mv "$APP.tmp" "$APP"
  FETCH_SECS=$(elapsed "$t0")
}

do_stop() {
  local pid i
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  log "stopping registry (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "registry did not stop within 20 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$PIDFILE"
  log "stopped"
}

fail_start() {
  log "$*"
  if [[ -f $LOG ]]; then
    echo "---- last 50 lines of $LOG ----" >&2
    tail -n 50 "$LOG" >&2
    echo "----" >&2
  fi
  do_stop || true
  exit 1
}

# do_kill: SIGKILL the registry, as a crash would; its data stays for restart.
do_kill() {
  local pid i
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  log "killing registry (pid $pid) with SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "registry (pid $pid) still alive 10 s after SIGKILL"
  rm -f "$PIDFILE"
  log "killed"
}

# launch: start the registry on the storage in $DATA (its output appended to $LOG) and wait
# until its Confluent API answers.
launch() {
  local pid deadline
  port_open "$PORT" && die "port $HOST:$PORT is already in use by another process"
  mkdir -p "$DATA"
  # The prod profile (the application's default) with H2 in a file rather than in memory,
  # so that a restart keeps the schemas and their ids. AUTO_SERVER=FALSE, and the file is
  # this process's alone.
  nohup "$JAVA" -Xms128m -Xmx"$HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$PORT" \
    -Dquarkus.datasource.jdbc.url="jdbc:h2:file:$DATA/registry" \
    -Dquarkus.datasource.jdbc.min-size=2 -Dquarkus.datasource.jdbc.initial-size=2 \
    -Dquarkus.datasource.jdbc.max-size=20 \
    -jar "$APP/$RUNNER" >>"$LOG" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PIDFILE"

  deadline=$(($(date +%s) + START_TIMEOUT))
  until http_ok /apis/ccompat/v7/subjects; do
    kill -0 "$pid" 2>/dev/null || fail_start "registry exited during startup"
    (($(date +%s) < deadline)) || fail_start "registry did not answer on $URL within ${START_TIMEOUT}s"
    sleep 0.2
  done
}

do_start() {
  local t0 pid
  check_java
  if pid=$(running_pid); then
    log "a registry is already running (pid $pid); restarting it"
    do_stop
  fi
  rm -f "$PIDFILE"
  fetch
  t0=$(now)
  rm -rf "$DATA"
  : >"$LOG"
  launch
  log "Apicurio Registry $VERSION ready (fetch ${FETCH_SECS}s, start $(elapsed "$t0")s)"
  echo "$URL"
}

# do_restart: a crash and a restart: SIGKILL, then start again on the same data.
do_restart() {
  local t0
  check_java
  do_kill
  fetch
  t0=$(now)
  echo "---- restart $(date -u +%FT%TZ) ----" >>"$LOG"
  launch
  log "Apicurio Registry $VERSION ready with its data kept (restart $(elapsed "$t0")s)"
  echo "$URL"
}

do_status() {
  local pid
  if pid=$(running_pid); then
    if http_ok /apis/ccompat/v7/subjects; then
      echo "registry $VERSION running (pid $pid) at $URL"
    else
      echo "registry $VERSION running (pid $pid) but $URL does not answer yet"
    fi
    return 0
  fi
  echo "registry not running"
  return 1
}

with_lock() {
  mkdir -p "$CACHE"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.lock"
    flock -w 120 9 || die "another registry.sh is busy (lock $CACHE/.lock)"
  fi
  "$@"
}

case ${1:-} in
start) with_lock do_start ;;
stop) with_lock do_stop ;;
kill) with_lock do_kill ;;
restart) with_lock do_restart ;;
status) do_status ;;
url) echo "$URL" ;;
fetch) with_lock fetch && log "application in $APP (fetch ${FETCH_SECS}s)" ;;
*)
  echo "usage: $0 start|stop|kill|restart|status|url|fetch" >&2
  exit 2
  ;;
esac

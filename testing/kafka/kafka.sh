#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft, broker+controller in one
# JVM) for the integration tests. Needs only Java 17+ and Maven; the broker's
# jars come through Maven (pom.xml here) and are cached under .cache/lib.
#
#   kafka.sh start    fetch jars once, format fresh storage, start, wait until ready
#   kafka.sh stop     stop the broker (TERM, then KILL after 20 s); idempotent
#   kafka.sh kill     kill the broker with SIGKILL (a crash), keeping its data; idempotent
#   kafka.sh restart  kill the broker with SIGKILL if it runs, then start it again on its
#                     existing data (formatting only storage that was never formatted) and
#                     wait until ready
#   kafka.sh status   print whether it runs; exit 0 if it does, 1 if not
#   kafka.sh fetch    only fetch the jars into the cache (the broker's, and the command-line
#                     tools' that cmd/kstream's Java tools test runs against kstream dev)
#
# Environment (all optional):
#   KSTREAM_KAFKA_PORT             PLAINTEXT port (default 19092)
#   KSTREAM_KAFKA_CONTROLLER_PORT  CONTROLLER port (default 19093)
#   KSTREAM_KAFKA_CACHE            cache dir (default <this dir>/.cache)
#   KSTREAM_KAFKA_JAVA             java binary (default $JAVA_HOME/bin/java, else java)
#   KSTREAM_KAFKA_HEAP             broker -Xmx (default 1g)
#   KSTREAM_KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   KSTREAM_KAFKA_MVN_ARGS         extra Maven args, e.g. -Dmaven.repo.local=/some/m2
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$(pwd -P)

PORT=${KSTREAM_KAFKA_PORT:-19092}
CONTROLLER_PORT=${KSTREAM_KAFKA_CONTROLLER_PORT:-19093}
CACHE=${KSTREAM_KAFKA_CACHE:-$HERE/.cache}
HEAP=${KSTREAM_KAFKA_HEAP:-1g}
START_TIMEOUT=${KSTREAM_KAFKA_START_TIMEOUT:-90}
HOST=127.0.0.1
LIB=$CACHE/lib
DATA=$CACHE/data
PIDFILE=$CACHE/kafka.pid
LOG=$CACHE/kafka.log
PROPS=$CACHE/server.properties
LOG4J=$HERE/log4j2.properties
# Any valid 16-byte base64url id will do: the data dir is wiped on every start (not on restart).
CLUSTER_ID=GvF4CCRWT1ydfBY0zKpXrQ
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' pom.xml)

if [[ -n ${KSTREAM_KAFKA_JAVA:-} ]]; then
  JAVA=$KSTREAM_KAFKA_JAVA
elif [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
  JAVA=$JAVA_HOME/bin/java
else
  JAVA=java
fi

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_alive PID: true if PID is a live broker JVM started by this script.
pid_alive() {
  local pid=$1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled PID: the command line must be our broker.
  if [[ -r /proc/$pid/cmdline ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka' || return 1
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

check_java() {
  command -v "$JAVA" >/dev/null 2>&1 || die "java not found (set KSTREAM_KAFKA_JAVA or JAVA_HOME)"
  local v major
  v=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  major=${v%%.*}
  [[ $major =~ ^[0-9]+$ ]] || die "cannot tell the version of $JAVA"
  ((major >= 17)) || die "Kafka $KAFKA_VERSION brokers need Java 17+, $JAVA is Java $v"
}

# fetch: copy the broker's jars into $LIB once; re-fetch when pom.xml changes.
FETCH_SECS=0.0
fetch() {
  local stamp sum t0
  stamp=$LIB/.pom.sha256
  sum=$(sha256sum pom.xml | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$sum" ]]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: needed once to fetch the Kafka jars"
  log "fetching Kafka $KAFKA_VERSION jars through Maven into $LIB"
  t0=$(now)
  rm -rf "$LIB.tmp"
  mkdir -p "$CACHE"
  # shellcheck disable=SC2086 # KSTREAM_KAFKA_MVN_ARGS is a list of args
  if ! mvn -B -q -f pom.xml ${KSTREAM_KAFKA_MVN_ARGS:-} \
      dependency:copy-dependencies -DoutputDirectory="$LIB.tmp" -DincludeScope=runtime \
      >"$CACHE/mvn.log" 2>&1; then
    tail -n 50 "$CACHE/mvn.log" >&2
    die "Maven could not fetch the Kafka jars (full output: $CACHE/mvn.log)"
  fi
  ls "$LIB.tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "Maven fetched no kafka_2.13 jar into $LIB.tmp"
  # The command-line tools (kafka-topics, kafka-consumer-groups, ...): the broker's
  # readiness probe and cmd/kstream's Java tools test run their main classes.
  ls "$LIB.tmp"/kafka-tools-*.jar >/dev/null 2>&1 || die "Maven fetched no kafka-tools jar into $LIB.tmp"
  echo "$sum" >"$LIB.tmp/.pom.sha256"
  rm -rf "$LIB"
  mv "$LIB.tmp" "$LIB"
  FETCH_SECS=$(elapsed "$t0")
}

# tool MAINCLASS ARGS...: run a Kafka main class quietly (WARN+ to stderr).
tool() {
  "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J" \
    -Dkstream.kafka.log.level=WARN -Dkstream.kafka.log.target=SYSTEM_ERR \
    -cp "$LIB/*" "$@"
}

do_stop() {
  local pid i
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  log "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "broker did not stop within 20 s; killing it"
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

# do_kill: SIGKILL the broker, as a crash would; its data stays for restart.
do_kill() {
  local pid i
  if ! pid=$(running_pid); then
    rm -f "$PIDFILE"
    log "not running"
    return 0
  fi
  log "killing broker (pid $pid) with SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "broker (pid $pid) still alive 10 s after SIGKILL"
  rm -f "$PIDFILE"
  log "killed"
}

# format_storage: write the broker config and format fresh KRaft storage in $DATA.
format_storage() {
  local out
  rm -rf "$DATA"
  mkdir -p "$DATA"
  write_props
  if ! out=$(tool kafka.tools.StorageTool format --standalone -t "$CLUSTER_ID" -c "$PROPS" 2>&1); then
    echo "$out" >&2
    die "formatting KRaft storage failed"
  fi
}

write_props() {
  sed -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CONTROLLER_PORT|g" -e "s|@DATA_DIR@|$DATA|g" \
    server.properties.in >"$PROPS"
}

# launch: start the broker on the storage in $DATA (its output appended to $LOG) and wait
# until it serves clients.
launch() {
  local pid deadline
  for p in "$PORT" "$CONTROLLER_PORT"; do
    port_open "$p" && die "port $HOST:$p is already in use by another process"
  done
  nohup "$JAVA" -Xms256m -Xmx"$HEAP" \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J" -Dkafka.logs.dir="$CACHE" \
    -cp "$LIB/*" kafka.Kafka "$PROPS" >>"$LOG" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PIDFILE"

  deadline=$(($(date +%s) + START_TIMEOUT))
  # 1) wait for the listener to accept connections
  until port_open "$PORT"; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during startup"
    (($(date +%s) < deadline)) || fail_start "broker did not open $HOST:$PORT within ${START_TIMEOUT}s"
    sleep 0.2
  done
  # 2) wait until it serves metadata requests to a real client
  until tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$PORT" --list >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during startup"
    (($(date +%s) < deadline)) || fail_start "broker did not answer on $HOST:$PORT within ${START_TIMEOUT}s"
    sleep 0.5
  done
}

do_start() {
  local t0 pid
  check_java
  if pid=$(running_pid); then
    log "a broker is already running (pid $pid); restarting it"
    do_stop
  fi
  rm -f "$PIDFILE"
  fetch
  t0=$(now)
  format_storage
  : >"$LOG"
  launch
  echo "kafka $KAFKA_VERSION ready on $HOST:$PORT (fetch ${FETCH_SECS}s, start $(elapsed "$t0")s)"
}

# do_restart: a crash and a restart: SIGKILL, then start again on the same data.
do_restart() {
  local t0
  check_java
  do_kill
  fetch
  t0=$(now)
  if [[ -f $DATA/meta.properties ]]; then
    write_props
  else
    log "no formatted storage in $DATA; formatting fresh storage"
    format_storage
  fi
  echo "---- restart $(date -u +%FT%TZ) ----" >>"$LOG"
  launch
  echo "kafka $KAFKA_VERSION ready on $HOST:$PORT with its data kept (restart $(elapsed "$t0")s)"
}

do_status() {
  local pid
  if pid=$(running_pid); then
    if port_open "$PORT"; then
      echo "kafka $KAFKA_VERSION running (pid $pid) on $HOST:$PORT"
    else
      echo "kafka $KAFKA_VERSION running (pid $pid) but $HOST:$PORT is not open yet"
    fi
    return 0
  fi
  echo "kafka not running"
  return 1
}

with_lock() {
  mkdir -p "$CACHE"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.lock"
    flock -w 120 9 || die "another kafka.sh is busy (lock $CACHE/.lock)"
  fi
  "$@"
}

case ${1:-} in
start) with_lock do_start ;;
stop) with_lock do_stop ;;
kill) with_lock do_kill ;;
restart) with_lock do_restart ;;
status) do_status ;;
fetch) with_lock fetch && echo "jars in $LIB (fetch ${FETCH_SECS}s)" ;;
*)
  echo "usage: $0 start|stop|kill|restart|status|fetch" >&2
  exit 2
  ;;
esac

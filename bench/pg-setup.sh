#!/usr/bin/env bash
# bench/pg-setup.sh: a PostgreSQL cluster on loopback for the baseline in
# bench/pgrefund, idempotently. Installs Debian's postgresql package if no
# server is installed, creates a cluster under $PGBENCH_DIR (default
# /tmp/refundd-pg) owned by the postgres user, starts it on 127.0.0.1 on a
# free port with the settings below, creates the database "refundbench",
# and prints its DSN as the last line. Run again: it reuses the cluster and
# prints the same DSN.
#
#   bench/pg-setup.sh          # set up (or reuse) and print the DSN
#   bench/pg-setup.sh stop     # stop the cluster
#   bench/pg-setup.sh destroy  # stop it and delete its directory
set -euo pipefail

DIR=${PGBENCH_DIR:-/tmp/refundd-pg}
DATA=$DIR/data

log() { echo "pg-setup: $*" >&2; }

find_bin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [[ -n $d && -x $d/pg_ctl ]]; then
        echo "$d"
    fi
}

BIN=$(find_bin)
if [[ -z $BIN ]]; then
    log "installing postgresql (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    BIN=$(find_bin)
    [[ -n $BIN ]] || { log "postgresql installed but no pg_ctl found"; exit 1; }
fi

# Run a command as the cluster's owner: postgres when we are root.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

running() { as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

case ${1:-start} in
stop)
    if [[ -d $DATA ]] && running; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2; fi
    exit 0 ;;
destroy)
    if [[ -d $DATA ]] && running; then as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2; fi
    rm -rf "$DIR"
    exit 0 ;;
start) ;;
*) log "usage: $0 [start|stop|destroy]"; exit 2 ;;
esac

mkdir -p "$DIR"
if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || { log "no postgres user (is the postgresql package installed?)"; exit 1; }
    chown postgres: "$DIR"
fi

if [[ ! -f $DATA/PG_VERSION ]]; then
    log "initdb in $DATA"
    as_owner "$BIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --no-locale >&2
fi

# The settings every published number used (docs/BENCHMARKS.md). Durability
# stays on (fsync, synchronous_commit, full_page_writes): the baseline must
# keep what it acknowledges, like refundd. The rest is ordinary tuning for a
# small write-heavy OLTP box: enough shared buffers for the working set,
# checkpoints far apart so none lands in a short run, no TLS on loopback.
cat >"$DIR/bench.conf" <<'EOF'
listen_addresses = '127.0.0.1'
max_connections = 200
shared_buffers = 512MB
wal_buffers = 16MB
synchronous_commit = on
fsync = on
full_page_writes = on
checkpoint_timeout = 30min
max_wal_size = 8GB
min_wal_size = 1GB
wal_compression = on
effective_io_concurrency = 200
random_page_cost = 1.1
log_min_messages = warning
EOF
[[ $(id -u) -eq 0 ]] && chown postgres: "$DIR/bench.conf"
grep -q "include_if_exists = '$DIR/bench.conf'" "$DATA/postgresql.conf" ||
    echo "include_if_exists = '$DIR/bench.conf'" | as_owner tee -a "$DATA/postgresql.conf" >/dev/null

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The first port tried lies below Linux's ephemeral range (32768-60999 by
# default): a port in that range can be held at any moment by the local end
# of some client's connection (a test suite opens thousands on loopback),
# and then bind fails although nothing listens there, which a connect probe
# cannot see. A start that fails on a taken address moves to the next port;
# any other failure prints the server's log and stops.
if running; then
    PORT=$(cat "$DIR/port")
    log "already running on port $PORT"
else
    PORT=$(cat "$DIR/port" 2>/dev/null || echo 25432)
    for attempt in $(seq 1 20); do
        while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
        log "starting on 127.0.0.1:$PORT"
        : >"$DIR/server.log"
        [[ $(id -u) -eq 0 ]] && chown postgres: "$DIR/server.log"
        if as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
            -o "-p $PORT -k $DIR" start >&2; then
            echo "$PORT" >"$DIR/port"
            break
        fi
        if grep -q "Address already in use" "$DIR/server.log" && [[ $attempt -lt 20 ]]; then
            log "port $PORT is taken (attempt $attempt); trying the next one"
            PORT=$((PORT + 1))
            continue
        fi
        log "the server did not start; its log ($DIR/server.log):"
        tail -n 40 "$DIR/server.log" >&2
        exit 1
    done
fi

PSQL=("$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -t -A)
if [[ $("${PSQL[@]}" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'refundbench'") != 1 ]]; then
    "${PSQL[@]}" -d postgres -c "CREATE DATABASE refundbench" >&2
fi
echo "postgres://postgres@127.0.0.1:$PORT/refundbench?sslmode=disable"

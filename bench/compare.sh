#!/usr/bin/env bash
# bench/compare.sh: refundd against the PostgreSQL baseline (bench/pgrefund),
# the same refundbench scenario at the same client count, in turns
# A B A B, then a table of ratios. Both services use the same in-process
# provider stub (internal/simprovider, no RSA): refundd with
# --provider memory --sandbox-delay 0, pgrefund with --provider-delay 0.
#
#   bench/compare.sh                       # lifecycle, 64 clients, 2 rounds of 20 s
#   CLIENTS=16 ROUNDS=3 bench/compare.sh
#   SCENARIO=notify-storm RATE=500 bench/compare.sh
#   PIN=1 bench/compare.sh                 # system under test on CPU 0, load generator on CPU 1
#
# PIN=1 (needs taskset and two CPUs) keeps the load generator off the
# system under test's core: refundd, pgrefund and every PostgreSQL process
# run on CPU 0, refundbench on CPU 1. Unpinned, the load generator takes
# CPU from whichever service it measures, and the services differ in how
# much they lose to it. PostgreSQL's affinity is given back at exit.
#
# Before every round the page cache's dirty pages are written back (sync),
# outside the measured window: PostgreSQL leaves its data pages to the
# kernel, which would write them during the next round, often refundd's.
# On one CPU refundd raises its own GOMAXPROCS to 2 (--min-procs); pgrefund
# keeps Go's choice (one P), which measured faster for it than two
# (docs/BENCHMARKS.md, "Two Ps on one CPU").
#
# notify-storm needs refunds that wait for their notification: refundd then
# runs --provider sandbox --sandbox-delay 1h (the WeChat Pay protocol, RSA
# on each submission, which is set-up work here, not timed) and pgrefund
# --provider-delay 1h with refundd's sandbox keys; the storm is the same
# signed notifications against both.
#
# Settings (environment): SCENARIO (lifecycle), CLIENTS (64), DURATION
# (20s), WARMUP (5s), ROUNDS (2), RATE (open loop per second; default
# closed loop with CLIENTS), DUPLICATES (notify-storm copies, 5), POOL (pgrefund's connections; default
# its own), PG_GOGC (pgrefund's GOGC, 1600 like refundd's --gc-percent), OUT (directory for binaries, data and the JSON reports; default
# a new one under /tmp). Needs root or sudo-less apt for the first
# bench/pg-setup.sh; run `bench/pg-setup.sh destroy` to remove PostgreSQL's
# cluster afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

SCENARIO=${SCENARIO:-lifecycle}
CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-20s}
WARMUP=${WARMUP:-5s}
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-}
DUPLICATES=${DUPLICATES:-5}
POOL=${POOL:-}
PIN=${PIN:-0}
OUT=${OUT:-$(mktemp -d /tmp/refundd-compare.XXXXXX)}
BIN=$OUT/bin
mkdir -p "$BIN"

log() { echo "compare: $*" >&2; }

log "building into $BIN"
go build -o "$BIN/refundd" ./cmd/refundd
go build -o "$BIN/refundbench" ./cmd/refundbench
go build -o "$BIN/pgrefund" ./bench/cmd/pgrefund

DSN=$(bench/pg-setup.sh | tail -1)
TOKEN=bench$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

. bench/lib.sh
SUT=() LOADGEN=()
if [[ $PIN == 1 ]]; then
    command -v taskset >/dev/null || { log "PIN=1 needs taskset (util-linux)"; exit 2; }
    (( $(nproc) >= 2 )) || { log "PIN=1 needs two CPUs"; exit 2; }
    SUT=(taskset -c 0) LOADGEN=(taskset -c 1)
    # The postmaster and its backends: new backends inherit its affinity.
    for p in $(pgrep -u postgres postgres); do taskset -a -p -c 0 "$p" >/dev/null; done
    trap 'for p in $(pgrep -u postgres postgres); do taskset -a -p -c 0-$(( $(nproc) - 1 )) "$p" >/dev/null 2>&1; done; cleanup' EXIT
else
    trap cleanup EXIT
fi

PROVIDER=(--provider memory --sandbox-delay 0)
PG_ARGS=(--dsn "$DSN" --listen 127.0.0.1:0 --reset --token "$TOKEN")
BENCH_ARGS=()
if [[ $SCENARIO == notify-storm ]]; then
    # The storm comes from one address, faster than WeChat could send:
    # refundd's per-address bound (--notify-rate-limit) is not measured here.
    PROVIDER=(--provider sandbox --sandbox-delay 1h --notify-rate-limit 0)
    PG_ARGS+=(--provider-delay 1h --sandbox-keys "$OUT/refundd-data/sandbox")
    BENCH_ARGS+=(--sandbox-keys "$OUT/refundd-data/sandbox" --duplicates "$DUPLICATES")
fi
[[ -n $POOL ]] && PG_ARGS+=(--pool "$POOL")
if [[ -n $RATE ]]; then BENCH_ARGS+=(--rate "$RATE"); else BENCH_ARGS+=(--clients "$CLIENTS"); fi

REFUNDD_TOKENS=service:$TOKEN "${SUT[@]}" "$BIN/refundd" --listen 127.0.0.1:0 --data "$OUT/refundd-data" \
    "${PROVIDER[@]}" --refund-spacing 0 --log-level warn \
    >"$OUT/refundd.out" 2>"$OUT/refundd.err" &
REFUNDD_PID=$!
PIDS+=($REFUNDD_PID)
REFUNDD_URL=$(url_of "$OUT/refundd.out") # its sandbox keys exist from here on
# pgrefund's Go collector gets refundd's default setting (--gc-percent 1600),
# so the two services differ in design, not in runtime tuning.
GOGC=${PG_GOGC:-1600} "${SUT[@]}" "$BIN/pgrefund" "${PG_ARGS[@]}" >"$OUT/pgrefund.out" 2>"$OUT/pgrefund.err" &
PG_PID=$!
PIDS+=($PG_PID)
PG_URL=$(url_of "$OUT/pgrefund.out")
log "refundd at $REFUNDD_URL, pgrefund at $PG_URL ($(head -1 "$OUT/pgrefund.out"))"

echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-4)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: PIN=$PIN SCENARIO=$SCENARIO CLIENTS=$CLIENTS RATE=${RATE:-closed} DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS POOL=${POOL:-default} PG_GOGC=${PG_GOGC:-1600} bench/compare.sh"
REPORTS=()
for round in $(seq "$ROUNDS"); do
    for svc in refundd pgrefund; do
        # The service's CPU time is measured too: refundd's process, or
        # pgrefund's plus every postgres process.
        url=$REFUNDD_URL
        cpu=(--cpu-pids "$REFUNDD_PID")
        if [[ $svc == pgrefund ]]; then
            url=$PG_URL
            cpu=(--cpu-pids "$PG_PID" --cpu-user postgres)
        fi
        f="$OUT/$round-$svc.json"
        # Write back what the page cache holds dirty before the window
        # opens: PostgreSQL's data pages (its background writer leaves them
        # to the kernel) would otherwise be written during the next
        # round, which is often refundd's. refundd leaves nothing dirty
        # (every write is fdatasynced).
        dirty=$(awk '/^Dirty:/ {print $2}' /proc/meminfo)
        t0=$(date +%s.%N)
        sync
        log "round $round: $svc (before it: ${dirty} kB dirty, written back in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s)"
        REFUNDD_TOKEN=$TOKEN "${LOADGEN[@]}" "$BIN/refundbench" --target "$url" --label "$svc" --scenario "$SCENARIO" \
            "${BENCH_ARGS[@]}" --duration "$DURATION" --warmup "$WARMUP" --output json --check-max 5000 "${cpu[@]}" \
            >"$f" 2>"$OUT/$round-$svc.log" || { log "$svc run failed (check or error); see $OUT/$round-$svc.log"; cat "$OUT/$round-$svc.log" >&2; }
        REPORTS+=("$f")
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$BIN/refundbench" compare "${REPORTS[@]}"
echo
echo "reports: $OUT"

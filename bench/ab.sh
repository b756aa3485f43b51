#!/usr/bin/env bash
# bench/ab.sh: refundd before and after a change, on the same machine in
# the same minutes. Builds refundd from a git revision (BASE, default HEAD)
# and from the working tree, starts both with the flags bench/compare.sh
# uses, runs the same refundbench scenario against each in turn (tree,
# base, tree, base, ...), then prints `refundbench compare` of the two:
# throughput tree/base, p99 tree/base and CPU per operation base/tree, and
# the KiB each refundd allocates per operation (from its /metrics), which
# moves least with the neighbours' load.
#
#   bench/ab.sh                                   # lifecycle, 64 clients, 3 rounds of 10 s
#   BASE=HEAD~3 ROUNDS=4 bench/ab.sh
#   SCENARIO=notify-storm RATE=500 bench/ab.sh
#   PIN=1 bench/ab.sh                             # both refundd on CPU 0, refundbench on CPU 1
#
# Settings (environment): BASE (HEAD), TREE (the directory the "tree"
# side is built from; default this repository), SCENARIO (lifecycle), CLIENTS (64),
# RATE (open loop per second; default closed loop with CLIENTS), DURATION
# (10s), WARMUP (3s), ROUNDS (3), DUPLICATES (notify-storm copies, 5), OUT
# (directory for binaries, data and the JSON reports; default a new one
# under /tmp), TREE_ENV and BASE_ENV (extra environment for one side's
# refundd, e.g. TREE_ENV="GOMAXPROCS=4" with BASE=HEAD to try a runtime
# setting), PIN (1: both refundd on CPU 0 and the load generator on CPU 1,
# as in bench/compare.sh; only the side being measured is busy at a time).
# No PostgreSQL is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-HEAD}
TREE=${TREE:-$PWD}
SCENARIO=${SCENARIO:-lifecycle}
CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-}
DUPLICATES=${DUPLICATES:-5}
OUT=${OUT:-$(mktemp -d /tmp/refundd-ab.XXXXXX)}
TREE_ENV=${TREE_ENV:-}
BASE_ENV=${BASE_ENV:-}
PIN=${PIN:-0}
BIN=$OUT/bin
mkdir -p "$BIN" "$OUT/base-src"

log() { echo "ab: $*" >&2; }

log "building $BASE and the working tree into $BIN"
git archive "$BASE" | tar -x -C "$OUT/base-src"
(cd "$OUT/base-src" && go build -o "$BIN/refundd-base" ./cmd/refundd)
(cd "$TREE" && go build -o "$BIN/refundd-tree" ./cmd/refundd)
go build -o "$BIN/refundbench" ./cmd/refundbench
TOKEN=bench$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

. bench/lib.sh
trap cleanup EXIT

SUT=() LOADGEN=()
if [[ $PIN == 1 ]]; then
    command -v taskset >/dev/null || { log "PIN=1 needs taskset (util-linux)"; exit 2; }
    (( $(nproc) >= 2 )) || { log "PIN=1 needs two CPUs"; exit 2; }
    SUT=(taskset -c 0) LOADGEN=(taskset -c 1)
fi

PROVIDER=(--provider memory --sandbox-delay 0)
[[ $SCENARIO == notify-storm ]] && PROVIDER=(--provider sandbox --sandbox-delay 1h)
LOAD=(--clients "$CLIENTS")
[[ -n $RATE ]] && LOAD=(--rate "$RATE")

declare -A URL PID SIDE_ENV
SIDE_ENV[tree]=$TREE_ENV
SIDE_ENV[base]=$BASE_ENV
for v in tree base; do
    # shellcheck disable=SC2086 # the side's settings are words on purpose
    env ${SIDE_ENV[$v]} REFUNDD_TOKENS=service:$TOKEN "${SUT[@]}" "$BIN/refundd-$v" --listen 127.0.0.1:0 --data "$OUT/$v-data" \
        "${PROVIDER[@]}" --refund-spacing 0 --log-level warn >"$OUT/$v.out" 2>"$OUT/$v.err" &
    PID[$v]=$!
    PIDS+=("${PID[$v]}")
    URL[$v]=$(url_of "$OUT/$v.out")
done

echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-4)"
echo "base: $BASE ($(git rev-parse --short "$BASE")); tree: $TREE"
echo "command: PIN=$PIN BASE=$BASE TREE=$TREE TREE_ENV=\"$TREE_ENV\" BASE_ENV=\"$BASE_ENV\" SCENARIO=$SCENARIO CLIENTS=$CLIENTS RATE=${RATE:-closed} DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS bench/ab.sh"
REPORTS=()
for round in $(seq "$ROUNDS"); do
    for v in tree base; do
        extra=()
        [[ $SCENARIO == notify-storm ]] && extra=(--sandbox-keys "$OUT/$v-data/sandbox" --duplicates "$DUPLICATES")
        f="$OUT/$round-$v.json"
        log "round $round: $v (load average $(cut -d' ' -f1 /proc/loadavg))"
        REFUNDD_TOKEN=$TOKEN "${LOADGEN[@]}" "$BIN/refundbench" --target "${URL[$v]}" --label "$v" --scenario "$SCENARIO" \
            "${LOAD[@]}" "${extra[@]}" --duration "$DURATION" --warmup "$WARMUP" --output json --check-max 2000 \
            --cpu-pids "${PID[$v]}" >"$f" 2>"$OUT/$round-$v.log" ||
            { log "$v run failed (check or error); see $OUT/$round-$v.log"; cat "$OUT/$round-$v.log" >&2; }
        REPORTS+=("$f")
    done
done
echo
"$BIN/refundbench" compare "${REPORTS[@]}"
echo
echo "reports: $OUT"

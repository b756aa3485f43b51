#!/usr/bin/env bash
# bench/merchants.sh: the lifecycle with many merchants against one
# (issue 19, Performance: 100 merchants within 10% of one merchant's
# throughput), in one run on one machine: two refundd from the working
# tree, --provider memory (no sandbox, no credentials read), one with a
# merchants file of one merchant and one with a file of MERCHANTS, loaded
# in turns (many, one, many, one, ...) by refundbench --merchants, which
# registers round-robin across the file's merchants and checks each
# reservation's merchant and refund-number prefix. Prints `refundbench
# compare` of the two: throughput many/one, p99 many/one, CPU per
# operation one/many.
#
#   bench/merchants.sh                              # 100 merchants, 64 clients, 3 rounds of 10 s
#   MERCHANTS=1000 ROUNDS=4 bench/merchants.sh
#
# Needs refundd's --merchants-file (issue 19 wiring). The merchants files
# come from `refundbench merchants-file` (valid for refundd's parser; the
# credentials they name are never read with --provider memory).
#
# Settings (environment): MERCHANTS (100), CLIENTS (64), DURATION (10s),
# WARMUP (3s), ROUNDS (3), PIN (1: both refundd on core 0 and the load
# generator on core 1 with taskset, so the generator does not take the
# system's CPU; 0 leaves scheduling to the kernel), OUT (directory for binaries, data, merchants
# files and the JSON reports; default a new one under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

MERCHANTS=${MERCHANTS:-100}
CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-1}
SYS=()
GEN=()
if [[ $PIN == 1 ]]; then
    SYS=(taskset -c 0)
    GEN=(taskset -c 1)
fi
OUT=${OUT:-$(mktemp -d /tmp/refundd-merchants.XXXXXX)}
BIN=$OUT/bin
mkdir -p "$BIN"

log() { echo "merchants: $*" >&2; }

log "building refundd and refundbench into $BIN"
go build -o "$BIN/refundd" ./cmd/refundd
go build -o "$BIN/refundbench" ./cmd/refundbench
TOKEN=bench$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

. bench/lib.sh
trap cleanup EXIT

declare -A URL PID COUNT
COUNT[one]=1
COUNT[many]=$MERCHANTS
for v in many one; do
    "$BIN/refundbench" merchants-file --merchants "${COUNT[$v]}" --out "$OUT/$v.toml"
    REFUNDD_TOKENS=service:$TOKEN "${SYS[@]}" "$BIN/refundd" --listen 127.0.0.1:0 --data "$OUT/$v-data" \
        --provider memory --sandbox-delay 0 --merchants-file "$OUT/$v.toml" \
        --refund-spacing 0 --log-level warn >"$OUT/$v.out" 2>"$OUT/$v.err" &
    PID[$v]=$!
    PIDS+=("${PID[$v]}")
    URL[$v]=$(url_of "$OUT/$v.out") || { cat "$OUT/$v.err" >&2; exit 1; }
done

echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-4)"
echo "revision: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)')"
echo "command: MERCHANTS=$MERCHANTS CLIENTS=$CLIENTS DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS PIN=$PIN bench/merchants.sh"
REPORTS=()
for round in $(seq "$ROUNDS"); do
    for v in many one; do
        f="$OUT/$round-$v.json"
        log "round $round: $v (${COUNT[$v]} merchants; load average $(cut -d' ' -f1-3 /proc/loadavg))"
        REFUNDD_TOKEN=$TOKEN "${GEN[@]}" "$BIN/refundbench" --target "${URL[$v]}" --label "$v" --scenario lifecycle \
            --clients "$CLIENTS" --merchants "${COUNT[$v]}" --duration "$DURATION" --warmup "$WARMUP" \
            --output json --check-max 2000 --cpu-pids "${PID[$v]}" >"$f" 2>"$OUT/$round-$v.log" ||
            { log "$v run failed (check or error); see $OUT/$round-$v.log"; cat "$OUT/$round-$v.log" >&2; }
        REPORTS+=("$f")
    done
done
echo
"$BIN/refundbench" compare "${REPORTS[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reports: $OUT"

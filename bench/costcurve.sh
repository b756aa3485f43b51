#!/usr/bin/env bash
# bench/costcurve.sh: what a long history costs (issue 24, "the cost curve,
# measured"). For each size in SIZES (reservations; writeHistory of
# cmd/refundd/boot_bench_test.go writes about ten events per reservation)
# it writes a journal, then measures on it, against a fresh journal in
# the same round:
#
#   - bytes per event (file size / events written);
#   - boot to ready (refundd on the journal, first 200 on /readyz);
#   - the HTTP lifecycle (refundbench, memory provider), history then fresh,
#     ROUNDS times in turn, refundd on core 0 and the load generator on
#     core 1 (PIN=1);
#   - a hot backup's time (refundctl backup --server);
#   - refundctl journal verify and journal stats: wall time, peak RSS and
#     peak anonymous RSS (the heap; the rest is the file the kernel maps),
#     by bench/peak.sh.
#
#   bench/costcurve.sh                                   # 100k and 1M reservations (~1M, ~10.8M events)
#   SIZES="100000 1000000 3000000" ROUNDS=3 bench/costcurve.sh
#
# Settings (environment): SIZES, CLIENTS (64), DURATION (10s), WARMUP (3s),
# ROUNDS (2), PIN (1), OUT (a directory with room for the journals: about
# 5.1 KB per reservation; default a new one under /tmp), KEEP (1 keeps the
# journals, default 0 removes each after its size is measured), IN_FLIGHT
# (1 leaves every tenth reservation's last refund in flight and due at
# boot, recovery work beside the measured load; default 0, a steady
# history whose refunds all succeeded).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-100000 1000000}
CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
ROUNDS=${ROUNDS:-2}
PIN=${PIN:-1}
KEEP=${KEEP:-0}
IN_FLIGHT=${IN_FLIGHT:-0}
SYS=()
GEN=()
if [[ $PIN == 1 ]]; then
    SYS=(taskset -c 0)
    GEN=(taskset -c 1)
fi
OUT=${OUT:-$(mktemp -d /tmp/refundd-costcurve.XXXXXX)}
BIN=$OUT/bin
mkdir -p "$BIN"

log() { echo "costcurve: $*" >&2; }

log "building refundd, refundctl and refundbench into $BIN"
go build -o "$BIN/refundd" ./cmd/refundd
go build -o "$BIN/refundctl" ./cmd/refundctl
go build -o "$BIN/refundbench" ./cmd/refundbench
TOKEN=bench$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

. bench/lib.sh
trap cleanup EXIT

# start DIR LABEL: start refundd on DIR; sets PID and URL, and BOOT (seconds
# from exec to the first 200 on /readyz).
start() {
    local dir=$1 label=$2 t0 i
    t0=$(date +%s.%N)
    REFUNDD_TOKENS=service:$TOKEN,operator:ops$TOKEN "${SYS[@]}" "$BIN/refundd" --listen 127.0.0.1:0 --data "$dir" \
        --provider memory --sandbox-delay 0 --refund-spacing 0 --log-level warn >"$OUT/$label.out" 2>"$OUT/$label.err" &
    PID=$!
    PIDS+=("$PID")
    URL=$(url_of "$OUT/$label.out") || { cat "$OUT/$label.err" >&2; exit 1; }
    for i in $(seq 600); do
        if curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null; then break; fi
        sleep 0.05
    done
    BOOT=$(echo "$(date +%s.%N) - $t0" | bc)
}

stop() {
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
}

# lifecycle LABEL: one refundbench run against URL; prints lifecycles/s.
lifecycle() {
    local f="$OUT/$1.json"
    REFUNDD_TOKEN=$TOKEN "${GEN[@]}" "$BIN/refundbench" --target "$URL" --label "$1" --scenario lifecycle \
        --clients "$CLIENTS" --duration "$DURATION" --warmup "$WARMUP" --output json --check-max 2000 \
        >"$f" 2>"$OUT/$1.log" || { log "$1 failed; see $OUT/$1.log"; cat "$OUT/$1.log" >&2; exit 1; }
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.0f %.1f' % (d['per_second'], d['ops']['lifecycle']['p99_ms']))" "$f"
}

echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3-4)"
echo "revision: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)')"
echo "command: SIZES=\"$SIZES\" CLIENTS=$CLIENTS DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS PIN=$PIN bench/costcurve.sh"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| reservations | events | file MiB | bytes/event | write s | boot s | lifecycle/s history | fresh | history/fresh | p99 ms history / fresh | backup s | verify s | verify peak RSS / anon MiB | stats s | stats peak RSS / anon MiB |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in $SIZES; do
    dir=$OUT/h$n
    mkdir -p "$dir"
    log "writing $n reservations to $dir/refundd.db (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    t0=$(date +%s.%N)
    HISTORY_FILE=$dir/refundd.db HISTORY_RESERVATIONS=$n HISTORY_IN_FLIGHT=$IN_FLIGHT go test -run='^TestWriteHistoryFile$' -count=1 -timeout 240m -v ./cmd/refundd/ >"$OUT/write-$n.log" 2>&1 ||
        { cat "$OUT/write-$n.log" >&2; exit 1; }
    write=$(echo "$(date +%s.%N) - $t0" | bc)
    events=$(grep -o 'wrote [0-9]* events' "$OUT/write-$n.log" | awk '{print $2}')
    bytes=$(stat -c %s "$dir/refundd.db")

    log "$n: verify and stats"
    bench/peak.sh "$OUT/verify-$n" "$BIN/refundctl" journal verify --file "$dir/refundd.db" >"$OUT/verify-$n.peak"
    bench/peak.sh "$OUT/stats-$n" "$BIN/refundctl" journal stats --file "$dir/refundd.db" >"$OUT/stats-$n.peak"
    field() { grep -o "$2=[^ ]*" "$1" | cut -d= -f2 | tr -d 'sMiB'; }

    his=() fre=() hp=() fp=()
    for round in $(seq "$ROUNDS"); do
        log "$n: round $round, history (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        start "$dir" "h$n-$round"
        boot=$BOOT
        read -r ops p99 < <(lifecycle "h$n-$round")
        his+=("$ops") hp+=("$p99")
        if [[ $round == 1 ]]; then
            t0=$(date +%s.%N)
            REFUNDCTL_TOKEN=ops$TOKEN "$BIN/refundctl" backup --server "$URL" --out "$OUT/backup-$n.db" >"$OUT/backup-$n.log" 2>&1 ||
                { cat "$OUT/backup-$n.log" >&2; exit 1; }
            backup=$(echo "$(date +%s.%N) - $t0" | bc)
            rm -f "$OUT/backup-$n.db"
        fi
        stop
        log "$n: round $round, fresh"
        rm -rf "$OUT/fresh"
        start "$OUT/fresh" "f$n-$round"
        read -r ops p99 < <(lifecycle "f$n-$round")
        fre+=("$ops") fp+=("$p99")
        stop
    done
    sum() { local s=0 v; for v in "$@"; do s=$((s + v)); done; echo "$s"; }
    hsum=$(sum "${his[@]}") fsum=$(sum "${fre[@]}")
    printf '| %s | %s | %.0f | %.0f | %.0f | %.2f | %s | %s | %.2fx | %s / %s | %.1f | %s | %s / %s | %s | %s / %s |\n' \
        "$n" "$events" "$(echo "$bytes / 1048576" | bc -l)" "$(echo "$bytes / $events" | bc -l)" "$write" "$boot" \
        "${his[*]}" "${fre[*]}" "$(echo "$hsum / $fsum" | bc -l)" "${hp[*]}" "${fp[*]}" "$backup" \
        "$(field "$OUT/verify-$n.peak" wall)" "$(field "$OUT/verify-$n.peak" maxrss)" "$(field "$OUT/verify-$n.peak" peak_anon)" \
        "$(field "$OUT/stats-$n.peak" wall)" "$(field "$OUT/stats-$n.peak" maxrss)" "$(field "$OUT/stats-$n.peak" peak_anon)"
    if [[ $KEEP != 1 ]]; then rm -rf "$dir"; fi
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "logs and reports: $OUT"

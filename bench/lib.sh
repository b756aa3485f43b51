# bench/lib.sh: process helpers shared by bench/compare.sh and bench/ab.sh
# (sourced, not run). The caller defines log() and fills PIDS.

PIDS=()

# cleanup stops every process in PIDS; the scripts trap it on EXIT.
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

# url_of FILE: wait for "listening on http://..." in FILE and print the URL.
url_of() {
    local i
    for i in $(seq 100); do
        if grep -qo 'listening on http://[0-9.:]*' "$1" 2>/dev/null; then
            grep -o 'http://[0-9.:]*' "$1" | head -1
            return 0
        fi
        sleep 0.1
    done
    log "no listening line in $1"; cat "$1" >&2; return 1
}

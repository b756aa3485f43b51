#!/usr/bin/env bash
# Runs refundd's chaos tests (cmd/refundd TestChaos, one merchant, and
# TestChaos_FourMerchants, a platform of four) for longer than CI does.
#
#   CHAOS_SEED=12345 CHAOS_DURATION=5m bash test/chaos.sh
#
# CHAOS_SEED      replays a run's plan (default: a new random seed, printed)
# CHAOS_DURATION  time of chaos before the final reconciliation (default 30s,
#                 24 reservations; longer runs get 0.8 reservations a second)
# CHAOS_RESERVATIONS, CHAOS_ARTIFACTS (directory for logs, timeline and books,
#                 written on failure, and on success when set) are passed too.
# CHAOS_TESTS     a -run pattern (default both: '^TestChaos(_FourMerchants)?$')
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${CHAOS_SEED:-}" ]]; then
	CHAOS_SEED=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
fi
export CHAOS_SEED
export CHAOS_DURATION=${CHAOS_DURATION:-30s}
echo "chaos seed ${CHAOS_SEED}, duration ${CHAOS_DURATION} (replay: CHAOS_SEED=${CHAOS_SEED} CHAOS_DURATION=${CHAOS_DURATION} bash test/chaos.sh)"
go test -race -run "${CHAOS_TESTS:-^TestChaos(_FourMerchants)?\$}" -count=1 -timeout 2h ./cmd/refundd -v

#!/usr/bin/env bash
# The soak: TAP 050's randomized workload with 100,000 transactions (CHROMA_SYNC_TXNS),
# up to 5 crash restarts (CHROMA_SYNC_CRASHES) and a 4-hour limit for the file
# (TAP_TIMEOUT), through the harness like any TAP test. Arguments go to run_all.sh
# (e.g. --server new); CHROMA_SYNC_SEED replays a run's transactions.
#
#   bash test/soak.sh                 # or: make soak
#   CHROMA_SYNC_SEED=123 bash test/soak.sh --server new
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CHROMA_SYNC_TXNS=${CHROMA_SYNC_TXNS:-100000}
export CHROMA_SYNC_CRASHES=${CHROMA_SYNC_CRASHES:-5}
export TAP_TIMEOUT=${TAP_TIMEOUT:-14400}
TAP='050_random_workload*' exec bash test/run_all.sh --only tap "$@"

#!/usr/bin/env bash
# Many searches from SQL: QUERIES query embeddings (384-d) against a collection of RECORDS
# records, n_results 5, asked two ways: one chroma_query per row through LATERAL (one
# request per query) and one chroma_query_batch over the 2-D array of them (a request per
# chroma_sync.batch_size queries). Checks that both return the same records in the same
# order with the same distances, documents and metadata, and prints the time of each (best
# of ROUNDS, the two ways alternating) and their ratio (goal: batch >= 5x faster). Starts
# its own PostgreSQL 15 and Chroma server on free ports and stops them at the end. Run as
# root, after make && make install:
#
#   bash bench/query_batch.sh [--server old|new] [QUERIES [RECORDS]]
#        QUERIES defaults to 1,000, RECORDS to 10,000 (about a minute on 2 vCPUs)
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection; ROUNDS (3).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
SERVER=old
if [ "${1:-}" = --server ]; then
	SERVER=${2:-}
	shift 2
fi
case $SERVER in old | new) ;; *) echo "--server is old or new" >&2; exit 2 ;; esac
QUERIES=${1:-1000}
RECORDS=${2:-10000}
ROUNDS=${ROUNDS:-3}
DIM=384
K=5
for v in "$QUERIES" "$RECORDS" "$ROUNDS"; do
	case $v in '' | *[!0-9]*) echo "QUERIES, RECORDS and ROUNDS are numbers" >&2; exit 2 ;; esac
done
[ "$QUERIES" -ge 1 ] && [ "$RECORDS" -ge "$K" ] && [ "$ROUNDS" -ge 1 ] ||
	{ echo "QUERIES >= 1, RECORDS >= $K, ROUNDS >= 1" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/query_batch.sh must run as root (it runs PostgreSQL as the postgres user)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_query_batch.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"
chown postgres: "$LOG_DIR"
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

die() {
	echo "query_batch: $*" >&2
	exit 1
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "${KEEP:-0}" = 1 ]; then
		echo "KEEP=1: servers left running, work dir $WORK_DIR"
	else
		stop_all_pg
		stop_all_chroma
		[ $rc -eq 0 ] && rm -rf "$WORK_DIR"
	fi
	[ $rc -eq 0 ] || echo "query_batch: failed; logs in $LOG_DIR" >&2
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
T0=$SECONDS
step() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }

npm_install "$SERVER" >"$LOG_DIR/npm-$SERVER.log" 2>&1 || die "npm ci in test/chroma/$SERVER failed"
[ "$SERVER" = new ] && { prepare_glibc >"$LOG_DIR/glibc.log" 2>&1 || die "no glibc for the new server"; }
CHROMA_PORT=$(free_port) || die "no free port"
step "Chroma server ($SERVER) on port $CHROMA_PORT"
start_chroma "$SERVER" "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log" >/dev/null ||
	die "Chroma did not start (see $LOG_DIR/chroma.log)"
step "PostgreSQL"
start_pg query_batch "http://127.0.0.1:$CHROMA_PORT" >"$LOG_DIR/pg-start.log" 2>&1 ||
	die "PostgreSQL did not start"
export PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=query_batch
export PGOPTIONS='-c client_min_messages=warning'
"$PG_BIN/psql" -X -q -d postgres -c 'CREATE DATABASE query_batch' || die "CREATE DATABASE failed"
q() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
q 'CREATE EXTENSION chroma_sync' || die "CREATE EXTENSION failed"

step "$RECORDS records of $DIM dimensions into collection bench_query"
q "SELECT chroma_create_collection('bench_query')" >/dev/null || die "create collection failed"
q "CREATE FUNCTION vec(seed int) RETURNS real[] LANGUAGE sql IMMUTABLE AS \$\$
	SELECT array_agg(sin(seed * 12.9898 + j * 78.233)::real ORDER BY j) FROM generate_series(1, $DIM) AS j \$\$" ||
	die "vec failed"
q "SELECT chroma_upsert_query('bench_query', \$\$
	SELECT 'r' || i AS id, vec(i) AS embedding, 'document ' || i AS document,
		jsonb_build_object('i', i) AS metadata
	FROM generate_series(1, $RECORDS) AS i \$\$)" >/dev/null || die "upsert failed"
q "CREATE TABLE questions AS SELECT n, vec(1000000 + n) AS embedding FROM generate_series(1, $QUERIES) AS n" ||
	die "questions failed"

# One round of each way into tables lateral_result and batch_result; prints the seconds.
lateral() {
	q "DROP TABLE IF EXISTS lateral_result"
	q "SELECT extract(epoch FROM clock_timestamp())" >"$WORK_DIR/t0"
	q "CREATE TABLE lateral_result AS
		SELECT q.n AS query_index, r.rank::int AS rank, r.id, r.distance, r.document, r.metadata
		FROM questions q CROSS JOIN LATERAL chroma_query('bench_query', q.embedding, $K)
			WITH ORDINALITY AS r(id, distance, document, metadata, rank)" || die "LATERAL chroma_query failed"
	q "SELECT extract(epoch FROM clock_timestamp()) - $(cat "$WORK_DIR/t0")"
}
batch() {
	q "DROP TABLE IF EXISTS batch_result"
	q "SELECT extract(epoch FROM clock_timestamp())" >"$WORK_DIR/t0"
	q "CREATE TABLE batch_result AS
		SELECT * FROM chroma_query_batch('bench_query',
			(SELECT array_agg(embedding ORDER BY n) FROM questions), $K)" || die "chroma_query_batch failed"
	q "SELECT extract(epoch FROM clock_timestamp()) - $(cat "$WORK_DIR/t0")"
}

# a first query of each way warms the connection and the server's index
q "SELECT count(*) FROM chroma_query('bench_query', vec(1), $K)" >/dev/null || die "warm-up failed"
LAT_TIMES=() BAT_TIMES=()
for r in $(seq 1 "$ROUNDS"); do
	step "round $r: $QUERIES x LATERAL chroma_query"
	LAT_TIMES+=("$(lateral)")
	step "round $r: chroma_query_batch of $QUERIES"
	BAT_TIMES+=("$(batch)")
done

step "comparing the results"
read -r LAT_ROWS BAT_ROWS DIFFERENT < <(q "SELECT (SELECT count(*) FROM lateral_result),
	(SELECT count(*) FROM batch_result),
	(SELECT count(*) FROM lateral_result l FULL JOIN batch_result b USING (query_index, rank)
	 WHERE l.id IS DISTINCT FROM b.id OR l.distance IS DISTINCT FROM b.distance
		OR l.document IS DISTINCT FROM b.document OR l.metadata IS DISTINCT FROM b.metadata)" |
	tr '|' ' ')
[ "$LAT_ROWS" = $((QUERIES * K)) ] || die "LATERAL returned $LAT_ROWS rows, not $((QUERIES * K))"
SAME=yes
[ "$BAT_ROWS" = "$LAT_ROWS" ] && [ "$DIFFERENT" = 0 ] || SAME=NO

echo
echo "chroma_sync search from SQL: $QUERIES queries of $DIM dimensions, n_results $K, collection of $RECORDS records;"
echo "Chroma server \"$SERVER\", chroma_sync.batch_size $(q 'SHOW chroma_sync.batch_size'), $(nproc) vCPU, load at start $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${LAT_TIMES[@]}" >"$WORK_DIR/lat"
printf '%s\n' "${BAT_TIMES[@]}" >"$WORK_DIR/bat"
awk -v q="$QUERIES" -v same="$SAME" -v rows="$BAT_ROWS" -v diff="$DIFFERENT" \
	'NR == FNR { lat[++n] = $1; next } { bat[++m] = $1 }
	END {
		bl = lat[1]; bb = bat[1]; ls = lat[1]; bs = bat[1];
		for (i = 2; i <= n; i++) { if (lat[i] < bl) bl = lat[i]; ls = ls " / " lat[i] }
		for (i = 2; i <= m; i++) { if (bat[i] < bb) bb = bat[i]; bs = bs " / " bat[i] }
		printf "%-34s %9s %12s  %s\n", "way", "best (s)", "queries/s", "rounds (s)";
		printf "%-34s %9.3f %12.0f  %s\n", "LATERAL chroma_query", bl, q / bl, ls;
		printf "%-34s %9.3f %12.0f  %s\n", "chroma_query_batch", bb, q / bb, bs;
		printf "ratio (LATERAL / batch): %.1fx (goal >= 5x: %s); same results: %s (%d rows, %d different)\n",
			bl / bb, (bl / bb >= 5) ? "met" : "NOT met", same, rows, diff
	}' "$WORK_DIR/lat" "$WORK_DIR/bat"
[ "$SAME" = yes ] || die "the two ways returned different results"

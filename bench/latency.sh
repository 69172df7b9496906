#!/usr/bin/env bash
# chroma_upsert_query over a slow network: the same upserts over loopback and through
# test/lib/delay_proxy.pl (a TCP proxy that forwards each chunk after a delay, both ways)
# at round trips of 50 ms (a cloud region to a hosted Chroma) and 150 ms (another
# continent), with chroma_sync.max_concurrent_requests 1 and 4; batch 300 (Chroma Cloud's
# cap per write). Prints the rates (best of ROUNDS, each run into a fresh collection) and
# each rate's ratio to loopback with the same setting, measured in this same run (goal with
# 4 in flight: >= 0.9x at 50 ms, >= 0.8x at 150 ms). Starts its own PostgreSQL 15 and
# Chroma server on free ports and stops them at the end. Run as root, after make && make
# install:
#
#   bash bench/latency.sh [--server old|new] [ROWS_384 [ROWS_1536]]
#        ROWS_384 defaults to 6,000, ROWS_1536 to 2,400 (20 and 8 requests; about 3
#        minutes on 2 vCPUs)
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection; ROUNDS (2);
# RTTS ("50 150": round trips in ms besides loopback); CONCURRENCY ("1 4").
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
SERVER=old
if [ "${1:-}" = --server ]; then
	SERVER=${2:-}
	shift 2
fi
case $SERVER in old | new) ;; *) echo "--server is old or new" >&2; exit 2 ;; esac
ROWS_384=${1:-6000}
ROWS_1536=${2:-2400}
ROUNDS=${ROUNDS:-2}
RTTS=${RTTS:-50 150}
CONCURRENCY=${CONCURRENCY:-1 4}
BATCH=300
for v in "$ROWS_384" "$ROWS_1536" "$ROUNDS" $RTTS $CONCURRENCY; do
	case $v in '' | *[!0-9]*) echo "ROWS_384, ROWS_1536, ROUNDS, RTTS and CONCURRENCY are numbers" >&2; exit 2 ;; esac
done
[ "$ROWS_384" -ge 1 ] && [ "$ROWS_1536" -ge 1 ] && [ "$ROUNDS" -ge 1 ] ||
	{ echo "ROWS_384 >= 1, ROWS_1536 >= 1, ROUNDS >= 1" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/latency.sh must run as root (it runs PostgreSQL as the postgres user)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_latency.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"
chown postgres: "$LOG_DIR"
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

PROXY_PIDS=()
die() {
	echo "latency: $*" >&2
	exit 1
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "${KEEP:-0}" = 1 ]; then
		echo "KEEP=1: servers left running, work dir $WORK_DIR"
	else
		[ ${#PROXY_PIDS[@]} -gt 0 ] && kill "${PROXY_PIDS[@]}" 2>/dev/null
		stop_all_pg
		stop_all_chroma
		[ $rc -eq 0 ] && rm -rf "$WORK_DIR"
	fi
	[ $rc -eq 0 ] || echo "latency: failed; logs in $LOG_DIR" >&2
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
T0=$SECONDS
step() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

npm_install "$SERVER" >"$LOG_DIR/npm-$SERVER.log" 2>&1 || die "npm ci in test/chroma/$SERVER failed"
[ "$SERVER" = new ] && { prepare_glibc >"$LOG_DIR/glibc.log" 2>&1 || die "no glibc for the new server"; }
CHROMA_PORT=$(free_port) || die "no free port"
step "Chroma server ($SERVER) on port $CHROMA_PORT"
start_chroma "$SERVER" "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log" >/dev/null ||
	die "Chroma did not start (see $LOG_DIR/chroma.log)"

# a delay proxy per round trip (half of it each way)
declare -A URL
URL[0]=http://127.0.0.1:$CHROMA_PORT
for rtt in $RTTS; do
	perl "$ROOT/test/lib/delay_proxy.pl" "$CHROMA_PORT" "$WORK_DIR/proxy-$rtt.port" \
		"$(awk -v r="$rtt" 'BEGIN { print r / 2 }')" 2>>"$LOG_DIR/proxy-$rtt.log" &
	PROXY_PIDS+=($!)
	for _ in $(seq 1 100); do [ -s "$WORK_DIR/proxy-$rtt.port" ] && break; sleep 0.1; done
	[ -s "$WORK_DIR/proxy-$rtt.port" ] || die "the delay proxy for $rtt ms did not start"
	URL[$rtt]=http://127.0.0.1:$(cat "$WORK_DIR/proxy-$rtt.port")
	step "delay proxy: $rtt ms round trip on ${URL[$rtt]}"
done

step "PostgreSQL"
start_pg latency "${URL[0]}" >"$LOG_DIR/pg-start.log" 2>&1 || die "PostgreSQL did not start"
export PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=latency
export PGOPTIONS='-c client_min_messages=warning'
"$PG_BIN/psql" -X -q -d postgres -c 'CREATE DATABASE latency' || die "CREATE DATABASE failed"
q() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
# qtime SQL...: runs the statements in one session, prints the time of the last in ms.
qtime() {
	local s out
	out=$({ for s in "${@:1:$#-1}"; do echo "$s;"; done; echo '\timing on'; echo "${*: -1};"; } |
		"$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1) || { echo "$out" >&2; return 1; }
	echo "$out" | awk '/^Time: / { t += $2 } END { printf "%.1f\n", t }'
}
q 'CREATE EXTENSION chroma_sync' || die "CREATE EXTENSION failed"

declare -A ROWS=([384]=$ROWS_384 [1536]=$ROWS_1536)
for dim in 384 1536; do
	step "table of ${ROWS[$dim]} rows of $dim dimensions"
	q "CREATE TABLE src_$dim AS SELECT 'r' || i AS id,
		ARRAY(SELECT sin(i * 12.9898 + j * 78.233)::real FROM generate_series(1, $dim) AS j) AS embedding
		FROM generate_series(1, ${ROWS[$dim]}) AS i" || die "table failed"
	q "VACUUM ANALYZE src_$dim" || die "vacuum failed"
done

# one run: DIM RTT N -> records/s into a fresh collection
n_run=0
run() {
	local dim=$1 rtt=$2 n=$3 coll ms got
	n_run=$((n_run + 1))
	coll=lat_$n_run
	q "SELECT chroma_create_collection('$coll')" >/dev/null || die "create collection failed"
	ms=$(qtime "SET chroma_sync.url = '${URL[$rtt]}'" "SET chroma_sync.batch_size = $BATCH" \
		"SET chroma_sync.max_concurrent_requests = $n" \
		"SELECT chroma_upsert_query('$coll', 'SELECT id, embedding FROM src_$dim')") ||
		die "chroma_upsert_query failed ($dim dims, $rtt ms, $n in flight)"
	got=$(q "SELECT chroma_count('$coll')")
	[ "$got" = "${ROWS[$dim]}" ] || die "collection $coll holds $got records, not ${ROWS[$dim]}"
	q "SELECT chroma_delete_collection('$coll')" >/dev/null
	awk -v n="${ROWS[$dim]}" -v ms="$ms" 'BEGIN { printf "%.0f", n / (ms / 1000) }'
}

# a warm-up run (the server's first writes, not counted)
run 384 0 1 >/dev/null
declare -A BEST RUNS
for round in $(seq 1 "$ROUNDS"); do
	for dim in 384 1536; do
		for rtt in 0 $RTTS; do
			for n in $CONCURRENCY; do
				step "round $round: $dim dims, round trip $rtt ms, $n in flight"
				r=$(run "$dim" "$rtt" "$n")
				k=$dim.$rtt.$n
				RUNS[$k]="${RUNS[$k]:-}${RUNS[$k]:+ / }$r"
				[ "${BEST[$k]:-0}" -ge "$r" ] || BEST[$k]=$r
			done
		done
	done
done

echo
echo "chroma_upsert_query over loopback and through a delay proxy: $ROWS_384 x 384-d and $ROWS_1536 x 1536-d,"
echo "batch $BATCH, best of $ROUNDS rounds; Chroma server \"$SERVER\", $(nproc) vCPU, load at start $LOAD_START"
printf '%-5s %-10s %-9s %10s %9s %-9s %-8s %s\n' dims "round trip" "in flight" "rec/s" "ratio" goal verdict rounds
for dim in 384 1536; do
	for rtt in 0 $RTTS; do
		for n in $CONCURRENCY; do
			k=$dim.$rtt.$n
			base=${BEST[$dim.0.$n]}
			ratio=$(awk -v a="${BEST[$k]}" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
			goal='' verdict=''
			if [ "$n" -ge 4 ] && [ "$rtt" -gt 0 ]; then
				if [ "$rtt" -le 50 ]; then goal=0.9; else goal=0.8; fi
				verdict=$(awk -v r="$ratio" -v g="$goal" 'BEGIN { print (r >= g) ? "met" : "NOT met" }')
				goal=">= $goal"
			fi
			label="$rtt ms"
			[ "$rtt" = 0 ] && label=loopback
			printf '%-5s %-10s %-9s %10s %8sx %-9s %-8s %s\n' "$dim" "$label" "$n" "${BEST[$k]}" \
				"$ratio" "$goal" "$verdict" "${RUNS[$k]}"
		done
	done
done

#!/usr/bin/env bash
# Drains a large backlog of a mirrored 384-d table and watches the worker: its memory and
# its rate over the drain, first on a quiet database, then again with another session
# holding an old snapshot open for the whole drain (xmin held back, so dead queue
# entries cannot be vacuumed away). Starts its own PostgreSQL 15 and Chroma ("old") on
# free ports and stops them at the end. Run as root, after make && make install:
#
#   bash bench/drain_scale.sh [ROWS]      ROWS defaults to 1,000,000 (about 20-40 minutes)
#
# The backlog is made by inserting ROWS rows while the mirror is paused (the queue then
# holds ROWS entries), then resuming it. Printed per run: worker RSS (peak of the
# private memory, RssAnon, and of the whole RSS, which also counts the shared buffers
# the worker touched), records/s over the first and the last tenth of the backlog and
# their ratio, the CPU time the worker and the Chroma server spent per 1,000 records in the
# first and the last tenth (which of the two slows down as the collection grows), and the
# total time. Goals: private RSS <= 100 MB, last/first >= 0.9.
#
# Chroma's own slow-down, measured in the same run: bench/floor (no PostgreSQL) upserts
# FLOOR_N new records (384-d, batch 500) into an empty collection before the drain and into
# the drained collection (holding ROWS records) after it; "chr N/0" is the
# ratio of the two rates, and "ours/chr" = (last/first) / (chr N/0) is what
# the extension adds to the slow-down (1.0: none).
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection; RUNS="quiet"
# or RUNS="xmin_held" runs only one of the two drains.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
ROWS=${1:-1000000}
case $ROWS in '' | *[!0-9]*) echo "ROWS must be a number" >&2; exit 2 ;; esac
[ "$ROWS" -ge 1000 ] || { echo "ROWS must be at least 1000" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/drain_scale.sh must run as root (it runs PostgreSQL as the postgres user)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_drain.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"
chown postgres: "$LOG_DIR"
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

HOLDER_PID=
die() {
	echo "drain_scale: $*" >&2
	exit 1
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$HOLDER_PID" ] && kill "$HOLDER_PID" 2>/dev/null
	if [ "${KEEP:-0}" = 1 ]; then
		echo "KEEP=1: servers left running, work dir $WORK_DIR"
	else
		stop_all_pg
		stop_all_chroma
		[ $rc -eq 0 ] && rm -rf "$WORK_DIR"
	fi
	[ $rc -eq 0 ] || echo "drain_scale: failed; logs in $LOG_DIR" >&2
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
T0=$SECONDS
step() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }

npm_install old >"$LOG_DIR/npm-old.log" 2>&1 || die "npm ci in test/chroma/old failed"
make -s -C "$ROOT/bench" floor >"$LOG_DIR/make-floor.log" 2>&1 || die "building bench/floor failed"
FLOOR=$ROOT/bench/floor
FLOOR_N=$((ROWS / 10))
[ "$FLOOR_N" -gt 10000 ] && FLOOR_N=10000
CHROMA_PORT=$(free_port) || die "no free port"
step "Chroma server (old) on port $CHROMA_PORT"
start_chroma old "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log" >/dev/null ||
	die "Chroma did not start (see $LOG_DIR/chroma.log)"
step "PostgreSQL"
start_pg drain "http://127.0.0.1:$CHROMA_PORT" >"$LOG_DIR/pg-start.log" 2>&1 || die "PostgreSQL did not start"
export PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=drain
psql -X -q -d postgres -c 'CREATE DATABASE drain' || die "CREATE DATABASE failed"
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
q 'CREATE EXTENSION chroma_sync' || die "CREATE EXTENSION failed"
q 'ALTER SYSTEM SET chroma_sync.batch_size = 500' && q 'SELECT pg_reload_conf()' >/dev/null

# kb FIELD PID: a field of /proc/PID/status in kB (0 when the process is gone)
kb() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status" 2>/dev/null || echo 0; }
# ticks PID: user + system CPU time of the process, in clock ticks
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)

# drain RUN HOLD: one backlog of ROWS rows, drained and watched; HOLD=1 holds xmin back.
drain() {
	local run=$1 hold=$2 tbl=scale_$1 tenth=$((ROWS / 10)) pid synced now
	local t_start t_first="" t_last_from="" t_end peak_anon=0 peak_rss=0 anon rss
	local w0 c0 w1 c1 w2 c2 w3 c3 f_early f_late
	step "$run: Chroma alone, $FLOOR_N records into an empty collection"
	f_early=$("$FLOOR" post "http://127.0.0.1:$CHROMA_PORT" "floor_$run" "$FLOOR_N" 384 500 7 |
		awk '{ print $6 }') || die "floor failed"
	q "SELECT chroma_delete_collection('floor_$run')" >/dev/null
	step "$run: table and paused mirror"
	q "CREATE TABLE $tbl (id bigint PRIMARY KEY, embedding real[], body text)" || die "create failed"
	q "SELECT chroma_mirror('$tbl', '$tbl', document_column => 'body')" >/dev/null || die "mirror failed"
	q "SELECT chroma_pause('$tbl')" >/dev/null
	step "$run: insert $ROWS rows (the backlog)"
	q "INSERT INTO $tbl SELECT g, (SELECT pg_catalog.array_agg(sin(g * 0.001 + i)::real)
		FROM generate_series(1, 384) i), 'row ' || g FROM generate_series(1, $ROWS) g" ||
		die "insert failed"
	[ "$(q "SELECT count(*) FROM chroma_sync.queue")" -ge "$ROWS" ] || die "the queue does not hold the backlog"
	if [ "$hold" = 1 ]; then
		# a session with an old snapshot, open for the whole drain
		(printf 'BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM %s;\nSELECT pg_sleep(100000);\n' "$tbl" |
			psql -X -q >/dev/null 2>&1) &
		HOLDER_PID=$!
		sleep 2
		q "SELECT count(*) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND state = 'active'
			AND query LIKE 'SELECT pg_sleep%'" | grep -qx 1 || die "the snapshot holder is not running"
	fi
	pid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'
		AND datname = current_database()")
	[ -n "$pid" ] || die "no worker"
	base=$(q "SELECT synced FROM chroma_sync.mirror WHERE collection = '$tbl'")
	step "$run: drain (worker pid $pid)$([ "$hold" = 1 ] && echo ', xmin held back')"
	q "SELECT chroma_resume('$tbl')" >/dev/null
	t_start=$(date +%s.%N)
	w0=$(ticks "$pid") c0=$(ticks "$CHROMA_PID")
	while :; do
		synced=$(($(q "SELECT synced FROM chroma_sync.mirror WHERE collection = '$tbl'") - base))
		now=$(date +%s.%N)
		anon=$(kb RssAnon "$pid")
		rss=$(kb VmRSS "$pid")
		[ "${anon:-0}" -gt "$peak_anon" ] && peak_anon=$anon
		[ "${rss:-0}" -gt "$peak_rss" ] && peak_rss=$rss
		if [ -z "$t_first" ] && [ "$synced" -ge "$tenth" ]; then
			t_first=$now s_first=$synced w1=$(ticks "$pid") c1=$(ticks "$CHROMA_PID")
		fi
		if [ -z "$t_last_from" ] && [ "$synced" -ge $((ROWS - tenth)) ]; then
			t_last_from=$now s_last_from=$synced w2=$(ticks "$pid") c2=$(ticks "$CHROMA_PID")
		fi
		echo "$now $synced $anon $rss" >>"$LOG_DIR/$run.samples"
		if [ "$synced" -ge "$ROWS" ]; then
			t_end=$now w3=$(ticks "$pid") c3=$(ticks "$CHROMA_PID")
			break
		fi
		[ -d "/proc/$pid" ] || die "the worker exited during the drain (see $LOG_DIR)"
		sleep 0.5
	done
	if [ "$hold" = 1 ]; then
		# end the old snapshot (its session also holds a lock on the table)
		q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query LIKE 'SELECT pg_sleep(100000)%' AND pid <> pg_backend_pid()" >/dev/null
		kill "$HOLDER_PID" 2>/dev/null
		HOLDER_PID=
	fi
	[ "$(q "SELECT count(*) FROM chroma_sync.queue")" = 0 ] || die "the queue is not empty after the drain"
	[ "$(q "SELECT chroma_count('$tbl')")" = "$ROWS" ] || die "the collection does not hold $ROWS records"
	step "$run: Chroma alone, $FLOOR_N new records into the drained collection"
	f_late=$("$FLOOR" post "http://127.0.0.1:$CHROMA_PORT" "$tbl" "$FLOOR_N" 384 500 7 $((ROWS + 1)) |
		awk '{ print $6 }') || die "floor failed"
	awk -v run="$run" -v n="$ROWS" -v t0="$t_start" -v t1="$t_first" -v t2="$t_last_from" \
		-v s1="$s_first" -v s2="$s_last_from" -v t3="$t_end" -v a="$peak_anon" -v r="$peak_rss" \
		-v hz="$HZ" -v w0="$w0" -v w1="$w1" -v w2="$w2" -v w3="$w3" \
		-v c0="$c0" -v c1="$c1" -v c2="$c2" -v c3="$c3" -v fe="$f_early" -v fl="$f_late" 'BEGIN {
		first = s1 / (t1 - t0); last = (n - s2) / (t3 - t2);
		k1 = s1 / 1000; k2 = (n - s2) / 1000;
		printf "%-11s %9d %8.0f %8.0f %8.2f %8.1f %8.1f %9.1f %9.1f %9.1f %9.1f %8.0f %8.0f %8.0f %8.2f %8.2f\n", run, n,
			first, last, last / first, a / 1024, r / 1024,
			(w1 - w0) * 1000 / hz / k1, (w3 - w2) * 1000 / hz / k2,
			(c1 - c0) * 1000 / hz / k1, (c3 - c2) * 1000 / hz / k2, t3 - t0,
			fe, fl, fl / fe, (last / first) / (fl / fe) }' >>"$WORK_DIR/table"
	q "SELECT chroma_unmirror('$tbl', drop_collection => true)" >/dev/null
	q "DROP TABLE $tbl"
}

# RUNS="quiet xmin_held" (the default) or one of them
for run in ${RUNS:-quiet xmin_held}; do
	case $run in
	quiet) drain quiet 0 ;;
	xmin_held) drain xmin_held 1 ;;
	*) die "unknown run in RUNS: $run (quiet, xmin_held)" ;;
	esac
done

echo
echo "chroma_sync drain of a $ROWS-row backlog (384-d, batch 500), $(nproc) vCPU, load at start $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-11s %9s %8s %8s %8s %8s %8s %9s %9s %9s %9s %8s %8s %8s %8s %8s\n' run rows "first/s" "last/s" last/1st \
	"anon MB" "RSS MB" "wrk 1st" "wrk last" "chr 1st" "chr last" seconds "chr0 /s" "chrN /s" "chr N/0" "ours/chr"
echo "(wrk/chr 1st/last: CPU ms per 1,000 records of the worker / the Chroma server, first and last tenth;"
echo " chr0/chrN: Chroma alone, $FLOOR_N records into an empty collection / into the drained one)"
cat "$WORK_DIR/table"

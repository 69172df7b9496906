#!/usr/bin/env bash
# Fairness between mirrors of one worker: how long a single-row change to a small mirrored
# table (mirror B) takes from its commit until the worker has it acknowledged by Chroma,
# first with the other mirror (A) idle, then while A backfills ROWS_A rows of 384
# dimensions. One row of B is updated every ~100 ms by one session; after each commit the
# session polls chroma_sync.queue (every 2 ms) until B's entry is gone (the worker deletes
# it once Chroma acknowledged the upsert), and records commit -> gone. The second phase
# starts when chroma_mirror of A returns and stops after SECONDS or when A's backfill ends,
# whichever comes first. Prints p50, p99 and max of both phases and the ratio of the p99s
# (goal: the p99 with A backfilling <= 2x the p99 with A idle), for each setting of
# chroma_sync.max_concurrent_requests in CONCURRENCY (the worker's setting, in the server's
# configuration). Then the server's own figures for the same rule (the floor, FLOOR=0 leaves
# them out): bench/fair_probe.pl upserts one record every ~100 ms straight to a collection
# (no PostgreSQL), alone and while bench/floor post-multi sends A's rows with the same N in
# flight; the ratio of those p99s is what any client gets from this server. Starts its own PostgreSQL 15 and Chroma server (and with RTT a delay
# proxy) on free ports and stops them at the end. Prints figures; asserts no timing. Run as
# root, after make && make install:
#
#   bash bench/fairness.sh [--server old|new] [ROWS_A [SECONDS]]
#        ROWS_A defaults to 200,000, SECONDS (per phase) to 30
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection; CONCURRENCY
# ("1 4"); RTT (0: loopback; else the round trip in ms through test/lib/delay_proxy.pl).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
SERVER=old
if [ "${1:-}" = --server ]; then
	SERVER=${2:-}
	shift 2
fi
case $SERVER in old | new) ;; *) echo "--server is old or new" >&2; exit 2 ;; esac
ROWS_A=${1:-200000}
SECONDS_PHASE=${2:-30}
CONCURRENCY=${CONCURRENCY:-1 4}
FLOOR=${FLOOR:-1}
RTT=${RTT:-0}
BATCH=300
for v in "$ROWS_A" "$SECONDS_PHASE" "$RTT" $CONCURRENCY; do
	case $v in '' | *[!0-9]*) echo "ROWS_A, SECONDS, RTT and CONCURRENCY are numbers" >&2; exit 2 ;; esac
done
for v in $CONCURRENCY; do
	[ "$v" -ge 1 ] && [ "$v" -le 10 ] || { echo "CONCURRENCY: 1 to 10" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/fairness.sh must run as root (it runs PostgreSQL as the postgres user)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_fairness.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"
chown postgres: "$LOG_DIR"
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

PROXY_PID=
die() {
	echo "fairness: $*" >&2
	exit 1
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "${KEEP:-0}" = 1 ]; then
		echo "KEEP=1: servers left running, work dir $WORK_DIR"
	else
		[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
		stop_all_pg
		stop_all_chroma
		[ $rc -eq 0 ] && rm -rf "$WORK_DIR"
	fi
	[ $rc -eq 0 ] || echo "fairness: failed; logs in $LOG_DIR" >&2
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
if [ "$FLOOR" = 1 ]; then
	make -s -C "$ROOT/bench" floor >"$LOG_DIR/make-floor.log" 2>&1 || die "building bench/floor failed"
fi
CHROMA_PORT=$(free_port) || die "no free port"
step "Chroma server ($SERVER) on port $CHROMA_PORT"
start_chroma "$SERVER" "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log" >/dev/null ||
	die "Chroma did not start (see $LOG_DIR/chroma.log)"
URL=http://127.0.0.1:$CHROMA_PORT
if [ "$RTT" -gt 0 ]; then
	perl "$ROOT/test/lib/delay_proxy.pl" "$CHROMA_PORT" "$WORK_DIR/proxy.port" \
		"$(awk -v r="$RTT" 'BEGIN { print r / 2 }')" 2>>"$LOG_DIR/proxy.log" &
	PROXY_PID=$!
	for _ in $(seq 1 100); do [ -s "$WORK_DIR/proxy.port" ] && break; sleep 0.1; done
	[ -s "$WORK_DIR/proxy.port" ] || die "the delay proxy did not start"
	URL=http://127.0.0.1:$(cat "$WORK_DIR/proxy.port")
	step "delay proxy: $RTT ms round trip on $URL"
fi

step "PostgreSQL"
start_pg fairness "$URL" >"$LOG_DIR/pg-start.log" 2>&1 || die "PostgreSQL did not start"
export PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=fairness
export PGOPTIONS='-c client_min_messages=warning'
"$PG_BIN/psql" -X -q -d postgres -c 'CREATE DATABASE fairness' || die "CREATE DATABASE failed"
q() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
q 'CREATE EXTENSION chroma_sync' || die "CREATE EXTENSION failed"
q "ALTER SYSTEM SET chroma_sync.batch_size = $BATCH" || die "ALTER SYSTEM failed"

step "table a: $ROWS_A rows of 384 dimensions"
q "CREATE TABLE a (id bigint PRIMARY KEY, embedding real[])" &&
	q "INSERT INTO a SELECT i, ARRAY(SELECT sin(i * 12.9898 + j * 78.233)::real FROM generate_series(1, 384) AS j)
		FROM generate_series(1, $ROWS_A) AS i" &&
	q "CREATE TABLE b (id bigint PRIMARY KEY, v integer NOT NULL DEFAULT 0, embedding real[])" &&
	q "INSERT INTO b SELECT i, 0, ARRAY(SELECT cos(i * 3.1 + j * 7.7)::real FROM generate_series(1, 384) AS j)
		FROM generate_series(1, 100) AS i" &&
	q "VACUUM ANALYZE a" && q "VACUUM ANALYZE b" || die "tables failed"

# The writer: every ~100 ms one UPDATE of b's row 1, committed; then polls the queue until
# b's entry is gone; commit -> gone in ms into fair_lat. Stops after $2 s, or once A's
# backfill is over when $3 is true.
q "CREATE TABLE fair_lat (phase text, n integer, ms double precision)" || die "fair_lat failed"
q "CREATE PROCEDURE fair_write(phase text, secs double precision, while_a_backfills boolean, n integer)
LANGUAGE plpgsql AS \$\$
DECLARE
	b_id integer := (SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'b'::regclass);
	a_id integer := (SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass);
	t_end timestamptz := clock_timestamp() + secs * interval '1 second';
	t_next timestamptz := clock_timestamp();
	t0 timestamptz;
	i integer := 0;
BEGIN
	LOOP
		EXIT WHEN clock_timestamp() >= t_end;
		EXIT WHEN while_a_backfills AND (SELECT backfill_done FROM chroma_sync.mirror WHERE mirror_id = a_id);
		PERFORM pg_sleep(GREATEST(0, extract(epoch FROM t_next - clock_timestamp())));
		t_next := t_next + interval '100 ms';
		i := i + 1;
		UPDATE b SET v = i, embedding[1] = i WHERE id = 1;
		COMMIT;
		t0 := clock_timestamp();
		LOOP
			EXIT WHEN NOT EXISTS (SELECT 1 FROM chroma_sync.queue WHERE mirror_id = b_id);
			EXIT WHEN clock_timestamp() > t0 + interval '60 s';
			PERFORM pg_sleep(0.002);
		END LOOP;
		INSERT INTO fair_lat VALUES (phase, n, extract(epoch FROM clock_timestamp() - t0) * 1000);
		COMMIT;
	END LOOP;
END
\$\$" || die "fair_write failed"

declare -A P50 P99 MAX CNT AINFO FL_IDLE FL_LOAD
for n in $CONCURRENCY; do
	step "max_concurrent_requests $n: mirror b, a idle"
	q "ALTER SYSTEM SET chroma_sync.max_concurrent_requests = $n" && q 'SELECT pg_reload_conf()' >/dev/null ||
		die "ALTER SYSTEM failed"
	sleep 1
	q "SELECT chroma_mirror('b', 'fair_b_$n')" >/dev/null && q "SELECT chroma_flush('b', '600 s')" >/dev/null ||
		die "mirroring b failed"
	q "SELECT chroma_mirror('a', 'fair_a_$n', backfill => false)" >/dev/null || die "mirroring a failed"
	q "CALL fair_write('idle', $SECONDS_PHASE, false, $n)" || die "the writer failed (a idle)"

	step "max_concurrent_requests $n: a backfills $ROWS_A rows"
	q "SELECT chroma_unmirror('a', drop_collection => true)" >/dev/null || die "chroma_unmirror a failed"
	q "SELECT chroma_mirror('a', 'fair_a2_$n')" >/dev/null || die "mirroring a failed"
	t_a=$(date +%s.%N)
	q "CALL fair_write('backfill', $SECONDS_PHASE, true, $n)" || die "the writer failed (a backfilling)"
	AINFO[$n]=$(q "SELECT coalesce(backfill_sent::text, 'done') || ' ' || coalesce(backfill_rows_per_second::text, '-')
		FROM chroma_sync.status WHERE source = 'a'::regclass")
	step "max_concurrent_requests $n: waiting for a's backfill to end"
	q "SELECT chroma_flush('a', '3600 s')" >/dev/null || die "chroma_flush a failed"
	t_done=$(date +%s.%N)
	AINFO[$n]="${AINFO[$n]} $(awk -v a="$t_a" -v b="$t_done" -v r="$ROWS_A" 'BEGIN { printf "%.0f", r / (b - a) }')"
	for phase in idle backfill; do
		read -r c p50 p99 mx <<<"$(q "SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1),
			round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 1), round(max(ms)::numeric, 1)
			FROM fair_lat WHERE phase = '$phase' AND n = $n" | tr '|' ' ')"
		k=$phase.$n
		CNT[$k]=$c P50[$k]=$p50 P99[$k]=$p99 MAX[$k]=$mx
	done
	q "SELECT chroma_unmirror('a', drop_collection => true)" >/dev/null &&
		q "SELECT chroma_unmirror('b', drop_collection => true)" >/dev/null || die "chroma_unmirror failed"
	if [ "$FLOOR" = 1 ]; then
		step "floor, $n in flight: one record every ~100 ms straight to the server, alone"
		FL_IDLE[$n]=$(perl "$ROOT/bench/fair_probe.pl" "$URL" "floor_b_$n" 384 "$SECONDS_PHASE") ||
			die "fair_probe failed"
		step "floor, $n in flight: the same while bench/floor sends $ROWS_A rows"
		"$ROOT/bench/floor" post-multi "$URL" "floor_a_$n" "$ROWS_A" 384 "$BATCH" sin "$n" \
			>"$LOG_DIR/floor-$n.out" 2>&1 &
		fpid=$!
		FL_LOAD[$n]=$(perl "$ROOT/bench/fair_probe.pl" "$URL" "floor_b_$n" 384 "$SECONDS_PHASE" "$fpid" "floor_a_$n") ||
			die "fair_probe failed"
		kill "$fpid" 2>/dev/null
		wait "$fpid" 2>/dev/null
	fi
done

echo
echo "commit -> acknowledged by Chroma (the queue entry gone) of single-row UPDATEs of mirror b, one every"
echo "~100 ms, with mirror a idle and while a backfills $ROWS_A x 384-d (batch $BATCH; at most $SECONDS_PHASE s per phase);"
echo "Chroma server \"$SERVER\", round trip $([ "$RTT" = 0 ] && echo loopback || echo "$RTT ms"), $(nproc) vCPU, load at start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-9s %-10s %7s %9s %9s %9s %10s %-8s %s\n' "in flight" "a" writes "p50 ms" "p99 ms" "max ms" "p99 ratio" verdict \
	"a's backfill (rows sent when the writer stopped, rows/s then, rows/s overall)"
for n in $CONCURRENCY; do
	for phase in idle backfill; do
		k=$phase.$n
		ratio='' verdict='' info=''
		if [ "$phase" = backfill ]; then
			ratio=$(awk -v a="${P99[$k]}" -v b="${P99[idle.$n]}" 'BEGIN { printf "%.2fx", a / b }')
			verdict=$(awk -v a="${P99[$k]}" -v b="${P99[idle.$n]}" 'BEGIN { print (a <= 2 * b) ? "met" : "NOT met" }')
			info=${AINFO[$n]}
		fi
		printf '%-9s %-10s %7s %9s %9s %9s %10s %-8s %s\n' "$n" "$([ "$phase" = idle ] && echo idle || echo backfilling)" \
			"${CNT[$k]}" "${P50[$k]}" "${P99[$k]}" "${MAX[$k]}" "$ratio" "$verdict" "$info"
	done
done
if [ "$FLOOR" = 1 ]; then
	echo
	echo "the floor: one record upserted every ~100 ms straight to the server (bench/fair_probe.pl, no PostgreSQL),"
	echo "request -> answer, alone and while bench/floor post-multi sends $ROWS_A x 384-d (batch $BATCH, N in flight)"
	printf '%-9s %-10s %7s %9s %9s %9s %10s\n' "in flight" "a" writes "p50 ms" "p99 ms" "max ms" "p99 ratio"
	for n in $CONCURRENCY; do
		read -r _ ci _ p50i _ p99i _ mxi <<<"${FL_IDLE[$n]}"
		read -r _ cl _ p50l _ p99l _ mxl <<<"${FL_LOAD[$n]}"
		printf '%-9s %-10s %7s %9s %9s %9s %10s\n' "$n" idle "$ci" "$p50i" "$p99i" "$mxi" ""
		printf '%-9s %-10s %7s %9s %9s %9s %10s\n' "$n" "floor load" "$cl" "$p50l" "$p99l" "$mxl" \
			"$(awk -v a="$p99l" -v b="$p99i" 'BEGIN { printf "%.2fx", a / b }')"
	done
fi

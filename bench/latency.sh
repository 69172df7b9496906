#!/usr/bin/env bash
# chroma_upsert_query and the mirror backfill over a slow network: the same records sent
# over loopback and through test/lib/delay_proxy.pl (a TCP proxy that forwards each chunk
# after a delay, both ways) at round trips of 50 ms (a cloud region to a hosted Chroma) and
# 150 ms (another continent), with chroma_sync.max_concurrent_requests 1 and 4; batch 300
# (Chroma Cloud's cap per write). Three senders, one after the other for each setting:
#   floor         bench/floor post-multi: the same records as pre-built bodies, POSTed by a
#                 separate C program with the same number of requests in flight (libcurl
#                 multi): what the server and the proxy allow, without chroma_sync
#   upsert_query  chroma_upsert_query from a table
#   backfill      chroma_mirror of the table into a fresh collection until chroma_flush
#                 returns (the worker reads chroma_sync.url and max_concurrent_requests
#                 from the server's configuration: ALTER SYSTEM + pg_reload_conf)
# Prints the rates (best of ROUNDS, each run into a fresh collection), each rate's ratio to
# loopback with the same sender and setting, measured in this same run (goal with 4 in
# flight: >= 0.9x at 50 ms, >= 0.8x at 150 ms), the rate against the floor's at the same
# round trip and setting, and the CPU each side used during the run (% of one vCPU:
# PostgreSQL's processes (the backend or the worker) or floor, the Chroma server, the
# proxy's processes). Starts its own PostgreSQL 15, Chroma server and proxies on free ports
# and stops them at the end. Run as root, after make && make install:
#
#   bash bench/latency.sh [--server old|new] [ROWS_384 [ROWS_1536]]
#        ROWS_384 defaults to 30,000, ROWS_1536 to 12,000 (100 and 40 requests, so that
#        the first and last round trips do not dominate; 36 runs: 25 minutes on a busy
#        2-vCPU machine)
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection; ROUNDS (1);
# RTTS ("50 150": round trips in ms besides loopback); CONCURRENCY ("1 4");
# WHAT ("floor upsert_query backfill"); DIMS ("384 1536"); PROXY_SCRIPT (the delay proxy,
# test/lib/delay_proxy.pl; another to compare proxies: same command line).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
SERVER=old
if [ "${1:-}" = --server ]; then
	SERVER=${2:-}
	shift 2
fi
case $SERVER in old | new) ;; *) echo "--server is old or new" >&2; exit 2 ;; esac
ROWS_384=${1:-30000}
ROWS_1536=${2:-12000}
ROUNDS=${ROUNDS:-1}
RTTS=${RTTS:-50 150}
CONCURRENCY=${CONCURRENCY:-1 4}
WHAT=${WHAT:-floor upsert_query backfill}
DIMS=${DIMS:-384 1536}
PROXY_SCRIPT=${PROXY_SCRIPT:-$ROOT/test/lib/delay_proxy.pl}
BATCH=300
for v in "$ROWS_384" "$ROWS_1536" "$ROUNDS" $RTTS $CONCURRENCY; do
	case $v in '' | *[!0-9]*) echo "ROWS_384, ROWS_1536, ROUNDS, RTTS and CONCURRENCY are numbers" >&2; exit 2 ;; esac
done
for v in $CONCURRENCY; do
	[ "$v" -ge 1 ] && [ "$v" -le 10 ] || { echo "CONCURRENCY: 1 to 10" >&2; exit 2; }
done
for v in $WHAT; do
	case $v in floor | upsert_query | backfill) ;; *) echo "WHAT: floor, upsert_query, backfill" >&2; exit 2 ;; esac
done
for v in $DIMS; do
	case $v in 384 | 1536) ;; *) echo "DIMS: 384, 1536" >&2; exit 2 ;; esac
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
		[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null
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
	perl "$PROXY_SCRIPT" "$CHROMA_PORT" "$WORK_DIR/proxy-$rtt.port" \
		"$(awk -v r="$rtt" 'BEGIN { print r / 2 }')" 2>>"$LOG_DIR/proxy-$rtt.log" &
	PROXY_PIDS+=($!)
	for _ in $(seq 1 100); do [ -s "$WORK_DIR/proxy-$rtt.port" ] && break; sleep 0.1; done
	[ -s "$WORK_DIR/proxy-$rtt.port" ] || die "the delay proxy for $rtt ms did not start"
	URL[$rtt]=http://127.0.0.1:$(cat "$WORK_DIR/proxy-$rtt.port")
	step "delay proxy: $rtt ms round trip on ${URL[$rtt]}"
done

make -s -C "$ROOT/bench" floor >"$LOG_DIR/make-floor.log" 2>&1 || die "building bench/floor failed"
FLOOR=$ROOT/bench/floor

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
PM_PID=$(head -1 "$PG_DIR/data/postmaster.pid")
# the worker's settings (it reads the server's configuration, not the session's)
worker_conf() {
	q "ALTER SYSTEM SET chroma_sync.url = '$1'" && q "ALTER SYSTEM SET chroma_sync.batch_size = $BATCH" &&
		q "ALTER SYSTEM SET chroma_sync.max_concurrent_requests = $2" &&
		q 'SELECT pg_reload_conf()' >/dev/null || die "ALTER SYSTEM failed"
	sleep 0.5
}

# The values are those of floor post-multi's SEED "sin" (the same function; the ids "r" || i).
# Not random: the vectors of a record are phase-shifted sinusoids, so they lie in a plane,
# which the server indexes faster than random vectors (about 2-4x here).
declare -A ROWS=([384]=$ROWS_384 [1536]=$ROWS_1536)
for dim in $DIMS; do
	step "table of ${ROWS[$dim]} rows of $dim dimensions"
	q "CREATE TABLE src_$dim AS SELECT 'r' || i AS id,
		ARRAY(SELECT sin(i * 12.9898 + j * 78.233)::real FROM generate_series(1, $dim) AS j) AS embedding
		FROM generate_series(1, ${ROWS[$dim]}) AS i" || die "table failed"
	q "ALTER TABLE src_$dim ADD PRIMARY KEY (id)" || die "primary key failed"
	q "VACUUM ANALYZE src_$dim" || die "vacuum failed"
done

# CPU sampler: every 0.2 s, the cumulative CPU ticks of PostgreSQL's processes, the Chroma
# server's and the proxies' (their per-connection children too): "role pid ticks" lines, then "--".
PROXY_LIST=$(IFS=,; echo "${PROXY_PIDS[*]:-0}")
sample_cpu() {
	local pids
	while :; do
		pids="$PM_PID $(pgrep -d' ' -P "$PM_PID") $CHROMA_PID ${PROXY_PIDS[*]:-} $(pgrep -d' ' -P "$PROXY_LIST")"
		# shellcheck disable=SC2086
		(cd /proc && cat $(printf '%s/stat ' $pids) 2>/dev/null) |
			awk -v pm="$PM_PID" -v ch="$CHROMA_PID" -v px=",$PROXY_LIST," '{
				# comm may hold spaces: fields after the last ")"
				r = substr($0, index($0, ")") + 2); split(r, f, " ")
				pid = $1; ppid = f[2]; t = f[12] + f[13]
				role = (pid == ch) ? "chroma" : (pid == pm || ppid == pm) ? "pg" : \
					(index(px, "," pid ",") || index(px, "," ppid ",")) ? "proxy" : ""
				if (role != "") print role, pid, t
			}'
		# the server's threads together: ns on a CPU, ns runnable but waiting for a CPU
		cat /proc/"$CHROMA_PID"/task/*/schedstat 2>/dev/null | awk '{ r += $1; w += $2 } END { print "sched", r, w }'
		echo --
		sleep 0.2
	done
}
SAMPLER=
cpu_start() {
	: >"$WORK_DIR/cpu.samples"
	sample_cpu >>"$WORK_DIR/cpu.samples" &
	SAMPLER=$!
	sleep 0.3
}
# cpu_stop SECONDS -> "pg% chroma% proxy% wait%" of one vCPU over SECONDS (a process that
# appeared after the first sample counts from 0); wait: the time the Chroma server's threads
# were runnable but waited for a CPU (other processes had them), all threads together
cpu_stop() {
	kill "$SAMPLER" 2>/dev/null
	wait "$SAMPLER" 2>/dev/null
	SAMPLER=
	awk -v s="$1" -v hz="$(getconf CLK_TCK)" '
		/^--$/ { blk++; next }
		$1 == "sched" { if (!have) { r0 = $2; w0 = $3; have = 1 }; r1 = $2; w1 = $3; next }
		{ k = $1 " " $2; if (!(k in lo)) lo[k] = blk == 0 ? $3 : 0; hi[k] = $3 }
		END {
			for (k in hi) { split(k, a, " "); c[a[1]] += hi[k] - lo[k] }
			wait = (w1 - w0) / 1e9 / s * 100
			printf "%.0f %.0f %.0f %.0f", c["pg"] / hz / s * 100, c["chroma"] / hz / s * 100,
				c["proxy"] / hz / s * 100, wait
		}' "$WORK_DIR/cpu.samples"
}

# one run: WHAT DIM RTT N -> "records/s pg% chroma% proxy% chroma-wait%" into a fresh collection
n_run=0
run() {
	local what=$1 dim=$2 rtt=$3 n=$4 coll ms got out cpu
	n_run=$((n_run + 1))
	coll=lat_$n_run
	case $what in
	floor)
		cpu_start
		out=$("$FLOOR" post-multi "${URL[$rtt]}" "$coll" "${ROWS[$dim]}" "$dim" "$BATCH" sin "$n") ||
			die "floor failed ($dim dims, $rtt ms, $n in flight)"
		ms=$(echo "$out" | awk '{ for (i = 1; i < NF; i++) if ($i == "seconds") print $(i + 1) * 1000 }')
		cpu=$(cpu_stop "$(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')")
		# floor's own CPU in place of PostgreSQL's
		cpu="$(echo "$out" | awk -v ms="$ms" '{ for (i = 1; i < NF; i++) if ($i == "cpu_s") printf "%.0f", $(i + 1) / (ms / 1000) * 100 }') ${cpu#* }"
		;;
	upsert_query)
		q "SELECT chroma_create_collection('$coll')" >/dev/null || die "create collection failed"
		cpu_start
		ms=$(qtime "SET chroma_sync.url = '${URL[$rtt]}'" "SET chroma_sync.batch_size = $BATCH" \
			"SET chroma_sync.max_concurrent_requests = $n" \
			"SELECT chroma_upsert_query('$coll', 'SELECT id, embedding FROM src_$dim')") ||
			die "chroma_upsert_query failed ($dim dims, $rtt ms, $n in flight)"
		cpu=$(cpu_stop "$(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')")
		;;
	backfill)
		worker_conf "${URL[$rtt]}" "$n"
		cpu_start
		ms=$(qtime "SET chroma_sync.url = '${URL[$rtt]}'" \
			"SELECT chroma_mirror('src_$dim', '$coll')" \
			"SELECT chroma_flush('src_$dim', '3600 seconds')") ||
			die "mirror backfill failed ($dim dims, $rtt ms, $n in flight)"
		cpu=$(cpu_stop "$(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')")
		;;
	esac
	got=$(q "SET chroma_sync.url = '${URL[0]}'; SELECT chroma_count('$coll')")
	[ "$got" = "${ROWS[$dim]}" ] || die "collection $coll holds $got records, not ${ROWS[$dim]} ($what)"
	if [ "$what" = backfill ]; then
		q "SELECT chroma_unmirror('src_$dim', drop_collection => true)" >/dev/null || die "chroma_unmirror failed"
	else
		q "SELECT chroma_delete_collection('$coll')" >/dev/null
	fi
	echo "$(awk -v n="${ROWS[$dim]}" -v ms="$ms" 'BEGIN { printf "%.0f", n / (ms / 1000) }') $cpu"
}

# a warm-up (the server's first writes, not counted)
"$FLOOR" post-multi "${URL[0]}" lat_warmup 3000 384 "$BATCH" sin 1 >/dev/null || die "warm-up failed"
q "SELECT chroma_delete_collection('lat_warmup')" >/dev/null
declare -A BEST RUNS CPU SCHED LOADS
for round in $(seq 1 "$ROUNDS"); do
	for dim in $DIMS; do
		for n in $CONCURRENCY; do
			for rtt in 0 $RTTS; do
				for what in $WHAT; do
					step "round $round: $what, $dim dims, round trip $rtt ms, $n in flight"
					read -r r c1 c2 c3 sc <<<"$(run "$what" "$dim" "$rtt" "$n")"
					c="$c1 $c2 $c3"
					[ -n "$r" ] || die "no rate"
					k=$what.$dim.$rtt.$n
					RUNS[$k]="${RUNS[$k]:-}${RUNS[$k]:+ / }$r"
					if [ "${BEST[$k]:-0}" -lt "$r" ]; then
						BEST[$k]=$r
						CPU[$k]=$c
						SCHED[$k]=$sc
						LOADS[$k]=$(cut -d' ' -f1 /proc/loadavg)
					fi
				done
			done
		done
	done
done

echo
echo "chroma_upsert_query and the mirror backfill over loopback and through a delay proxy: $ROWS_384 x 384-d"
echo "and $ROWS_1536 x 1536-d, batch $BATCH, best of $ROUNDS rounds; Chroma server \"$SERVER\", $(nproc) vCPU,"
echo "load at start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg). ratio: to loopback, same sender and"
echo "setting; /floor: to floor at the same round trip and setting; cpu: % of one vCPU (pg: PostgreSQL's"
echo "processes, or floor itself; chroma: the server; proxy: the delay proxy); chroma waits: % of one vCPU the"
echo "server's threads spent runnable but waiting for a CPU; load: 1-min load average after the run"
[ "$PROXY_SCRIPT" = "$ROOT/test/lib/delay_proxy.pl" ] || echo "proxy: $PROXY_SCRIPT"
printf '%-13s %-5s %-10s %-9s %8s %6s %6s %-7s %-9s %-17s %-12s %5s  %s\n' what dims "round trip" "in flight" \
	"rec/s" ratio /floor goal verdict "cpu pg/chroma/prx" "chroma waits" load rounds
for dim in $DIMS; do
	for n in $CONCURRENCY; do
		for rtt in 0 $RTTS; do
			for what in $WHAT; do
				k=$what.$dim.$rtt.$n
				base=${BEST[$what.$dim.0.$n]}
				ratio=$(awk -v a="${BEST[$k]}" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
				vsfloor=
				[ -n "${BEST[floor.$dim.$rtt.$n]:-}" ] && [ "$what" != floor ] &&
					vsfloor=$(awk -v a="${BEST[$k]}" -v b="${BEST[floor.$dim.$rtt.$n]}" 'BEGIN { printf "%.2f", a / b }')
				goal='' verdict=''
				if [ "$n" -ge 4 ] && [ "$rtt" -gt 0 ]; then
					if [ "$rtt" -le 50 ]; then goal=0.9; else goal=0.8; fi
					verdict=$(awk -v r="$ratio" -v g="$goal" 'BEGIN { print (r >= g) ? "met" : "NOT met" }')
					goal=">=$goal"
					[ "$what" = floor ] && verdict="(ceiling)"
				fi
				label="$rtt ms"
				[ "$rtt" = 0 ] && label=loopback
				printf '%-13s %-5s %-10s %-9s %8s %5sx %6s %-7s %-9s %-17s %-12s %5s  %s\n' "$what" "$dim" "$label" "$n" \
					"${BEST[$k]}" "$ratio" "$vsfloor" "$goal" "$verdict" "$(echo "${CPU[$k]}" | tr ' ' /)" \
					"${SCHED[$k]}" "${LOADS[$k]}" "${RUNS[$k]}"
			done
		done
	done
done

#!/usr/bin/env bash
# Runs every chroma_sync benchmark in one go and prints ONE table: absolute figures and
# the ratios measured in this same run. Starts its own PostgreSQL 15 cluster (the
# installed chroma_sync in shared_preload_libraries) and its own Chroma server ("old",
# test/chroma/old), both on free ports, and stops them at the end. Run as root, after
# the extension is built and installed (make && make install):
#
#   bash bench/run.sh            full run (about 9-10 minutes on 2 vCPUs)
#   bash bench/run.sh --smoke    tiny sizes (under a minute): only proves the scripts work
#   bash bench/run.sh --only bulk,latency    some of the parts (bulk, write, latency)
#
# Benchmarks:
#  1. bulk sync, 5,000 x 384-d (batch 500) and 2,000 x 1536-d (batch 300), each into a
#     fresh collection: the server's floor (bench/floor.c: pre-built base64 bodies POSTed
#     back-to-back on one kept-alive connection), chroma_upsert_query, the mirror backfill
#     (chroma_mirror until chroma_flush returns), node-postgres + the official JS client
#     (bench/js_client.mjs); records/s (best of 3 rounds) and ratios to the floor.
#  2. write path, pgbench (2 clients, 20 s per run, best of 3 runs, -M prepared): single-row INSERT and
#     UPDATE of a 384-d table unmirrored, mirrored with the mirror paused, with a PL/pgSQL
#     AFTER trigger writing a queue table; INSERT also with the mirror running. COPY of
#     100,000 rows, mirrored (paused) vs unmirrored.
#  3. latency, commit -> visible in Chroma, 50 single-row transactions/s for 30 s, worker
#     running (bench/latency.mjs polls Chroma's get over HTTP); p50, p99. Measured after a
#     VACUUM and CHECKPOINT with no autovacuum running, so the write-back the earlier parts
#     leave behind does not count, and with the bulk part's collections dropped (Chroma's
#     time per upsert grows with what the server holds); then the same rate upserted
#     straight into Chroma, with each upsert's round trip.
#
# Environment: KEEP=1 leaves the servers and the work dir for inspection.
# Needs: node >= 20 and npm (bench/node_modules is installed with npm ci when missing).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
BENCH=$ROOT/bench
SMOKE=0
PARTS=bulk,write,latency
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) SMOKE=1 ;;
	--only) PARTS=${2:-}; shift ;;
	--only=*) PARTS=${1#--only=} ;;
	-h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument: $1 (--smoke, --only bulk,write,latency)" >&2; exit 2 ;;
	esac
	shift
done
# has PART: is this part of the benchmarks selected?
has() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
for p in ${PARTS//,/ }; do
	case $p in bulk | write | latency) ;; *) echo "unknown part: $p (bulk, write, latency)" >&2; exit 2 ;; esac
done
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/run.sh must run as root (it runs PostgreSQL as the postgres user)" >&2
	exit 2
fi

if [ $SMOKE = 1 ]; then
	SHAPES=("300 384 100" "120 1536 40")
	PGB_SECONDS=2 COPY_ROWS=2000 LAT_RATE=20 LAT_SECONDS=3 BULK_ROUNDS=1 PGB_ROUNDS=1
else
	SHAPES=("5000 384 500" "2000 1536 300")
	PGB_SECONDS=20 COPY_ROWS=100000 LAT_RATE=50 LAT_SECONDS=30 BULK_ROUNDS=3 PGB_ROUNDS=3
fi
PGB_CLIENTS=2

WORK_DIR=$(mktemp -d /tmp/chroma_sync_bench.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"
chown postgres: "$LOG_DIR"
# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

die() {
	echo "bench: $*" >&2
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
	[ $rc -eq 0 ] || echo "bench: failed; logs in $LOG_DIR" >&2
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T0=$SECONDS
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
step() { printf '[%3ds] %s\n' $((SECONDS - T0)) "$*" >&2; }

# ------------------------------------------------------------------ set-up

step "dependencies"
command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed"
command -v pgbench >/dev/null || die "pgbench is needed (postgresql-client-15)"
npm_install old >"$LOG_DIR/npm-old.log" 2>&1 || die "npm ci in test/chroma/old failed"
stamp=$BENCH/node_modules/.bench-lock-sha256
want=$(sha256sum "$BENCH/package-lock.json" | cut -c1-64)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	(cd "$BENCH" && npm ci --no-audit --no-fund </dev/null) >"$LOG_DIR/npm-bench.log" 2>&1 ||
		die "npm ci in bench failed (see $LOG_DIR/npm-bench.log)"
	echo "$want" >"$stamp"
fi
make -s -C "$BENCH" floor >"$LOG_DIR/make-floor.log" 2>&1 || die "building bench/floor failed"
FLOOR=$BENCH/floor

CHROMA_PORT=$(free_port) || die "no free port"
step "Chroma server (old) on port $CHROMA_PORT"
start_chroma old "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log" >/dev/null ||
	die "Chroma did not start (see $LOG_DIR/chroma.log)"
CHROMA_URL=http://127.0.0.1:$CHROMA_PORT

step "PostgreSQL"
start_pg bench "$CHROMA_URL" >"$LOG_DIR/pg-start.log" 2>&1 || die "PostgreSQL did not start"
cat >>"$PG_DIR/data/postgresql.conf" <<EOF
# bench/run.sh: stated explicitly, the defaults
synchronous_commit = on
fsync = on
EOF
as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" reload >/dev/null

export PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=bench
psql -X -q -d postgres -c 'CREATE DATABASE bench' || die "CREATE DATABASE failed"
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
# qtime SQL...: runs the statements in one session, prints the sum of their times in ms.
qtime() {
	local s out
	out=$({ echo '\timing on'; for s in "$@"; do echo "$s;"; done; } |
		psql -X -q -At -v ON_ERROR_STOP=1) || { echo "$out" >&2; return 1; }
	echo "$out" | awk '/^Time: / { t += $2 } END { printf "%.1f\n", t }'
}
q 'CREATE EXTENSION chroma_sync' || die "CREATE EXTENSION failed"

declare -A R
rps() { awk -v n="$1" -v ms="$2" 'BEGIN { printf "%.1f", n / (ms / 1000) }'; }
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
set_batch() {
	q "ALTER SYSTEM SET chroma_sync.batch_size = $1" && q 'SELECT pg_reload_conf()' >/dev/null
	sleep 0.5
}

# ------------------------------------------------------------------ 1. bulk sync
if has bulk; then

# best KEY VALUE: keeps the larger figure in R[KEY] and every run in R[runs_KEY].
best() {
	R[runs_$1]="${R[runs_$1]:-}${R[runs_$1]:+ / }$2"
	R[$1]=$(awk -v a="${R[$1]:-0}" -v b="$2" 'BEGIN { print (b > a ? b : a) }')
}
# check_count COLLECTION N
check_count() {
	[ "$(q "SELECT chroma_count('$1')")" = "$2" ] || die "collection $1 does not hold $2 records"
}
for shape in "${SHAPES[@]}"; do
	read -r n dim batch <<<"$shape"
	tag=${n}x$dim
	tbl=bulk_$dim
	step "bulk $tag, batch $batch: load table"
	"$FLOOR" gen "$n" "$dim" 1 >"$WORK_DIR/$tbl.tsv" || die "floor gen failed"
	chmod a+r "$WORK_DIR/$tbl.tsv"
	q "CREATE TABLE $tbl (id int PRIMARY KEY, embedding real[])" &&
		q "COPY $tbl FROM '$WORK_DIR/$tbl.tsv'" && q "VACUUM ANALYZE $tbl" || die "loading $tbl failed"
	rm -f "$WORK_DIR/$tbl.tsv"
	set_batch "$batch"
	step "bulk $tag: warm-up (server floor, not counted)"
	"$FLOOR" post "$CHROMA_URL" "warmup_$dim" "$n" "$dim" "$batch" 1 >/dev/null || die "floor failed"

	for round in $(seq 1 "$BULK_ROUNDS"); do
		sfx=${dim}_$round
		step "bulk $tag round $round: server floor"
		out=$("$FLOOR" post "$CHROMA_URL" "floor_$sfx" "$n" "$dim" "$batch" 1) || die "floor failed"
		best "floor_$dim" "$(echo "$out" | field records_per_s)"

		step "bulk $tag round $round: chroma_upsert_query"
		q "SELECT chroma_create_collection('ours_$sfx')" >/dev/null || die "create collection failed"
		ms=$(qtime "SET chroma_sync.batch_size = $batch" \
			"SELECT chroma_upsert_query('ours_$sfx', 'SELECT id::text AS id, embedding FROM $tbl')") ||
			die "chroma_upsert_query failed"
		best "ours_$dim" "$(rps "$n" "$ms")"

		step "bulk $tag round $round: mirror backfill"
		ms=$(qtime "SELECT chroma_mirror('$tbl', 'mirror_$sfx')" \
			"SELECT chroma_flush('$tbl', '600 seconds')") || die "mirror backfill failed"
		best "mirror_$dim" "$(rps "$n" "$ms")"
		q "SELECT chroma_unmirror('$tbl')" >/dev/null || die "chroma_unmirror failed"

		step "bulk $tag round $round: node-postgres + official JS client"
		out=$(node "$BENCH/js_client.mjs" "$CHROMA_PORT" "$tbl" "js_$sfx" "$batch" 2>>"$LOG_DIR/js_client.log") ||
			die "js_client.mjs failed (see $LOG_DIR/js_client.log)"
		best "js_$dim" "$(echo "$out" | field records_per_s)"
		for c in floor ours mirror js; do check_count "${c}_$sfx" "$n"; done
	done
done
set_batch 500

fi

# ------------------------------------------------------------------ 2. write path
if has write; then

step "write path: tables"
emb=$(awk 'BEGIN { printf "{"; for (i = 0; i < 384; i++) printf "%s%.4f", (i ? "," : ""), (i % 97) / 97; printf "}" }')
for t in w_plain w_mirror w_plpgsql; do
	q "CREATE TABLE $t (id bigserial PRIMARY KEY, embedding real[])" || die "create $t failed"
	cat >"$WORK_DIR/insert_$t.sql" <<EOF
INSERT INTO $t (embedding) VALUES ('$emb');
EOF
	cat >"$WORK_DIR/update_$t.sql" <<EOF
\\set id random(1, 1000)
UPDATE $t SET embedding[1] = random() WHERE id = :id;
EOF
done
q "CREATE TABLE w_queue (qid bigserial PRIMARY KEY, k bigint NOT NULL, queued_at timestamptz NOT NULL DEFAULT now())" &&
	q "CREATE FUNCTION w_enqueue() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF TG_OP = 'DELETE' THEN
		INSERT INTO w_queue (k) VALUES (OLD.id);
	ELSE
		INSERT INTO w_queue (k) VALUES (NEW.id);
	END IF;
	RETURN NULL;
END \$\$" &&
	q "CREATE TRIGGER w_enqueue AFTER INSERT OR UPDATE OR DELETE ON w_plpgsql FOR EACH ROW EXECUTE FUNCTION w_enqueue()" ||
	die "PL/pgSQL trigger set-up failed"
q "SELECT chroma_mirror('w_mirror', 'w_mirror', backfill => false)" >/dev/null &&
	q "SELECT chroma_pause('w_mirror')" >/dev/null || die "mirroring w_mirror failed"

# pgb KIND TABLE: prints the TPS of one pgbench run (after a CHECKPOINT).
pgb() {
	local out
	q CHECKPOINT
	out=$(pgbench -n -M prepared -c "$PGB_CLIENTS" -j "$PGB_CLIENTS" -T "$PGB_SECONDS" \
		-f "$WORK_DIR/$1_$2.sql" 2>>"$LOG_DIR/pgbench.log") || { echo "$out" >>"$LOG_DIR/pgbench.log"; return 1; }
	echo "$out" >>"$LOG_DIR/pgbench.log"
	echo "$out" | awk '/^tps = / { printf "%.1f\n", $3; exit }'
}
for kind in insert update; do
	for round in $(seq 1 "$PGB_ROUNDS"); do
		# alternate the order, so a drift of the machine's load favours no configuration
		order="w_plain w_mirror w_plpgsql"
		[ $((round % 2)) = 0 ] && order="w_plpgsql w_mirror w_plain"
		for t in $order; do
			step "pgbench $kind $t round $round (mirror paused)"
			tps=$(pgb "$kind" "$t") && [ -n "$tps" ] || die "pgbench $kind $t failed"
			best "${kind}_$t" "$tps"
		done
	done
	if [ $kind = insert ]; then
		step "pgbench insert w_mirror (mirror running)"
		q "SELECT chroma_resume('w_mirror')" >/dev/null
		tps=$(pgb insert w_mirror) && [ -n "$tps" ] || die "pgbench failed"
		best insert_running "$tps"
		q "SELECT chroma_pause('w_mirror')" >/dev/null
	fi
done
q "SELECT chroma_unmirror('w_mirror')" >/dev/null

step "COPY $COPY_ROWS rows"
"$FLOOR" gen "$COPY_ROWS" 384 2 >"$WORK_DIR/copy.tsv" && chmod a+r "$WORK_DIR/copy.tsv" || die "floor gen failed"
q "CREATE TABLE c_plain (id bigint PRIMARY KEY, embedding real[])" &&
	q "CREATE TABLE c_mirror (id bigint PRIMARY KEY, embedding real[])" &&
	q "SELECT chroma_mirror('c_mirror', 'c_mirror', backfill => false)" >/dev/null &&
	q "SELECT chroma_pause('c_mirror')" >/dev/null || die "COPY set-up failed"
R[copy_c_plain]=999999 R[copy_c_mirror]=999999
for round in 1 2; do
	for t in c_plain c_mirror; do
		q "TRUNCATE $t" && q CHECKPOINT || die "TRUNCATE failed"
		ms=$(qtime "COPY $t FROM '$WORK_DIR/copy.tsv'") || die "COPY into $t failed"
		R[copy_runs_$t]="${R[copy_runs_$t]:-}${R[copy_runs_$t]:+ / }$ms"
		R[copy_$t]=$(awk -v a="${R[copy_$t]}" -v b="$ms" 'BEGIN { print (b < a ? b : a) }')
	done
done
q "SELECT chroma_unmirror('c_mirror')" >/dev/null
rm -f "$WORK_DIR/copy.tsv"

fi

# ------------------------------------------------------------------ 3. latency
if has latency; then

# The parts before leave write-back behind (checkpoints, autovacuum of the COPY tables and
# of the queue): latency is measured once that has settled, so it does not count them.
# Chroma's time per upsert grows with the records the server holds (20 ms for one record
# into an almost empty server, 40 ms with the bulk part's 90,000 records in other
# collections, on the test machine): the bulk part's collections are dropped first.
step "latency: settle (drop the bulk collections, VACUUM, CHECKPOINT, no autovacuum running)"
q "SELECT count(chroma_delete_collection(c.name)) FROM chroma_list_collections() c
	WHERE c.name ~ '^((floor|ours|mirror|js)_[0-9]+_[0-9]+|warmup_[0-9]+)\$'" >/dev/null || die "dropping the bulk collections failed"
q "VACUUM" && q "CHECKPOINT" || die "VACUUM/CHECKPOINT failed"
for _ in $(seq 1 120); do
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")" = 0 ] && break
	sleep 0.5
done
step "latency: $LAT_RATE transactions/s for $LAT_SECONDS s"
q "CREATE TABLE lat (id bigserial PRIMARY KEY, embedding real[])" &&
	q "SELECT chroma_mirror('lat', 'lat', backfill => false)" >/dev/null || die "mirroring lat failed"
out=$(node "$BENCH/latency.mjs" "$CHROMA_PORT" lat lat "$LAT_RATE" "$LAT_SECONDS" 384 2>>"$LOG_DIR/latency.log") ||
	die "latency.mjs failed (see $LOG_DIR/latency.log)"
R[lat_p50]=$(echo "$out" | field p50_ms)
R[lat_p99]=$(echo "$out" | field p99_ms)
R[lat_max]=$(echo "$out" | field max_ms)
R[lat_missing]=$(echo "$out" | field missing)
step "latency floor: the same rate upserted straight into Chroma"
out=$(node "$BENCH/latency.mjs" "$CHROMA_PORT" lat lat "$LAT_RATE" "$LAT_SECONDS" 384 direct 2>>"$LOG_DIR/latency.log") ||
	die "latency.mjs direct failed (see $LOG_DIR/latency.log)"
R[latd_p50]=$(echo "$out" | field p50_ms)
R[latd_p99]=$(echo "$out" | field p99_ms)
R[lata_p50]=$(echo "$out" | field arrival_p50_ms)
R[lata_p99]=$(echo "$out" | field arrival_p99_ms)
R[latr_p50]=$(echo "$out" | field request_p50_ms)
R[latr_p99]=$(echo "$out" | field request_p99_ms)

fi

# ------------------------------------------------------------------ the table

pg_version=$(q 'SHOW server_version')
settings=$(q "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ' ' ORDER BY name) FROM pg_settings
	WHERE name IN ('synchronous_commit', 'fsync', 'shared_buffers', 'wal_level', 'max_wal_size', 'full_page_writes')")
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# verdict VALUE OP LIMIT (COPY: best = shortest of 2 runs)
verdict() {
	[ $SMOKE = 1 ] && { echo "(smoke)"; return; }
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN { ok = (op == ">=" ? v >= l : v <= l); print (ok ? "met" : "NOT met") }'
}
row() { printf '%-50s %10s %6s %-8s %-8s %s\n' "$@"; }
runs() { [ -n "${R[runs_$1]:-}" ] && echo "${R[runs_$1]}"; }

{
	echo "chroma_sync benchmarks$([ $SMOKE = 1 ] && echo ' (SMOKE: tiny sizes, figures meaningless)')"
	echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine:  $(nproc) vCPU ($cpu), $mem RAM, $(uname -sr)"
	echo "servers:  PostgreSQL $pg_version; Chroma 'old' server (chromadb-js-bindings 1.0.5); same machine, loopback"
	echo "settings: $settings"
	echo "bulk:     best of $BULK_ROUNDS rounds per method (each into a fresh collection), after one warm-up floor run"
	echo "pgbench:  $PGB_CLIENTS clients, $PGB_SECONDS s per run, -M prepared, CHECKPOINT before each run," \
		"best of $PGB_ROUNDS interleaved runs"
	echo
	row "measurement" "best" "ratio" "goal" "verdict" "runs"
	row "-----------" "----" "-----" "----" "-------" "----"
	has bulk && for shape in "${SHAPES[@]}"; do
		read -r n dim batch <<<"$shape"
		fl=${R[floor_$dim]}
		row "bulk ${n}x$dim, batch $batch: server floor (rec/s)" "$fl" "1.00" "" "" "$(runs "floor_$dim")"
		r=$(ratio "${R[ours_$dim]}" "$fl")
		row "  chroma_upsert_query (rec/s), ours/floor" "${R[ours_$dim]}" "$r" ">= 0.95" "$(verdict "$r" '>=' 0.95)" "$(runs "ours_$dim")"
		r=$(ratio "${R[mirror_$dim]}" "$fl")
		row "  mirror backfill (rec/s), ours/floor" "${R[mirror_$dim]}" "$r" ">= 0.95" "$(verdict "$r" '>=' 0.95)" "$(runs "mirror_$dim")"
		r=$(ratio "${R[js_$dim]}" "$fl")
		row "  node-postgres + chromadb JS (rec/s), js/floor" "${R[js_$dim]}" "$r" "" "" "$(runs "js_$dim")"
	done
	has write && for kind in insert update; do
		u=${R[${kind}_w_plain]} m=${R[${kind}_w_mirror]} p=${R[${kind}_w_plpgsql]}
		K=$(echo "$kind" | tr a-z A-Z)
		row "pgbench 1-row $K 384-d: unmirrored (TPS)" "$u" "1.00" "" "" "$(runs "${kind}_w_plain")"
		r=$(ratio "$m" "$u")
		row "  mirrored, paused (TPS), mirrored/unmirrored" "$m" "$r" ">= 0.90" "$(verdict "$r" '>=' 0.90)" "$(runs "${kind}_w_mirror")"
		r=$(ratio "$p" "$u")
		row "  PL/pgSQL queue trigger (TPS), /unmirrored" "$p" "$r" "" "" "$(runs "${kind}_w_plpgsql")"
		# overhead = time added per transaction: 1/tps - 1/tps_unmirrored
		r=$(awk -v u="$u" -v m="$m" -v p="$p" 'BEGIN { om = 1/m - 1/u; op = 1/p - 1/u;
			if (op <= 0) print "n/a"; else printf "%.2f", (om > 0 ? om / op : 0) }')
		if [ "$r" = n/a ]; then
			row "  overhead ours/plpgsql (time added per txn)" "" "n/a" "<= 0.50" "no overhead measurable for the trigger (noise)" ""
		else
			row "  overhead ours/plpgsql (time added per txn)" "" "$r" "<= 0.50" "$(verdict "$r" '<=' 0.50)" ""
		fi
		if [ $kind = insert ]; then
			r=$(ratio "${R[insert_running]}" "$u")
			row "  mirrored, worker running (TPS), /unmirrored" "${R[insert_running]}" "$r" "" "" ""
		fi
	done
	if has write; then
	r=$(ratio "${R[copy_c_mirror]}" "${R[copy_c_plain]}")
	row "COPY $COPY_ROWS x 384-d: unmirrored (ms)" "${R[copy_c_plain]}" "1.00" "" "" "${R[copy_runs_c_plain]}"
	row "  mirrored, paused (ms), mirrored/unmirrored" "${R[copy_c_mirror]}" "$r" "<= 1.15" "$(verdict "$r" '<=' 1.15)" "${R[copy_runs_c_mirror]}"
	fi
	if has latency; then
	row "latency commit->visible, $LAT_RATE tx/s x $LAT_SECONDS s" "" "" "" "" ""
	row "  p50 (ms)" "${R[lat_p50]}" "" "<= 50" "$(verdict "${R[lat_p50]}" '<=' 50)" ""
	row "  p99 (ms)" "${R[lat_p99]}" "" "<= 250" "$(verdict "${R[lat_p99]}" '<=' 250)" ""
	row "  max (ms); rows never seen in Chroma" "${R[lat_max]}" "" "" "" "${R[lat_missing]} never seen"
	row "  floor: upserted straight into Chroma, p50 (ms)" "${R[latd_p50]}" "" "" "" ""
	row "  floor: upserted straight into Chroma, p99 (ms)" "${R[latd_p99]}" "" "" "" ""
	row "  one writer upserting straight, due->visible p50" "${R[lata_p50]}" "" "" "" ""
	row "  one writer upserting straight, due->visible p99" "${R[lata_p99]}" "" "" "" ""
	row "  one writer, each upsert's round trip p50 (ms)" "${R[latr_p50]}" "" "" "" ""
	row "  one writer, each upsert's round trip p99 (ms)" "${R[latr_p99]}" "" "" "" ""
	fi
	echo
	echo "total time: $((SECONDS - T0)) s; load average (1/5/15 min) at start: $LOAD_START," \
		"at end: $(cut -d' ' -f1-3 /proc/loadavg) (this run alone keeps it near 1-2; higher means other work shared the CPUs)"
} | tee "$WORK_DIR/table.txt"

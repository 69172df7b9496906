#!/usr/bin/env bash
# chroma_sync demo. On a Debian 12 machine, as root: installs what is missing, builds and
# installs the extension, starts a throwaway PostgreSQL 15 cluster and a Chroma server on
# free loopback ports, loads 288 short documents with embeddings computed in SQL (hashed
# bag of words, no network), upserts them into a Chroma collection and runs similarity
# queries. When the installed extension has mirrors, it also mirrors a table. Everything
# it started is stopped on exit, also on failure or Ctrl-C.
#
#   bash demo/run.sh
#
# Environment: KEEP=1 leaves both servers running and prints how to connect and stop them.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT # read by test/lib/common.sh
DEMO_DIR=$ROOT/demo
KEEP=${KEEP:-0}
COLLECTION=documents

if [ "$(id -u)" -ne 0 ]; then
	echo "demo/run.sh must run as root (it installs packages and runs PostgreSQL as postgres)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_demo.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$LOG_DIR" "$CHROMA_PIDS_DIR"

# shellcheck source=../test/lib/common.sh
. "$ROOT/test/lib/common.sh"
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

if [ -t 1 ]; then BOLD=$(printf '\033[1m'); DIM=$(printf '\033[2m'); OFF=$(printf '\033[0m')
else BOLD='' DIM='' OFF=''; fi

header() { printf '%s== %s%s\n\n' "$BOLD" "$*" "$OFF"; }

# Documents are clipped to fit the terminal (80 to 120 columns; 100 when not a terminal).
COLS=100
if [ -t 1 ]; then COLS=$(tput cols 2>/dev/null || echo 100); fi
[ "$COLS" -ge 80 ] 2>/dev/null || COLS=80
[ "$COLS" -le 120 ] || COLS=120
TEXT_WIDTH=$((COLS - 32))

# step "DESCRIPTION" LOGNAME CMD...: runs CMD in this shell, its output in $LOG_DIR/LOGNAME.log;
# one line on the terminal, and the log's last lines when it fails.
step() {
	local what=$1 log=$LOG_DIR/$2.log t=$SECONDS rc
	shift 2
	printf '  %-48s ' "$what"
	"$@" >>"$log" 2>&1 </dev/null
	rc=$?
	if [ $rc -eq 0 ]; then
		printf 'ok %s(%ss)%s\n' "$DIM" $((SECONDS - t)) "$OFF"
	else
		echo "FAILED"
		echo "    ---- last lines of $log (compiler command lines left out)"
		grep -vE '^(gcc|cc|clang)(-[0-9]+)? ' "$log" | tail -n 25 | sed 's/^/    | /'
	fi
	return $rc
}

# A free loopback port, never one of the ports listed in DEMO_AVOID_PORTS.
demo_port() {
	local p i
	for ((i = 0; i < 20; i++)); do
		p=$(free_port) || return 1
		[[ " ${DEMO_AVOID_PORTS:-55432 18000 18001} " == *" $p "* ]] || { echo "$p"; return 0; }
	done
	return 1
}

# Builds from a scratch copy of the sources, so a build or test run in the checkout is
# never disturbed (build_extension starts with make clean).
build_from_copy() {
	local src=$WORK_DIR/build f
	mkdir -p "$src" || return 1
	for f in Makefile chroma_sync.control META.json src sql; do
		[ -e "$ROOT/$f" ] && { cp -a "$ROOT/$f" "$src/" || return 1; }
	done
	(ROOT=$src && build_extension)
}

start_demo_chroma() {
	CHROMA_PORT=$(demo_port) || return 1
	start_chroma old "$WORK_DIR/chroma-data" "$CHROMA_PORT" "$LOG_DIR/chroma.log"
}

start_demo_pg() {
	local i
	for ((i = 0; i < 3; i++)); do
		# start_pg picks its own free port; retry the rare pick of a port to avoid.
		start_pg demo "http://127.0.0.1:$CHROMA_PORT" || return 1
		[[ " ${DEMO_AVOID_PORTS:-55432 18000 18001} " == *" $PG_PORT "* ]] || break
		stop_pg "$PG_DIR/data" && rm -rf "$PG_DIR" && PG_DATA_DIRS=()
	done
	as_postgres "$PG_BIN/createdb" -h "$PG_DIR" -p "$PG_PORT" -U postgres demo
}

psql_demo() {
	"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off -P footer=off \
		-h "$PG_DIR" -p "$PG_PORT" -U postgres -d demo "$@"
}

# show SQL: prints the statement, then runs it with aligned output.
show() {
	local out
	printf '%s%s%s\n' "$DIM" "$1" "$OFF"
	out=$(psql_demo -c "$1") || return 1
	[ -z "$out" ] || printf '%s\n' "$out"
	echo
}

neighbours() {
	local q=$1 coll=${2:-$COLLECTION}
	printf '%sQuery: "%s"%s\n' "$BOLD" "$q" "$OFF"
	show "SELECT id, round(distance::numeric, 3) AS distance, metadata->>'topic' AS topic,
       clip(document, $TEXT_WIDTH) AS document
  FROM chroma_query('$coll', demo_embed('$q'), n_results => 5)
 ORDER BY distance;"
}

# ---------------------------------------------------------------------- clean-up

OK=0
on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	# A signal may arrive inside a step, whose output goes to its log: back to the terminal.
	exec 1>&8 2>&9
	if [ "$KEEP" = 1 ] && [ -n "${PG_PORT:-}" ]; then
		[ $OK = 1 ] || echo "demo failed (exit $rc); logs: $LOG_DIR"
		cat >"$WORK_DIR/stop.sh" <<-EOF
			# Stops the servers of the chroma_sync demo and removes its files.
			runuser -u postgres -- $PG_BIN/pg_ctl -D $PG_DIR/data -m fast stop
			CHROMA_PIDS_DIR=$CHROMA_PIDS_DIR bash $CHROMA_CTL stop ${CHROMA_PID:-0}
			rm -rf $WORK_DIR
		EOF
		cat <<-EOF
			KEEP=1: PostgreSQL and Chroma are still running.
			  connect:  $PG_BIN/psql -h $PG_DIR -p $PG_PORT -U postgres demo
			  Chroma:   http://127.0.0.1:$CHROMA_PORT
			  stop:     bash $WORK_DIR/stop.sh
		EOF
		exit $rc
	fi
	for d in "${PG_DATA_DIRS[@]}"; do stop_pg "$d" >>"$LOG_DIR/stop.log" 2>&1; done
	stop_all_chroma >>"$LOG_DIR/stop.log" 2>&1
	if [ $OK = 1 ]; then
		rm -rf "$WORK_DIR"
		echo "PostgreSQL and Chroma were stopped and their data removed (KEEP=1 keeps them running)."
	elif [ $rc -eq 130 ] || [ $rc -eq 143 ]; then
		rm -rf "$WORK_DIR"
		printf '\ninterrupted; everything the demo started was stopped.\n'
	else
		rm -rf "$WORK_DIR/build" "$WORK_DIR/pg-demo" "$WORK_DIR/chroma-data" "$WORK_DIR/chroma-pids"
		echo "demo failed (exit $rc); everything it started was stopped. Logs: $LOG_DIR"
	fi
	exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------- main

# The terminal, kept as fds 8 and 9 (test/lib/common.sh closes them for the servers).
exec 8>&1 9>&2

echo "${BOLD}chroma_sync demo${OFF}"
echo
step "install what is missing (apt, npm)" install install_deps 1 0 || exit 1
step "build and install the extension" build build_from_copy || exit 1
chown -R postgres: "$LOG_DIR"
step "start a Chroma server" chroma start_demo_chroma || exit 1
step "start PostgreSQL 15 (chroma_sync preloaded)" postgres start_demo_pg || exit 1
echo "  ${DIM}Chroma on 127.0.0.1:$CHROMA_PORT, PostgreSQL on 127.0.0.1:$PG_PORT${OFF}"
echo

header "1. The extension and the Chroma server"
show "CREATE EXTENSION chroma_sync;" || exit 1
show "SELECT key, value FROM jsonb_each_text(chroma_server_info());" || exit 1

header "2. 288 short documents in 8 topics, embedded in SQL"
echo "Each embedding is a hashed bag of words (256 dimensions, unit length), computed by"
echo "demo/setup.sql without any model or network: texts that share words are close."
echo
psql_demo -v docs_file="$DEMO_DIR/documents.tsv" -f "$DEMO_DIR/setup.sql" || exit 1
show "SELECT topic, count(*) AS documents, clip((array_agg(body ORDER BY id))[1], $TEXT_WIDTH) AS for_example
  FROM documents GROUP BY topic ORDER BY topic;" || exit 1

header "3. Upsert them into a Chroma collection"
show "SELECT chroma_create_collection('$COLLECTION', space => 'cosine');" || exit 1
show "SELECT chroma_upsert_query('$COLLECTION', \$\$
    SELECT id, embedding, body AS document, jsonb_build_object('topic', topic) AS metadata
    FROM documents WHERE embedding IS NOT NULL \$\$);" || exit 1
show "SELECT chroma_count('$COLLECTION');" || exit 1

header "4. Nearest neighbours (cosine distance: 0 = same words, 1 = no word in common)"
neighbours "how to bake bread at home" || exit 1
neighbours "planets and telescopes" || exit 1
neighbours "stock market investing" || exit 1

if [ "$(psql_demo -At -c "SELECT count(*) FROM pg_proc WHERE proname = 'chroma_mirror'")" != 0 ]; then
	header "5. A mirror: a table kept in step with a collection by a background worker"
	show "CREATE TABLE notes (id int PRIMARY KEY, topic text, body text, embedding real[]);" || exit 1
	show "SELECT chroma_mirror('notes', document_column => 'body', metadata_columns => ARRAY['topic']);" || exit 1
	show "INSERT INTO notes SELECT id, topic, body, embedding FROM documents;" || exit 1
	show "SELECT source, collection, state, pending, failed, synced, lag FROM chroma_sync.status;" || exit 1
	show "SELECT chroma_flush('notes');" || exit 1
	show "SELECT source, collection, state, pending, failed, synced, lag FROM chroma_sync.status;" || exit 1
	echo "The mirror created collection \"notes\" in Chroma's default l2 space: for these unit-length"
	echo "vectors the distances are twice the cosine distances above, and the order is the same."
	echo
	neighbours "planets and telescopes" notes || exit 1
	show "DELETE FROM notes WHERE topic = 'astronomy';" || exit 1
	show "UPDATE notes SET body = 'Grow basil on a sunny windowsill and pinch out the flowers.',
       embedding = demo_embed('Grow basil on a sunny windowsill and pinch out the flowers.')
 WHERE id = 1;" || exit 1
	show "SELECT chroma_flush('notes');" || exit 1
	show "SELECT id, document FROM chroma_get('notes', ARRAY['1']);" || exit 1
	show "SELECT * FROM chroma_verify('notes');" || exit 1
fi

OK=1

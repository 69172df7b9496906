#!/usr/bin/env bash
# Runs every test suite of chroma_sync, from a fresh Debian 12 machine, as root:
# installs what is missing (apt, npm, the glibc of the new Chroma server), builds and
# installs the extension, then runs the C unit tests, a short libFuzzer run of every fuzz
# target, pg_regress against the old and the new Chroma server, and the TAP tests, all on the
# host's PostgreSQL 15; then (suite "majors") PostgreSQL 17, 18 and 19 in Debian roots made
# with debootstrap from the machine's own archive (trixie: 17, sid: 18, experimental: 19;
# cached in /var/cache/chroma_sync/pgroots): on each, the extension built with WERROR=1,
# pg_regress, and TAP tests run inside the root (18: pg_regress on both Chroma servers, the
# mirror TAP set and the red-team TAP files, which 15 leaves to it; 17 and 19: pg_regress on
# the first server and the mirror TAP set, 19 also the partitioned mirror's; see pg_tap_set and pg_tap_skip in
# test/lib/pg_roots.sh). 18, and static, unit, fuzz, 17 and 19, run in harnesses
# of their own alongside the rest (PG_CONCURRENT_MAJORS= turns that off). Stops every server it started, also on failure.
# The last line of output is "N passed, M failed" (before it, "parts:" gives the time of
# each part); the exit status is non-zero when anything failed or broke.
#
#   bash test/run_all.sh [--only static|unit|fuzz|regress|tap|bench|majors[,...]] [--server old|new]
#                        [--sanitize] [--pg 17,18,19]
#   TAP='03*' bash test/run_all.sh --only tap     (only the matching TAP files)
#   bash test/run_all.sh --pg 18                  (PostgreSQL 18's part only: build, regress, TAP)
#   bash test/run_all.sh --pg 17,19 --only tap    (their build and TAP part only)
#
# --pg LIST: the majors the "majors" suite covers (default 17,18,19); it runs that suite
# alone (--only may then name regress or tap, the parts of it to run).
#
# --sanitize (make sanitize-check): the extension built with SANITIZE=1 (ASan and UBSan),
# every PostgreSQL server started with the ASan runtime preloaded (see test/lib/sanitize.sh),
# sanitizer reports collected in logs/sanitizer/, and each report counted as a failure.
# Runs regress and tap unless --only says otherwise. Slower; leaves the sanitized library
# installed (the next run without --sanitize rebuilds and reinstalls it).
#
# Environment: KEEP=1 leaves the servers (and their data) running for debugging;
# REGRESS_TIMEOUT, UNIT_TIMEOUT, FUZZ_TIMEOUT, TAP_TIMEOUT (seconds per suite / per TAP
# file); FUZZ_SECONDS (how long each fuzz target runs, default 60).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHROMA_ROOT=$ROOT
KEEP=${KEEP:-0}
REGRESS_TIMEOUT=${REGRESS_TIMEOUT:-1200}
UNIT_TIMEOUT=${UNIT_TIMEOUT:-600}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-900}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
TAP_TIMEOUT=${TAP_TIMEOUT:-900}

usage() {
	sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}

SUITES=static,unit,fuzz,regress,tap,bench,majors,package
SUITES_GIVEN=0
PG_MAJORS_GIVEN=
SERVERS="old new"
SANITIZE=0
while [ $# -gt 0 ]; do
	case $1 in
	--only) SUITES=${2:-} SUITES_GIVEN=1; shift 2 || usage 2 ;;
	--only=*) SUITES=${1#--only=} SUITES_GIVEN=1; shift ;;
	--sanitize) SANITIZE=1; shift ;;
	--pg) PG_MAJORS_GIVEN=${2:-}; shift 2 || usage 2 ;;
	--pg=*) PG_MAJORS_GIVEN=${1#--pg=}; shift ;;
	--server) SERVERS=${2:-}; shift 2 || usage 2 ;;
	--server=*) SERVERS=${1#--server=}; shift ;;
	-h | --help) usage 0 ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[ $SANITIZE = 1 ] && [ $SUITES_GIVEN = 0 ] && SUITES=regress,tap
# What the "majors" suite runs on each major besides the build: with --pg, regress and tap
# unless --only names one of them; else regress and tap when the run includes them (on the
# host), both when --only names majors alone.
MAJOR_PARTS=
for s in regress tap; do [[ ",$SUITES," == *,$s,* ]] && MAJOR_PARTS+=" $s"; done
if [ -n "$PG_MAJORS_GIVEN" ]; then
	[ $SUITES_GIVEN = 1 ] && [ -n "$MAJOR_PARTS" ] || MAJOR_PARTS=" regress tap"
	# static, unit and fuzz may run first in the same harness (a PG_CONCURRENT_MAJORS group
	# named "checks" runs them so)
	checks=
	for s in ${SUITES//,/ }; do
		[ $SUITES_GIVEN = 1 ] || break
		case $s in
		majors | regress | tap) ;;
		static | unit | fuzz) checks+=,$s ;;
		*) echo "--pg runs the majors suite (with --only: majors, regress, tap; static, unit, fuzz)" >&2; exit 2 ;;
		esac
	done
	SUITES=majors$checks
fi
[ -n "$MAJOR_PARTS" ] || MAJOR_PARTS=" regress tap"
if [ $SANITIZE = 1 ] && [[ ",$SUITES," == *,bench,* ]]; then
	echo "--sanitize runs regress and tap (and static, unit, fuzz); not bench" >&2
	exit 2
fi
for s in ${SUITES//,/ }; do
	case $s in static | regress | unit | fuzz | tap | bench | majors | package) ;; *) echo "unknown suite '$s' (static, unit, fuzz, regress, tap, bench, majors, package)" >&2; exit 2 ;; esac
done
case $SERVERS in "old new" | old | new) ;; *) echo "unknown server '$SERVERS' (old or new)" >&2; exit 2 ;; esac
wants() { [[ ",$SUITES," == *",$1,"* ]]; }
major_wants() { [[ "$MAJOR_PARTS " == *" $1 "* ]]; }
if [ "$(id -u)" -ne 0 ]; then
	echo "run_all.sh must run as root (it installs packages and runs PostgreSQL as postgres)" >&2
	exit 2
fi

WORK_DIR=$(mktemp -d /tmp/chroma_sync_test.XXXXXX) || exit 1
chmod 755 "$WORK_DIR"
LOG_DIR=$WORK_DIR/logs
mkdir -p "$LOG_DIR"
CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
mkdir -p "$CHROMA_PIDS_DIR"

# shellcheck source=lib/common.sh
. "$ROOT/test/lib/common.sh"
# shellcheck source=lib/sanitize.sh
. "$ROOT/test/lib/sanitize.sh"
# shellcheck source=lib/pg_roots.sh
. "$ROOT/test/lib/pg_roots.sh"
# shellcheck source=lib/package.sh
. "$ROOT/test/lib/package.sh"
PG_MAJORS=${PG_MAJORS_GIVEN//,/ }
PG_MAJORS=${PG_MAJORS:-$PG_OTHER_MAJORS}
for m in $PG_MAJORS; do
	pg_root_suite "$m" >/dev/null || { echo "unknown PostgreSQL major '$m' (17, 18, 19; 15 is the host's)" >&2; rm -rf "$WORK_DIR"; exit 2; }
done
CHROMA_PID_DIRS+=("$CHROMA_PIDS_DIR")

# The terminal, kept as fds 8 and 9 (closed in the commands the harness starts).
exec 8>&1 9>&2
IN_STAGE=0
PASSED=0
FAILED=0
BROKEN=()
T0=$SECONDS

broken() {
	BROKEN+=("$1")
	FAILED=$((FAILED + 1))
}

elapsed() { printf '%02d:%02d' $(((SECONDS - T0) / 60)) $(((SECONDS - T0) % 60)); }

# stage "DESCRIPTION" LOGNAME CMD...: runs CMD in this shell with its output in
# $LOG_DIR/LOGNAME.log; one line on stdout; the log's last $STAGE_TAIL lines when it fails.
stage() {
	local what=$1 log=$LOG_DIR/$2.log t=$SECONDS rc tail_lines=${STAGE_TAIL:-40}
	shift 2
	printf '[%s] %-52s ' "$(elapsed)" "$what"
	IN_STAGE=1
	"$@" >>"$log" 2>&1 </dev/null
	rc=$?
	IN_STAGE=0
	if [ $rc -eq 0 ]; then
		echo "ok ($((SECONDS - t))s)"
	else
		echo "FAILED ($((SECONDS - t))s, exit $rc)"
		[ "$tail_lines" -eq 0 ] || show_tail "$log" "$tail_lines"
	fi
	return $rc
}

# Runs "$@" (a command, not a function) from / in the background and waits for it, so that a
# signal to the harness interrupts the wait at once; on_exit then stops the command.
CHILD=
bg_run() {
	local rc
	(cd / && exec "$@" 8>&- 9>&-) &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	CHILD=
	return $rc
}

# ---------------------------------------------------------------------- pg_regress

# count_regress LOG: sets ok, bad and names (of the failed tests) from pg_regress's output.
# 15 and 16: "test name ... ok 12 ms" or "     name ... FAILED 30 ms" (parallel groups);
# 17+ (TAP): "ok 1         - name   12 ms" or "not ok 3     + name   30 ms" (+: in a group).
REGRESS_OK_RE='^((test +| +)[^ ]+ +\.\.\. +ok|ok +[0-9]+ +[-+] +[^ ]+)'
REGRESS_BAD_RE='^((test +| +)[^ ]+ +\.\.\. +(FAILED|failed)|not ok +[0-9]+ +[-+] +[^ ]+)'
count_regress() {
	ok=$(grep -cE "$REGRESS_OK_RE" "$1")
	bad=$(grep -cE "$REGRESS_BAD_RE" "$1")
	names=$(grep -E "$REGRESS_BAD_RE" "$1" |
		sed -E 's/^not ok +[0-9]+ +[-+] +([^ ]+).*/\1/; s/^(test +| +)([^ ]+).*/\2/' | tr '\n' ' ')
}

# run_regress old|new: the whole pg_regress suite against a fresh server of that kind.
run_regress() {
	local kind=$1 port url cpid out log ok bad names rc
	port=$(free_port) || { broken "regress-$kind: no free port"; return; }
	url=http://127.0.0.1:$port
	if ! stage "start $kind Chroma server (port $port)" chroma-start-regress-$kind \
		start_chroma "$kind" "$WORK_DIR/chroma-regress-$kind" "$port" "$LOG_DIR/chroma-regress-$kind.log"; then
		broken "regress-$kind: Chroma server did not start"
		return
	fi
	cpid=$CHROMA_PID
	if ! stage "start PostgreSQL for regress-$kind" pg-start-regress-$kind start_pg "regress-$kind" "$url"; then
		show_tail "$PG_LOG" 30
		broken "regress-$kind: PostgreSQL did not start"
		stop_chroma "$cpid"
		return
	fi
	if [ "$SANITIZE" = 1 ] && ! sanitizer_server_ok "$PG_DIR" "$PG_PORT"; then
		broken "regress-$kind: the server does not run with the ASan runtime and chroma_sync loaded"
	fi
	out=$WORK_DIR/regress-$kind
	mkdir -p "$out"
	log=$LOG_DIR/regress-$kind.log
	STAGE_TAIL=0 stage "pg_regress against the $kind server" regress-$kind \
		bg_run timeout "$REGRESS_TIMEOUT" make -C "$ROOT" PG_CONFIG="$PG_CONFIG" installcheck \
		PGHOST="$PG_DIR" PGPORT="$PG_PORT" PGUSER=postgres EXTRA_REGRESS_OPTS="--outputdir=$out"
	rc=$?
	count_regress "$log"
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + bad))
	note "regress-$kind: $ok passed, $bad failed${names:+: $names}"
	if [ $rc -ne 0 ] && [ "$bad" -eq 0 ]; then
		show_tail "$log" 40
		broken "regress-$kind: make installcheck exited $rc$([ $rc -eq 124 ] && echo ' (timeout)')"
	fi
	if [ -s "$out/regression.diffs" ]; then
		cp "$out/regression.diffs" "$LOG_DIR/regression-$kind.diffs"
		if [ "$bad" -gt 0 ] || [ $rc -ne 0 ]; then
			echo "    ---- first 200 lines of regression.diffs ($kind server)"
			head -n 200 "$out/regression.diffs" | sed 's/^/    | /'
		fi
	fi
	if [ "$bad" -gt 0 ] || [ $rc -ne 0 ]; then
		show_tail "$PG_LOG" 30
		show_tail "$LOG_DIR/chroma-regress-$kind.log" 10
	fi
	if [ "$KEEP" != 1 ]; then
		stop_pg "$PG_DIR/data" >>"$LOG_DIR/pg-stop-regress-$kind.log" 2>&1
		stop_chroma "$cpid"
	fi
	sanitizer_collect "regress-$kind" "$PG_LOG"
}

# ---------------------------------------------------------------------- other majors

ROOT_PIDS=()

# Every Debian root the chosen majors need, made in parallel (downloads dominate), then per
# major: the build with WERROR=1 (one test) and pg_regress against a fresh Chroma server.
run_majors() {
	local suites=() s m pid rc kind=${SERVERS%% *}
	local -A root_ok=()
	for m in $PG_MAJORS; do
		s=$(pg_root_suite "$m")
		[[ " ${suites[*]} " == *" $s "* ]] || suites+=("$s")
	done
	if ! command -v debootstrap >/dev/null &&
		! stage "install debootstrap" install-debootstrap apt_install debootstrap; then
		broken "majors: debootstrap could not be installed"
		return
	fi
	for s in "${suites[@]}"; do
		(
			t=$SECONDS
			pg_root_prepare "$s" && { ! major_wants tap || pg_root_tap_prepare "$s"; }
			rc=$?
			echo "root $s: exit $rc after $((SECONDS - t))s"
			exit $rc
		) >>"$LOG_DIR/root-$s.log" 2>&1 </dev/null 8>&- 9>&- &
		ROOT_PIDS+=($!)
		root_ok[$s]=$!
	done
	for s in "${suites[@]}"; do
		pid=${root_ok[$s]}
		if STAGE_TAIL=30 stage "Debian $s root (PostgreSQL $(pg_root_majors "$s"))" root-$s wait "$pid"; then
			root_ok[$s]=1
		else
			root_ok[$s]=0
			broken "majors: the Debian $s root could not be made (see $LOG_DIR/root-$s.log)"
		fi
	done
	ROOT_PIDS=()
	for m in $PG_MAJORS; do
		s=$(pg_root_suite "$m")
		[ "${root_ok[$s]}" = 1 ] || continue
		t=$SECONDS
		if stage "build on PostgreSQL $m (WERROR=1, Debian $s)" build-pg$m pg_root_build "$m"; then
			PASSED=$((PASSED + 1))
			note "build pg$m: $(grep -m1 -E '^gcc' "$LOG_DIR/build-pg$m.log")"
		else
			broken "majors: make WERROR=1 / make install failed on PostgreSQL $m"
			continue
		fi
		if major_wants regress; then
			for kind in $(pg_regress_servers "$m" "$SERVERS"); do run_root_regress "$m" "$kind"; done
		fi
		major_wants tap && run_tap "$m"
		part_time "pg$m" $((SECONDS - t))
	done
}

# run_root_regress MAJOR old|new: pg_regress on MAJOR's root against a fresh Chroma server.
run_root_regress() {
	local major=$1 kind=$2 port cpid log out rc ok bad names n=pg$1-$2
	port=$(free_port) || { broken "regress-$n: no free port"; return; }
	if ! stage "start $kind Chroma server (port $port)" chroma-start-$n \
		start_chroma "$kind" "$WORK_DIR/chroma-regress-$n" "$port" "$LOG_DIR/chroma-regress-$n.log"; then
		broken "regress-$n: Chroma server did not start"
		return
	fi
	cpid=$CHROMA_PID
	log=$LOG_DIR/regress-$n.log
	out=$LOG_DIR/regress-$n
	STAGE_TAIL=0 stage "pg_regress on PostgreSQL $major ($kind server)" regress-$n \
		timeout "$REGRESS_TIMEOUT" bash -c 'ROOT=$1; . "$1/test/lib/common.sh"; . "$1/test/lib/pg_roots.sh"; pg_root_regress "$2" "$3" "$4"' \
		sh "$ROOT" "$major" "http://127.0.0.1:$port" "$out"
	rc=$?
	count_regress "$log"
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + bad))
	note "regress-$n: $ok passed, $bad failed${names:+: $names}"
	if [ $rc -ne 0 ] && [ "$bad" -eq 0 ]; then
		show_tail "$log" 40
		broken "regress-$n: make installcheck exited $rc$([ $rc -eq 124 ] && echo ' (timeout)')"
	fi
	if [ -s "$out/regression.diffs" ] && { [ "$bad" -gt 0 ] || [ $rc -ne 0 ]; }; then
		echo "    ---- first 200 lines of regression.diffs (PostgreSQL $major)"
		head -n 200 "$out/regression.diffs" | sed 's/^/    | /'
		show_tail "$out/server.log" 30
	fi
	[ "$KEEP" = 1 ] || stop_chroma "$cpid"
}

# ---------------------------------------------------------------------- static checks

run_static() {
	local log=$LOG_DIR/static.log line p f rc
	stage "static checks (cppcheck, META.json, SQL scripts)" static bg_run timeout 900 bash "$ROOT/test/static_checks.sh"
	rc=$?
	line=$(grep -E '^static: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		broken "static: no 'static: N passed, M failed' line (exit $rc)"
		return
	fi
	p=$(echo "$line" | sed -E 's/^static: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(echo "$line" | sed -E 's/^static: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	note "$line"
	[ "$f" -gt 0 ] && show_tail "$log" 40
}

# ---------------------------------------------------------------------- unit tests

run_unit() {
	local log=$LOG_DIR/unit.log line p f rc
	if [ ! -f "$ROOT/test/unit/Makefile" ]; then
		note "unit: skipped, test/unit/Makefile does not exist yet"
		return
	fi
	stage "C unit tests" unit bg_run timeout "$UNIT_TIMEOUT" make -C "$ROOT/test/unit" PG_CONFIG="$PG_CONFIG" check
	rc=$?
	line=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		broken "unit: no 'unit: N passed, M failed' line (exit $rc)"
		return
	fi
	p=$(echo "$line" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(echo "$line" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	note "$line"
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		broken "unit: make check exited $rc with no failed test"
	fi
}

# ---------------------------------------------------------------------- fuzz smoke

# Builds the libFuzzer targets and runs each for FUZZ_SECONDS; one test per target.
run_fuzz() {
	local log=$LOG_DIR/fuzz.log line p f rc
	stage "fuzz targets, ${FUZZ_SECONDS}s each (libFuzzer)" fuzz bg_run timeout "$FUZZ_TIMEOUT" \
		make -C "$ROOT/test/fuzz" PG_CONFIG="$PG_CONFIG" FUZZ_SECONDS="$FUZZ_SECONDS" smoke
	rc=$?
	line=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		broken "fuzz: no 'fuzz: N passed, M failed' line (exit $rc)"
		return
	fi
	p=$(echo "$line" | sed -E 's/^fuzz: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(echo "$line" | sed -E 's/^fuzz: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	grep -E '^fuzz_[a-z_]+: ' "$log" | while read -r l; do note "$l"; done
	note "$line"
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		broken "fuzz: make smoke exited $rc with no failed target"
	fi
}

# ---------------------------------------------------------------------- TAP tests

# True when the postgres user can read what the TAP tests need in place.
postgres_can_read_repo() {
	as_postgres test -r "$ROOT/test/lib/chroma_ctl.sh" &&
		as_postgres test -r "$ROOT/test/chroma/old/node_modules/chromadb/dist/cli.mjs" &&
		as_postgres test -r "$ROOT/test/chroma/new/node_modules/chromadb/dist/cli.mjs" &&
		{ [ ! -d "$GLIBC_DIR" ] || as_postgres test -r "$CHROMA_GLIBC_LIB/libc.so.6"; } &&
		for f in "$ROOT"/test/t/*.pl; do as_postgres test -r "$f" || return 1; done
}

# A copy of the test files and Chroma servers the postgres user can read (hard links when
# the file system allows).
copy_repo_for_postgres() {
	local dst=$WORK_DIR/repo
	mkdir -p "$dst/test" "$dst/.cache" &&
		cp -a "$ROOT/test/t" "$ROOT/test/lib" "$dst/test/" &&
		{ cp -al "$ROOT/test/chroma" "$dst/test/" 2>/dev/null || cp -a "$ROOT/test/chroma" "$dst/test/"; } &&
		{ [ ! -d "$GLIBC_DIR" ] || cp -a "$GLIBC_DIR" "$dst/.cache/"; } &&
		chmod -R a+rX "$dst"
}

# TAP_MAJOR (15: the host; else the major of a Debian root, TAP_ROOTFS) says where a TAP test
# and the Chroma servers of the TAP tests run; in a root, as the root's postgres user.
TAP_MAJOR=15
TAP_ROOTFS=

tap_chroma_start() {
	if [ "$TAP_MAJOR" = 15 ]; then
		start_chroma "$TAP_KIND" "$TAP_DIR/chroma-data" "$TAP_PORT" "$TAP_CHROMA_LOG" postgres
	else
		CHROMA_PID=$(in_root_tap "$TAP_ROOTFS" runuser -u postgres -- env CHROMA_PIDS_DIR="$TAP_PIDS_DIR" \
			CHROMA_ROOT="$CHROMA_ROOT" CHROMA_GLIBC_LIB="$CHROMA_GLIBC_LIB" \
			bash "$CHROMA_ROOT/test/lib/chroma_ctl.sh" start "$TAP_KIND" "$TAP_DIR/chroma-data" "$TAP_PORT" \
			"$TAP_CHROMA_LOG")
	fi
}

# What a TAP test gets: PostgreSQL::Test::Cluster on PERL5LIB, the binaries of its major
# first on PATH, TESTDIR (tmp_check goes there), and a running Chroma server: CHROMA_URL,
# CHROMA_SERVER (old|new), CHROMA_PORT, CHROMA_PID, CHROMA_DATA_DIR, CHROMA_LOG. To stop,
# restart or add servers: bash "$CHROMA_CTL" start old|new DIR PORT LOG / stop PID (servers
# started that way are recorded in CHROMA_PIDS_DIR and stopped by the harness at the end).
# CHROMA_SYNC_ROOT is the repository (on another major: the copy of its test files).
run_one_tap() {
	local file=$1 bin=$PG_SERVER_BIN perl=$PG_PERL_LIB regress=$PG_REGRESS config=$PG_CONFIG
	local -a run=(timeout "$TAP_TIMEOUT" runuser -u postgres --)
	if [ "$TAP_MAJOR" != 15 ]; then
		bin=/usr/lib/postgresql/$TAP_MAJOR/bin
		perl=/usr/lib/postgresql/$TAP_MAJOR/lib/pgxs/src/test/perl
		regress=/usr/lib/postgresql/$TAP_MAJOR/lib/pgxs/src/test/regress/pg_regress
		config=$bin/pg_config
		run=(bash -c 'ROOT=$0 WORK_DIR=$1; . "$ROOT/test/lib/common.sh"; . "$ROOT/test/lib/pg_roots.sh"; shift; IN_ROOT_EXEC=1 in_root_tap "$@"'
			"$ROOT" "$WORK_DIR" "$TAP_ROOTFS" timeout "$TAP_TIMEOUT" runuser -u postgres --)
	fi
	# The random workload (TAP 050): its default 5,000 transactions on 15, 2,000 on the other
	# majors (the CI time; CHROMA_SYNC_TXNS set by the caller wins everywhere)
	local -a workload=()
	if [ -n "${CHROMA_SYNC_TXNS:-}" ]; then
		workload=(CHROMA_SYNC_TXNS="$CHROMA_SYNC_TXNS")
	elif [ "$TAP_MAJOR" != 15 ]; then
		workload=(CHROMA_SYNC_TXNS=2000)
	fi
	bg_run "${run[@]}" env "${workload[@]}" \
		PATH="$bin:/usr/local/bin:/usr/bin:/bin" PERL5LIB="$perl" PG_REGRESS="$regress" PG_CONFIG="$config" \
		TESTDIR="$TAP_DIR" TESTDATADIR="$TAP_DIR/tmp_check" TESTLOGDIR="$TAP_DIR/tmp_check/log" CHROMA_URL="http://127.0.0.1:$TAP_PORT" CHROMA_SERVER="$TAP_KIND" \
		CHROMA_PORT="$TAP_PORT" CHROMA_PID="$CHROMA_PID" CHROMA_DATA_DIR="$TAP_DIR/chroma-data" \
		CHROMA_LOG="$TAP_CHROMA_LOG" CHROMA_CTL="$CHROMA_ROOT/test/lib/chroma_ctl.sh" \
		CHROMA_PIDS_DIR="$TAP_PIDS_DIR" CHROMA_ROOT="$CHROMA_ROOT" CHROMA_GLIBC_LIB="$CHROMA_GLIBC_LIB" \
		CHROMA_SYNC_ROOT="$TAP_SYNC_ROOT" TAP_LOG_DIR="$LOG_DIR" CHROMA_SYNC_PG_MAJOR="$TAP_MAJOR" \
		bash -c 'cd "$TESTDIR" && exec prove -v "$0"' "$file"
}

# Stops the clusters a TAP test left running under DIR (on another major: by signal, the
# host's pg_ctl does not serve another major's data directory).
stop_tap_pg() {
	local d=$1 f pid
	[ -d "$d" ] || return 0
	if [ "$TAP_MAJOR" = 15 ]; then
		stop_all_pg "$d"
		return
	fi
	while IFS= read -r f; do
		pid=$(head -n 1 "$f" 2>/dev/null)
		[[ $pid =~ ^[0-9]+$ ]] && kill -QUIT "$pid" 2>/dev/null
	done < <(find "$d" -name postmaster.pid 2>/dev/null)
}

# run_tap [MAJOR]: the TAP files of MAJOR's set (pg_tap_set; TAP=pattern narrows it) on the
# host's PostgreSQL 15 or in MAJOR's Debian root.
run_tap() {
	local major=${1:-15} files=("$ROOT"/test/t/*.pl) f name log rc ok bad set skip sfx=
	[ "$major" = 15 ] || sfx=-pg$major
	set=$(pg_tap_set "$major")
	skip=$(pg_tap_skip "$major")
	if [ ! -e "${files[0]}" ]; then
		note "tap$sfx: skipped, there is no test/t/*.pl yet"
		return
	fi
	TAP_MAJOR=$major
	TAP_DIR=$WORK_DIR/tap$sfx
	TAP_PIDS_DIR=$TAP_DIR/chroma-pids
	TAP_SYNC_ROOT=$ROOT
	TAP_CHROMA_LOG=$LOG_DIR/chroma-tap.log
	[ "$major" = 15 ] || TAP_CHROMA_LOG=$TAP_DIR/chroma-tap.log
	mkdir -p "$TAP_PIDS_DIR" || return
	CHROMA_PID_DIRS+=("$TAP_PIDS_DIR")
	if [ "$major" = 15 ]; then
		chown -R postgres: "$TAP_DIR"
	else
		TAP_ROOTFS=$(pg_root_dir "$(pg_root_suite "$major")")
		chown -R "$(pg_root_postgres_ids "$TAP_ROOTFS")" "$TAP_DIR"
	fi
	if [ "$major" != 15 ] || ! postgres_can_read_repo; then
		if [ ! -d "$WORK_DIR/repo" ] && ! stage "copy test files for the postgres user" tap-copy copy_repo_for_postgres; then
			broken "tap$sfx: could not copy the test files"
			return
		fi
		CHROMA_ROOT=$WORK_DIR/repo
		CHROMA_GLIBC_LIB=$CHROMA_ROOT/.cache/glibc13/root/usr/lib/x86_64-linux-gnu
		files=("$CHROMA_ROOT"/test/t/*.pl)
		[ "$major" = 15 ] || TAP_SYNC_ROOT=$CHROMA_ROOT
	fi
	TAP_KIND=${SERVERS%% *}
	TAP_PORT=$(free_port) || { broken "tap$sfx: no free port"; return; }
	CHROMA_PIDS_DIR=$TAP_PIDS_DIR
	if ! stage "start $TAP_KIND Chroma server for TAP$sfx (port $TAP_PORT)" chroma-start-tap$sfx tap_chroma_start; then
		broken "tap$sfx: Chroma server did not start"
		return
	fi
	for f in "${files[@]}"; do
		name=$(basename "$f" .pl)
		# shellcheck disable=SC2053
		[ "$set" = all ] || [[ $name == @($set) ]] || continue
		# (pg_tap_skip's files run on another major; TAP=pattern runs them here too)
		# shellcheck disable=SC2053
		[[ -z ${TAP:-} && -n $skip && $name == @($skip) ]] && continue
		# TAP=pattern runs only the matching test files (e.g. TAP='03*')
		# shellcheck disable=SC2053
		[[ -n "${TAP:-}" && $name != $TAP ]] && continue
		log=$LOG_DIR/tap$sfx-$name.log
		# A test may have stopped or replaced the server: give the next one the harness's own
		# server again (its pid is in CHROMA_PID, which a test may signal).
		if ! kill -0 "$CHROMA_PID" 2>/dev/null ||
			! curl -sf --max-time 2 "http://127.0.0.1:$TAP_PORT/api/v2/heartbeat" >/dev/null; then
			for pf in "$TAP_PIDS_DIR"/*; do
				[ -e "$pf" ] && CHROMA_PIDS_DIR=$TAP_PIDS_DIR bash "$CHROMA_CTL" stop "$(basename "$pf")" >/dev/null 2>&1
			done
			stage "restart Chroma server for TAP$sfx" chroma-start-tap$sfx tap_chroma_start || {
				broken "tap$sfx: Chroma server did not restart"
				return
			}
		fi
		STAGE_TAIL=0 stage "TAP$sfx $name" "tap$sfx-$name" run_one_tap "$f"
		rc=$?
		ok=$(grep -cE '^ok [0-9]+' "$log")
		bad=$(grep -E '^not ok [0-9]+' "$log" | grep -vc '# TODO')
		PASSED=$((PASSED + ok))
		FAILED=$((FAILED + bad))
		if [ $rc -ne 0 ] && [ "$bad" -eq 0 ]; then
			broken "tap$sfx $name: exited $rc$([ $rc -eq 124 ] && echo ' (timeout)') with no failed subtest"
		fi
		if [ $rc -ne 0 ]; then
			show_tail "$log" 30
			show_tail "$TAP_DIR/tmp_check/log/regress_log_$name" 60
			for n in "$TAP_DIR"/tmp_check/log/"${name}"_*.log; do show_tail "$n" 20; done
			show_tail "$TAP_CHROMA_LOG" 10
		fi
		# A file that cannot apply to this major says why (skip_all): shown, never a silent pass.
		if grep -qE '^1\.\.0 # [Ss]kip' "$log"; then
			note "tap$sfx $name: skipped: $(grep -m1 -E '^1\.\.0 # [Ss]kip' "$log" | sed -E 's/^1\.\.0 # [Ss]kip(ped)?:? *//')"
		else
			note "tap$sfx $name: $ok passed, $bad failed"
		fi
		stop_tap_pg "$TAP_DIR/tmp_check"
		sanitizer_collect "tap$sfx-$name" "$TAP_DIR"/tmp_check/log/"${name}"_*.log
	done
	for pf in "$TAP_PIDS_DIR"/*; do
		[ -e "$pf" ] && CHROMA_PIDS_DIR=$TAP_PIDS_DIR bash "$CHROMA_CTL" stop "$(basename "$pf")" >/dev/null 2>&1
	done
	[ "$major" = 15 ] || cp "$TAP_CHROMA_LOG" "$LOG_DIR/chroma-tap$sfx.log" 2>/dev/null
	if [ "$KEEP" != 1 ]; then
		cp -r "$TAP_DIR/tmp_check/log" "$LOG_DIR/tap$sfx-tmp_check" 2>/dev/null
		rm -rf "$TAP_DIR/tmp_check"
	fi
	CHROMA_PIDS_DIR=$WORK_DIR/chroma-pids
	TAP_MAJOR=15
}

# ---------------------------------------------------------------------- bench smoke

# The benchmark scripts with tiny sizes: proves they still work (the figures mean nothing).
run_bench_smoke() {
	if stage "benchmarks, smoke mode (bash bench/run.sh --smoke)" bench-smoke \
		bg_run timeout 900 env PG_PREFIX="$PG_PREFIX" bash "$ROOT/bench/run.sh" --smoke; then
		PASSED=$((PASSED + 1))
		note "bench smoke: 1 passed, 0 failed"
	else
		FAILED=$((FAILED + 1))
		note "bench smoke: 0 passed, 1 failed"
	fi
}

# ---------------------------------------------------------------------- clean-up

CLEANED=0
cleanup() {
	[ $CLEANED = 1 ] && return
	CLEANED=1
	if [ -d "${TAP_DIR:-}/tmp_check/log" ]; then
		cp -r "$TAP_DIR/tmp_check/log" "$LOG_DIR/tap-tmp_check" 2>/dev/null
	fi
	if [ "$KEEP" = 1 ]; then
		echo "KEEP=1: servers left running; data under $WORK_DIR"
		for d in "${PG_DATA_DIRS[@]}"; do
			[ -f "$d/postmaster.pid" ] &&
				echo "    postgres port $(sed -n 4p "$d/postmaster.pid"), socket dir $(dirname "$d")" \
					"(stop: runuser -u postgres -- $PG_BIN/pg_ctl -D $d stop)"
		done
		for d in "${CHROMA_PID_DIRS[@]}"; do
			for f in "$d"/*; do
				[ -e "$f" ] && echo "    chroma pid $(basename "$f"): $(cat "$f") (stop: bash $CHROMA_CTL stop $(basename "$f"))"
			done
		done
		return
	fi
	stop_all_pg "$WORK_DIR/tap"
	for d in "$WORK_DIR"/tap-pg*; do
		[ -d "$d" ] && TAP_MAJOR=${d##*-pg} stop_tap_pg "$d"
	done
	stop_all_chroma
	rmdir "$PG_ROOTS_DIR"/*"$WORK_DIR" 2>/dev/null
	rm -rf "$WORK_DIR"/pg-* "$WORK_DIR"/chroma-regress-* "$WORK_DIR"/regress-* "$WORK_DIR"/tap "$WORK_DIR"/tap-pg* "$WORK_DIR/repo"
}

PART_TIMES=()
# part_time NAME SECONDS: one entry of the closing note on the time of each part.
part_time() { PART_TIMES+=("$1 $(printf '%d:%02d' $(($2 / 60)) $(($2 % 60)))"); }

MAJORS_CHILDREN=()
MAJORS_OUTS=()
MAJORS_TS=()
# Waits for each further harness, shows its output and adds its counts, broken items and parts.
collect_majors_children() {
	local rc line p f i out
	for i in "${!MAJORS_CHILDREN[@]}"; do
		out=${MAJORS_OUTS[$i]}
		wait "${MAJORS_CHILDREN[$i]}"
		rc=$?
		MAJORS_CHILDREN[$i]=
		echo "---- PostgreSQL $(basename "$out" .out) (a harness of its own, started at [${MAJORS_TS[$i]}], its own clock):"
		grep -vE '^[0-9]+ passed, [0-9]+ failed$' "$out" | sed 's/^/  /'
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
		if [ -z "$line" ]; then
			broken "majors $(basename "$out" .out): its harness ended (exit $rc) without a count"
			continue
		fi
		p=${line%% passed*}
		f=${line#*passed, }
		f=${f%% failed*}
		PASSED=$((PASSED + p))
		FAILED=$((FAILED + f))
		while IFS= read -r line; do BROKEN+=("${line#broken: }"); done < <(grep -E '^broken: ' "$out")
		line=$(grep -E '^parts: ' "$out" | tail -n 1)
		line=${line#parts: }
		[ -z "$line" ] || IFS=, read -ra p <<<"${line//, /,}"
		[ -z "$line" ] || PART_TIMES+=("${p[@]}")
	done
	MAJORS_CHILDREN=()
}

FINISHED=0
on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	# A signal may arrive inside a stage, whose output goes to its log: back to the terminal.
	exec 1>&8 2>&9
	[ $IN_STAGE = 1 ] && echo "interrupted"
	if [ -n "$CHILD" ]; then
		kill -TERM "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	for p in "${ROOT_PIDS[@]}"; do
		pkill -TERM -P "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	for i in "${!MAJORS_CHILDREN[@]}"; do
		[ -n "${MAJORS_CHILDREN[$i]}" ] || continue
		kill -TERM "${MAJORS_CHILDREN[$i]}" 2>/dev/null
		wait "${MAJORS_CHILDREN[$i]}" 2>/dev/null
		[ -s "${MAJORS_OUTS[$i]}" ] && show_tail "${MAJORS_OUTS[$i]}" 30
		broken "majors $(basename "${MAJORS_OUTS[$i]}" .out): its harness was stopped"
	done
	cleanup
	sanitizer_summary
	if [ $FINISHED = 0 ]; then
		[ $rc -ne 0 ] && broken "harness interrupted (exit $rc)"
	fi
	echo "logs: $LOG_DIR"
	[ ${#BROKEN[@]} -gt 0 ] && printf 'broken: %s\n' "${BROKEN[@]}"
	[ ${#PART_TIMES[@]} -gt 0 ] && echo "parts: $(IFS=,; echo "${PART_TIMES[*]}" | sed 's/,/, /g')"
	echo "total time: $(elapsed)"
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ] && [ ${#BROKEN[@]} -eq 0 ] && exit 0
	exit 1
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------- main

echo "chroma_sync tests: suites=$SUITES servers=${SERVERS// /,}$([ $SANITIZE = 1 ] && echo ' sanitize') work dir=$WORK_DIR"
want_chroma=0 want_new=0
{ wants regress || wants tap || wants bench || wants majors || wants package; } && want_chroma=1
# TAP tests may start the new server themselves, whatever --server says.
{ [[ $SERVERS == *new* ]] || wants tap || wants majors; } && want_new=1
if ! stage "install dependencies" install install_deps "$want_chroma" "$want_new"; then
	broken "install: dependencies could not be installed"
	FINISHED=1
	exit 1
fi
chown -R postgres: "$LOG_DIR" "$CHROMA_PIDS_DIR"

built=1
if [ $SANITIZE = 1 ] && { wants regress || wants tap; }; then
	if ! stage "build and install the extension (SANITIZE=1)" build build_extension_sanitized; then
		broken "build: make WERROR=1 SANITIZE=1 / make install failed; regress and tap not run"
		built=0
	elif ! stage "sanitized servers: private bin directory" sanitizer prepare_sanitizer; then
		show_tail "$LOG_DIR/sanitizer.log" 20
		broken "sanitizer: the servers cannot be started with the ASan runtime"
		built=0
	elif ! stage "sanitizer positive control (a canary's bugs)" sanitizer-canary sanitizer_canary; then
		show_tail "$LOG_DIR/sanitizer-canary.log" 30
		broken "sanitizer: the canary's reports were not found; a run without reports would prove nothing"
		built=0
	fi
elif wants regress || wants tap || wants bench; then
	if ! stage "build and install the extension (WERROR=1)" build build_extension; then
		broken "build: make WERROR=1 / make install failed; regress, tap and bench not run"
		built=0
	fi
fi

# Other majors run in harnesses of their own alongside the rest (the host's suites), whose
# output is shown at the end and whose counts are added: TAP tests mostly wait, so several
# at a time fit two CPUs. PG_CONCURRENT_MAJORS lists the groups, space-separated, each a
# comma-separated list run one after the other in one harness; "checks" in a group runs the
# static, unit and fuzz suites there first, instead of here (default "18 checks,17,19": 18
# in one harness; static, unit, fuzz, 17 and 19 in another; 15 here). PG_CONCURRENT_MAJORS=
# (empty) runs everything here, in order. (18 and 19 share sid's root: pg_root_prepare
# makes it once, under a lock.)
CONCURRENT_DEFAULT="18 checks,17,19"
if wants majors && [ -n "${PG_CONCURRENT_MAJORS-$CONCURRENT_DEFAULT}" ]; then
	rest=" $PG_MAJORS "
	host_checks=
	for s in static unit fuzz; do wants $s && host_checks+=,$s; done
	groups=()
	group_checks=()
	for g in ${PG_CONCURRENT_MAJORS-$CONCURRENT_DEFAULT}; do
		sel=()
		gchecks=
		for m in ${g//,/ }; do
			if [ "$m" = checks ]; then
				gchecks=$host_checks
			elif [[ $rest == *" $m "* ]]; then
				sel+=("$m")
				rest=${rest/ $m / }
			fi
		done
		[ ${#sel[@]} -gt 0 ] || continue
		groups+=("$(IFS=,; echo "${sel[*]}")")
		group_checks+=("$gchecks")
		if [ -n "$gchecks" ]; then
			host_checks=
			for s in static unit fuzz; do SUITES=$(echo ",$SUITES," | sed "s/,$s,/,/; s/^,//; s/,$//"); done
		fi
	done
	rest=$(echo $rest)
	# with nothing else to do here, the first group stays in this harness
	if [ -z "$rest" ] && [ "$SUITES" = majors ] && [ ${#groups[@]} -gt 0 ] && [ -z "${group_checks[0]}" ]; then
		rest=${groups[0]//,/ }
		groups=("${groups[@]:1}")
		group_checks=("${group_checks[@]:1}")
	fi
	parts=${MAJOR_PARTS# }
	for i in "${!groups[@]}"; do
		list=${groups[$i]}
		out=$LOG_DIR/majors-${list//,/-}.out
		MAJORS_OUTS+=("$out")
		MAJORS_TS+=("$(elapsed)")
		echo "[$(elapsed)] ${group_checks[$i]:+${group_checks[$i]#,} and }PostgreSQL ${list//,/, } in a harness of its own alongside (its output at the end)"
		(cd / && exec env PG_CONCURRENT_MAJORS= bash "$ROOT/test/run_all.sh" --pg "$list" \
			--only "${parts// /,}${group_checks[$i]}" --server "$SERVERS" 8>&- 9>&-) >"$out" 2>&1 </dev/null &
		MAJORS_CHILDREN+=($!)
	done
	PG_MAJORS=$rest
fi

t=$SECONDS
wants static && run_static
wants unit && run_unit
wants fuzz && run_fuzz
if [ $built = 1 ]; then
	if wants regress; then
		for kind in $SERVERS; do run_regress "$kind"; done
	fi
	wants tap && run_tap
	wants bench && run_bench_smoke
fi
if [ -n "$PG_MAJORS_GIVEN" ]; then
	[ "$SUITES" = majors ] || part_time checks $((SECONDS - t))
elif [ "$SUITES" != majors ]; then
	part_time pg15 $((SECONDS - t))
fi
wants majors && [ -n "$PG_MAJORS" ] && run_majors
[ ${#MAJORS_CHILDREN[@]} -gt 0 ] && collect_majors_children
# After the other harnesses: the package suite builds in the same sid root.
if wants package; then
	t=$SECONDS
	run_package
	part_time package $((SECONDS - t))
fi

FINISHED=1
exit 0

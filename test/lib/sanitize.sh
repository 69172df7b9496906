# shellcheck shell=bash
# The sanitizer run of test/run_all.sh (--sanitize); sourced after common.sh.
#
# The extension is built with SANITIZE=1 (-fsanitize=address,undefined). The PostgreSQL
# binaries are not instrumented, so the ASan runtime must be the first library of every
# server process: LD_PRELOAD, set only for the servers. A private copy of the bin
# directory ($SAN_ROOT/usr/lib/postgresql/15/bin) holds copies of the client programs and,
# as "postgres", a script that sets LD_PRELOAD, ASAN_OPTIONS and UBSAN_OPTIONS and execs
# the real server. pg_ctl and initdb find "postgres" next to themselves (after resolving
# symlinks, hence copies), and "pg_ctl restart" runs the program recorded in
# postmaster.opts (the wrapper: see exec -a below), so every server started through that
# directory (start_pg, and every TAP node: PostgreSQL::Test::Cluster runs pg_ctl and initdb
# from PATH) is sanitized, while pg_ctl, psql, pg_regress and prove are not.
# test/lib/sanitizer_preload.c is preloaded too: it explains why pg_ctl with LD_PRELOAD of
# the runtime hung.
#
# Where reports go: ASan writes report.PID files in $SAN_LOG_DIR. gcc's UBSan runtime is a
# separate library whose reports go to the server's stderr, that is its log; after each
# suite or TAP file, sanitizer_collect copies the reports it finds in the server logs to
# files and moves every new report file to $SAN_LOG_DIR/LABEL. sanitizer_summary counts
# and prints them; each report is a failure. A positive control (sanitizer_canary) checks
# first that a bug in a sanitized library does produce both kinds of report.

SANITIZE=${SANITIZE:-0}
SAN_LOG_DIR=$LOG_DIR/sanitizer
SAN_ROOT=$WORK_DIR/sanitizer-pg
SAN_SERVERS_LOG=$LOG_DIR/sanitizer-servers.log
# A sanitizer's report in a server log: ASan/UBSan/LSan error and warning heads, UBSan's
# "file:line:col: runtime error: ..." lines.
SAN_REPORT_RE='^==[0-9]+==(ERROR|WARNING): |^[^ ]+:[0-9]+:[0-9]+: runtime error: |^WARNING: [A-Za-z]+Sanitizer'

build_extension_sanitized() {
	cd "$ROOT" &&
		make PG_CONFIG="$PG_CONFIG" clean &&
		make -j"$(nproc)" PG_CONFIG="$PG_CONFIG" WERROR=1 SANITIZE=1 &&
		make PG_CONFIG="$PG_CONFIG" install
}

# The path of the ASan runtime the installed library was linked with (the compiler's own).
asan_runtime() {
	local so
	so=$("$PG_CONFIG" --pkglibdir)/chroma_sync.so
	ldd "$so" | awk 'index($1, "libasan.so") == 1 && $3 ~ /^\// { print $3; exit }'
}

# Builds $SAN_ROOT: the bin directory (copies; "postgres" the wrapper), the preloaded
# helper, and symlinks to the real share and lib directories, which the relocatable
# programs (initdb, pg_config) look up relative to their own location.
prepare_sanitizer() {
	local rt real_bin=$PG_BIN bin=$SAN_ROOT/usr/lib/postgresql/$PG_MAJOR/bin f cc
	local asan_opts ubsan_opts
	rt=$(asan_runtime)
	if [ -z "$rt" ] || [ ! -r "$rt" ]; then
		echo "chroma_sync.so is not linked with an ASan runtime: was it built with SANITIZE=1?"
		return 1
	fi
	echo "ASan runtime: $rt"
	rm -rf "$SAN_ROOT" && mkdir -p "$bin" "$SAN_ROOT/usr/share" "$SAN_ROOT/lib" || return 1
	mkdir -p "$SAN_LOG_DIR" && touch "$SAN_SERVERS_LOG" &&
		chown postgres: "$SAN_LOG_DIR" "$SAN_SERVERS_LOG" || return 1
	# detect_leaks=0: PostgreSQL frees by memory context, and a backend's exit leaves its
	# memory to the kernel, so leak reports would be noise. abort_on_error: an ASan error
	# kills the process with SIGABRT, which the postmaster treats as a crash (an exit
	# status of 1 would pass as a FATAL). UBSan goes on after a report, so that every
	# report of a run is written. quarantine_size_mb: the default 256 MB of freed memory
	# held back would count in the backends' peak memory (TAP 002_memory).
	asan_opts="log_path=$SAN_LOG_DIR/report:detect_leaks=0:abort_on_error=1:halt_on_error=1"
	asan_opts+=":quarantine_size_mb=64:disable_coredump=1"
	ubsan_opts="log_path=$SAN_LOG_DIR/report:print_stacktrace=1:halt_on_error=0"
	cc=$("$PG_CONFIG" --cc)
	$cc -shared -fPIC -O2 -DSAN_UBSAN_OPTIONS="\"$ubsan_opts\"" \
		-o "$SAN_ROOT/lib/sanitizer_preload.so" "$ROOT/test/lib/sanitizer_preload.c" || return 1
	for f in "$real_bin"/*; do
		[ "$(basename "$f")" = postgres ] && continue
		cp -p "$f" "$bin/" || return 1
	done
	ln -s "$PG_PREFIX/usr/lib/postgresql/$PG_MAJOR/lib" "$SAN_ROOT/usr/lib/postgresql/$PG_MAJOR/lib" &&
		ln -s "$PG_PREFIX/usr/share/postgresql" "$SAN_ROOT/usr/share/postgresql" &&
		ln -s "$PG_PREFIX/usr/share/locale" "$SAN_ROOT/usr/share/locale" || return 1
	# exec -a: the server takes its argv[0] (this script) as its own path, and records it in
	# postmaster.opts, where "pg_ctl restart" finds the program to start; share and lib
	# are found through the symlinks above.
	cat >"$bin/postgres" <<-EOF
		#!/bin/bash
		# test/run_all.sh --sanitize: the server, with the ASan runtime preloaded
		LD_PRELOAD="$rt:$SAN_ROOT/lib/sanitizer_preload.so\${LD_PRELOAD:+:\$LD_PRELOAD}"
		ASAN_OPTIONS="$asan_opts"
		UBSAN_OPTIONS="$ubsan_opts"
		export LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
		echo "\$\$ \$*" 2>/dev/null >>"$SAN_SERVERS_LOG"
		exec -a "\$0" "$real_bin/postgres" "\$@"
	EOF
	chmod 755 "$bin/postgres" && chmod -R a+rX "$SAN_ROOT" || return 1
	# The wrapper must start a server that answers, and pg_ctl must accept it.
	as_postgres "$bin/postgres" -V || return 1
	as_postgres "$bin/pg_ctl" --version || return 1
	PG_SERVER_BIN=$bin
}

# The positive control: test/lib/sanitizer_canary.c, built with the sanitizer flags, is
# loaded into a server started through the private bin directory and commits a signed
# overflow and a heap overflow; both reports must be found. They are moved to
# $LOG_DIR/sanitizer-canary, where they do not count.
sanitizer_canary() {
	local so=$SAN_ROOT/lib/sanitizer_canary.so dir=$LOG_DIR/sanitizer-canary cc rc=0 f
	local -a psql
	cc=$("$PG_CONFIG" --cc)
	$cc -fsanitize=address,undefined -fno-omit-frame-pointer -O1 -g -fPIC -shared \
		-isystem "$("$PG_CONFIG" --includedir-server)" -o "$so" "$ROOT/test/lib/sanitizer_canary.c" &&
		chmod a+r "$so" || return 1
	if compgen -G "$SAN_LOG_DIR/report.*" >/dev/null; then
		echo "reports before the canary ran:" "$SAN_LOG_DIR"/report.*
		return 1
	fi
	start_pg sanitizer-canary http://127.0.0.1:9 || return 1
	psql=("$PG_BIN/psql" -X -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres)
	as_postgres "${psql[@]}" -c "CREATE FUNCTION sanitizer_canary(int) RETURNS int
		AS '$so' LANGUAGE C STRICT" || rc=1
	if [ $rc = 0 ] && as_postgres "${psql[@]}" -c "SELECT sanitizer_canary(1)"; then
		echo "the canary's backend did not abort"
		rc=1
	fi
	# a shutdown requested during the crash recovery that follows can hang (PostgreSQL 15):
	# wait until the server is back
	for _ in $(seq 120); do
		as_postgres "${psql[@]}" -c 'SELECT 1' >/dev/null 2>&1 && break
		sleep 0.5
	done
	stop_pg "$PG_DIR/data"
	sanitizer_collect canary "$PG_LOG" || rc=1
	rm -rf "$dir" && mv "$SAN_LOG_DIR/canary" "$dir" || return 1
	for f in "$dir"/*; do
		echo "---- $f"
		cat "$f"
	done
	grep -q 'ERROR: AddressSanitizer: heap-buffer-overflow' "$dir"/report.* 2>/dev/null ||
		{ echo "no ASan report file from the canary"; rc=1; }
	grep -q 'sanitizer_canary.c:[0-9]*:[0-9]*: runtime error: signed integer overflow' "$dir"/* ||
		{ echo "no UBSan report from the canary"; rc=1; }
	return $rc
}

# sanitizer_collect LABEL [SERVER_LOG...]: the reports in the server logs are copied to
# files (stderr-LOGNAME), and they and the report files written since the last call are
# moved to $SAN_LOG_DIR/LABEL; prints a line if there are any.
sanitizer_collect() {
	local label=$1 files=() f out n=0
	shift
	[ "$SANITIZE" = 1 ] && [ -d "$SAN_LOG_DIR" ] || return 0
	mkdir -p "$SAN_LOG_DIR/$label" || return 1
	for f in "$@"; do
		[ -s "$f" ] || continue
		out=$SAN_LOG_DIR/$label/stderr-$(basename "$f")
		# the report lines and what follows them indented (stack frames, shadow bytes)
		awk -v re="$SAN_REPORT_RE" '
			$0 ~ re { print; keep = 1; next }
			keep && (/^ / || /^0x[0-9a-f]+: note: /) { print; next }
			{ keep = 0 }' "$f" >"$out"
		if [ -s "$out" ]; then n=$((n + 1)); else rm -f "$out"; fi
	done
	for f in "$SAN_LOG_DIR"/report.*; do
		[ -f "$f" ] && files+=("$f")
	done
	[ ${#files[@]} -eq 0 ] || mv "${files[@]}" "$SAN_LOG_DIR/$label/" || return 1
	n=$((n + ${#files[@]}))
	if [ $n -eq 0 ]; then
		rmdir "$SAN_LOG_DIR/$label" 2>/dev/null
		return 0
	fi
	note "sanitizer: $n report file(s) during $label"
}

# True when the server at PGHOST/PGPORT runs with the ASan runtime and chroma_sync loaded:
# a backend's own memory map.
sanitizer_server_ok() {
	local maps
	maps=$(as_postgres "$PG_BIN/psql" -X -At -h "$1" -p "$2" -U postgres -d postgres \
		-c "SELECT pg_read_file('/proc/self/maps')") || return 1
	grep -q '/libasan\.so' <<<"$maps" && grep -q '/chroma_sync\.so' <<<"$maps"
}

# The number of reports in a file: ASan errors, UBSan "runtime error"s; at least 1.
sanitizer_count_reports() {
	local n
	n=$(grep -cE "$SAN_REPORT_RE" "$1")
	[ "$n" -gt 0 ] || n=1
	echo "$n"
}

# Counts and prints every report; each report is a failure.
sanitizer_summary() {
	local files=() f n total=0 starts
	[ "$SANITIZE" = 1 ] && [ -d "$SAN_LOG_DIR" ] || return 0
	sanitizer_collect unattributed
	while IFS= read -r f; do files+=("$f"); done < <(find "$SAN_LOG_DIR" -type f | sort)
	starts=$(grep -cvE ' (-V|--boot|--single|--check|-C)( |$)' "$SAN_SERVERS_LOG" 2>/dev/null)
	echo "sanitizer: ${starts:-0} server start(s) with the ASan runtime preloaded"
	for f in "${files[@]}"; do
		n=$(sanitizer_count_reports "$f")
		total=$((total + n))
		echo "    ---- ${f#"$SAN_LOG_DIR"/}: $n report(s), first 80 lines"
		head -n 80 "$f" | sed 's/^/    | /'
		broken "sanitizer: $n report(s) in ${f#"$SAN_LOG_DIR"/}"
		FAILED=$((FAILED + n - 1))
	done
	echo "sanitizer reports: $total in ${#files[@]} file(s) (under $SAN_LOG_DIR)"
}

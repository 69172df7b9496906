# shellcheck shell=bash
# Shared functions of the test harness; sourced by test/run_all.sh (bash).
#
# Expects ROOT (repository root) and LOG_DIR (where stage logs go) to be set by the caller.
# Everything that needs root (apt, make install, running servers as postgres) assumes the
# caller runs as root.

PG_MAJOR=15
# PG_PREFIX (empty by default) points at a relocated copy of the PostgreSQL tree
# (PG_PREFIX/usr/lib/postgresql/15, .../share/..., .../include/...), so that several
# checkouts can build, install and test side by side without sharing one installation.
PG_PREFIX=${PG_PREFIX:-}
PG_BIN=$PG_PREFIX/usr/lib/postgresql/$PG_MAJOR/bin
PG_CONFIG=$PG_BIN/pg_config
# Where the initdb and pg_ctl that start servers live (a private copy under --sanitize).
PG_SERVER_BIN=$PG_BIN
PG_PERL_LIB=$PG_PREFIX/usr/lib/postgresql/$PG_MAJOR/lib/pgxs/src/test/perl
PG_REGRESS=$PG_PREFIX/usr/lib/postgresql/$PG_MAJOR/lib/pgxs/src/test/regress/pg_regress
CHROMA_CTL=$ROOT/test/lib/chroma_ctl.sh
GLIBC_DIR=$ROOT/.cache/glibc13
CHROMA_GLIBC_LIB=$GLIBC_DIR/root/usr/lib/x86_64-linux-gnu
export CHROMA_GLIBC_LIB

APT_PACKAGES=(
	postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
	libcurl4-openssl-dev libipc-run-perl clang-14 libclang-rt-14-dev
	build-essential perl curl ca-certificates nginx openssl cppcheck
	postgresql-$PG_MAJOR-plpgsql-check
)

note() { echo "    $*"; }

# Runs "$@" as the postgres user, from a directory that user can enter (fds 8 and 9, the
# harness's terminal, are not handed to servers started this way).
as_postgres() {
	(cd / && runuser -u postgres -- "$@" 8>&- 9>&-)
}

# A TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Proto => "tcp", Listen => 1) or die "no free port: $!\n";
		print $s->sockport, "\n";'
}

# Prints the last lines of a file under a header, if the file exists.
show_tail() {
	local file=$1 lines=${2:-40}
	[ -s "$file" ] || return 0
	echo "    ---- last $lines lines of $file"
	tail -n "$lines" "$file" | sed 's/\x1b\[[0-9;]*m//g; s/^/    | /'
}

package_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# install_deps [WANT_CHROMA [WANT_NEW]]: apt packages, and unless WANT_CHROMA is 0, node,
# the npm trees of both Chroma servers and (unless WANT_NEW is 0) the new server's glibc.
install_deps() {
	local want_chroma=${1:-1} want_new=${2:-1} missing=() p
	[ "$want_chroma" = 1 ] || want_new=0
	for p in "${APT_PACKAGES[@]}"; do
		package_installed "$p" || missing+=("$p")
	done
	command -v node >/dev/null || missing+=(nodejs)
	command -v npm >/dev/null || missing+=(npm)
	# The new server's glibc comes from Debian 13; its archive key must be known.
	if [ "$want_new" = 1 ] && [ ! -e "$CHROMA_GLIBC_LIB/ld-linux-x86-64.so.2" ] &&
		[ ! -e /usr/share/keyrings/debian-archive-trixie-stable.gpg ]; then
		missing+=(debian-archive-keyring)
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		echo "installing: ${missing[*]}"
		apt_install "${missing[@]}" || return 1
	else
		echo "apt packages already installed"
	fi
	[ "$want_chroma" = 1 ] || return 0
	node --version || return 1
	if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
		echo "WARNING: chromadb wants node >= 20, found $(node --version)"
	fi
	npm_install old || return 1
	npm_install new || return 1
	if [ "$want_new" = 1 ]; then
		prepare_glibc || return 1
	fi
}

# apt-get install without starting the packages' services (the tests start their own
# servers on free ports; a stray nginx or PostgreSQL on the default ports is not wanted).
# Harnesses running side by side (PG_CONCURRENT_MAJORS) take turns: apt holds its lists
# lock for one process at a time, and would fail the other at once.
apt_install() {
	(
		flock -w 900 7 || { echo "apt_install: waited 900 s for another harness's apt-get"; exit 1; }
		apt_install_locked "$@"
	) 7>/var/lock/chroma_sync-apt.lock
}
apt_install_locked() {
	local policy=/usr/sbin/policy-rc.d added=0 rc=0
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy && added=1
	fi
	apt-get -o Acquire::Retries=3 update &&
		DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y \
			--no-install-recommends "$@" </dev/null || rc=1
	[ $added = 0 ] || rm -f $policy
	return $rc
}

# npm ci in test/chroma/KIND unless node_modules already matches package-lock.json.
npm_install() {
	local dir=$ROOT/test/chroma/$1 want stamp
	stamp=$dir/node_modules/.harness-lock-sha256
	want=$(sha256sum "$dir/package-lock.json" | cut -c1-64)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
		[ -f "$dir/node_modules/chromadb/dist/cli.mjs" ]; then
		echo "test/chroma/$1: node_modules up to date"
		return 0
	fi
	echo "test/chroma/$1: npm ci"
	(cd "$dir" && npm ci --no-audit --no-fund </dev/null) || return 1
	echo "$want" >"$stamp"
}

# The Debian archive this machine installs from: the first URIs: line of the deb822 sources,
# else the first deb line of sources.list (security archives skipped).
archive_uri() {
	local uri=""
	if [ -r /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(awk 'tolower($1) == "uris:" && $2 !~ /security/ { print $2; exit }' \
			/etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" {
				for (i = 2; i <= NF; i++)
					if ($i ~ /^[a-z+]+:\/\//) { if ($i !~ /security/) { print $i; found = 1 } break }
				if (found) exit
			}' /etc/apt/sources.list)
	fi
	[ -n "$uri" ] || return 1
	echo "$uri"
}

# Debian 13's libc6 unpacked under .cache/glibc13 (the new Chroma server needs glibc >= 2.38).
prepare_glibc() {
	local tmp uri ver
	local -a opts
	if [ -x "$CHROMA_GLIBC_LIB/ld-linux-x86-64.so.2" ] &&
		"$CHROMA_GLIBC_LIB/ld-linux-x86-64.so.2" --version >/dev/null 2>&1; then
		echo "glibc for the new server: cached in $GLIBC_DIR"
		return 0
	fi
	uri=$(archive_uri) || { echo "cannot find the Debian archive in /etc/apt sources"; return 1; }
	echo "downloading Debian 13 libc6 from the machine's archive"
	tmp=$GLIBC_DIR.tmp
	rm -rf "$tmp" && mkdir -p "$tmp/etc" "$tmp/lists/partial" "$tmp/archives/partial" "$tmp/root" || return 1
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" >"$tmp/etc/sources.list"
	opts=(
		-o Dir::Etc::SourceList="$tmp/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o Dir::State::Lists="$tmp/lists" -o Dir::Cache::Archives="$tmp/archives"
		-o APT::Sandbox::User=root -o Acquire::Retries=3
	)
	apt-get "${opts[@]}" update </dev/null || return 1
	(cd "$tmp" && apt-get "${opts[@]}" download libc6 </dev/null) || return 1
	dpkg -x "$tmp"/libc6_*.deb "$tmp/root" || return 1
	ver=$("$tmp/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --version | head -n 1) || return 1
	echo "$ver"
	rm -rf "$tmp/lists" "$tmp/archives" "$GLIBC_DIR"
	mv "$tmp" "$GLIBC_DIR"
}

build_extension() {
	cd "$ROOT" &&
		make PG_CONFIG="$PG_CONFIG" clean &&
		make -j"$(nproc)" PG_CONFIG="$PG_CONFIG" WERROR=1 &&
		make PG_CONFIG="$PG_CONFIG" install
}

# Every Chroma server the harness (or a TAP test, through chroma_ctl.sh) starts is recorded
# in a pids dir, so cleanup stops exactly those.
CHROMA_PID_DIRS=()

# start_chroma KIND DIR PORT LOGFILE [USER]: sets CHROMA_PID.
start_chroma() {
	local kind=$1 dir=$2 port=$3 log=$4 user=${5:-root}
	if [ "$user" = postgres ]; then
		CHROMA_PID=$(as_postgres env CHROMA_PIDS_DIR="$CHROMA_PIDS_DIR" CHROMA_ROOT="$CHROMA_ROOT" \
			CHROMA_GLIBC_LIB="$CHROMA_GLIBC_LIB" bash "$CHROMA_ROOT/test/lib/chroma_ctl.sh" start "$kind" "$dir" "$port" "$log")
	else
		CHROMA_PID=$(CHROMA_PIDS_DIR="$CHROMA_PIDS_DIR" CHROMA_ROOT="$CHROMA_ROOT" bash "$CHROMA_CTL" start "$kind" "$dir" "$port" "$log" 8>&- 9>&-)
	fi
}

stop_chroma() {
	CHROMA_PIDS_DIR=$CHROMA_PIDS_DIR bash "$CHROMA_CTL" stop "$1"
}

# Stops every server still recorded in the pids dirs.
stop_all_chroma() {
	local d f
	for d in "${CHROMA_PID_DIRS[@]}"; do
		for f in "$d"/*; do
			[ -e "$f" ] || continue
			CHROMA_PIDS_DIR=$d bash "$CHROMA_CTL" stop "$(basename "$f")" || true
		done
	done
}

PG_DATA_DIRS=()

# start_pg NAME CHROMA_URL: a fresh cluster owned by postgres in $WORK_DIR/pg-NAME, listening
# on 127.0.0.1 and on a socket in that directory, logging to $LOG_DIR/pg-NAME.log.
# Sets PG_DIR, PG_PORT, PG_LOG.
start_pg() {
	local name=$1 url=$2
	PG_DIR=$WORK_DIR/pg-$name
	PG_PORT=$(free_port) || return 1
	PG_LOG=$LOG_DIR/pg-$name.log
	mkdir -p "$PG_DIR" && chown postgres: "$PG_DIR" && chmod 700 "$PG_DIR" || return 1
	as_postgres "$PG_SERVER_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 || return 1
	cat >>"$PG_DIR/data/postgresql.conf" <<-EOF

		# test/run_all.sh
		port = $PG_PORT
		listen_addresses = '127.0.0.1'
		unix_socket_directories = '$PG_DIR'
		shared_preload_libraries = 'chroma_sync'
		chroma_sync.url = '$url'
		max_worker_processes = 16
		logging_collector = off
		log_line_prefix = '%m [%p] %q%a '
	EOF
	PG_DATA_DIRS+=("$PG_DIR/data")
	as_postgres "$PG_SERVER_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_LOG" -w -t 60 start
}

stop_pg() {
	local data=$1
	[ -f "$data/postmaster.pid" ] || return 0
	as_postgres "$PG_BIN/pg_ctl" -D "$data" -w -t 30 -m fast stop ||
		as_postgres "$PG_BIN/pg_ctl" -D "$data" -m immediate stop
}

# Stops every cluster the harness started, and any a TAP test left running under DIR.
stop_all_pg() {
	local d f
	for d in "${PG_DATA_DIRS[@]}"; do
		stop_pg "$d" >/dev/null 2>&1 || true
	done
	for d in "$@"; do
		[ -d "$d" ] || continue
		while IFS= read -r f; do
			as_postgres "$PG_BIN/pg_ctl" -D "$(dirname "$f")" -m immediate stop >/dev/null 2>&1 || true
		done < <(find "$d" -name postmaster.pid 2>/dev/null)
	done
}

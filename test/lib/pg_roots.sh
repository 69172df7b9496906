# shellcheck shell=bash
# Other PostgreSQL majors for the test harness: a Debian root per suite made with
# debootstrap from the machine's own Debian archive (trixie ships 17, sid 18, experimental
# 19), cached outside the clone under /var/cache/chroma_sync/pgroots (PG_ROOTS_DIR), so a
# fresh clone on the same machine reuses them, where the extension is built and pg_regress runs
# against a server started inside the root. Sourced by test/run_all.sh after common.sh.
#
# The roots share the host's network: a root's server reaches the Chroma server the
# harness starts on the host. Every command in a root runs in its own mount namespace
# (unshare), so /proc and /dev are never left mounted.

PG_ROOTS_DIR=${PG_ROOTS_DIR:-/var/cache/chroma_sync/pgroots}
PG_OTHER_MAJORS="17 18 19"

# What the TAP tests run on each major (patterns over the file names of test/t/*.pl, without
# .pl; "all" is every file), less what pg_tap_skip names. The mirror set: the worker, its
# recovery, DDL, replication and the random workload (010-029 and 050); it runs on every
# major. Every other file runs on one major: 15 (the host) runs the 0xx, 2xx and 3xx files (the
# SQL API, the worker's failure modes, partitions, several requests in flight), 18 the
# red-team files 100-199 (filters, DDL, casts, privileges: the parser and catalog paths a
# major changes) and the long ones 005, 031, 034, 040, 041, 292, 296, 300 and the lent
# steps' red-team files 304-311, so the
# two harnesses end together; 19 adds the partitioned mirror's files to the mirror set (its scan API
# differs).
PG_MIRROR_TAP='01[0-9]_*|02[0-9]_*|050_*'
PG_PARTITION_TAP='20[1-5]_*|21[1-9]_*|22[0-4]_*|2[67][0-9]_*'
PG_RED_TEAM_TAP='1[0-9][0-9]_*'
PG_18_ONLY_TAP='005_*|031_*|034_*|04[01]_*|29[26]_*|300_*|30[4-9]_*|31[01]_*'
pg_tap_set() {
	case $1 in
	15) echo all ;;
	17) echo "$PG_MIRROR_TAP" ;;
	18) echo "$PG_MIRROR_TAP|$PG_RED_TEAM_TAP|$PG_18_ONLY_TAP" ;;
	19) echo "$PG_MIRROR_TAP|$PG_PARTITION_TAP" ;;
	*) return 1 ;;
	esac
}
pg_tap_skip() {
	case $1 in
	15) echo "$PG_18_ONLY_TAP|$PG_RED_TEAM_TAP" ;;
	esac
}

# The servers pg_regress runs against on each major (the first of --server's list on the
# others).
pg_regress_servers() {
	case $1 in
	15 | 18) echo "old new" ;;
	*) echo "${2%% *}" ;;
	esac
}

# What the TAP tests need in a root besides PostgreSQL (node, for the Chroma servers, is the
# host's binary mounted into the root; see in_root_tap).
PG_ROOT_TAP_PACKAGES=(libipc-run-perl perl curl ca-certificates openssl nginx procps iproute2)

# The Debian suite whose root carries MAJOR (18 and 19 share sid's root; 19 from experimental).
pg_root_suite() {
	case $1 in
	17) echo trixie ;;
	18 | 19) echo sid ;;
	*) return 1 ;;
	esac
}

# The majors a suite's root carries.
pg_root_majors() {
	case $1 in
	trixie) echo 17 ;;
	sid) echo 18 19 ;;
	esac
}

pg_root_dir() { echo "$PG_ROOTS_DIR/$1"; }

# in_root DIR CMD...: CMD as root inside DIR, with /proc and /dev mounted for it alone.
in_root() {
	local dir=$1
	shift
	unshare --mount --propagation private -- /bin/sh -c '
		dir=$1; shift
		mount -t proc proc "$dir/proc" && mount --rbind /dev "$dir/dev" || exit 1
		exec chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
	' sh "$dir" "$@" 8>&- 9>&-
}

# in_root_tap DIR CMD...: like in_root, with the host's $WORK_DIR (the repository copy, TAP
# directories and logs) mounted at the same path and the host's node as /usr/local/bin/node.
# IN_ROOT_EXEC=1: the caller's shell is replaced (a signal to it then reaches the command).
in_root_tap() {
	local dir=$1 node
	shift
	node=$(readlink -f "$(command -v node)") || return 1
	mkdir -p "$dir$WORK_DIR" "$dir/usr/local/bin" && touch "$dir/usr/local/bin/node" || return 1
	mkdir -p "$dir/.oldroot" || return 1
	# pivot_root, not chroot alone: a chrooted process may not make a user namespace, which
	# test/lib/private_ns.pl needs.
	${IN_ROOT_EXEC:+exec} unshare --mount --propagation private -- /bin/sh -c '
		dir=$1 work=$2 node=$3; shift 3
		mount --bind "$dir" "$dir" && mount -t proc proc "$dir/proc" && mount --rbind /dev "$dir/dev" &&
			mount --bind "$work" "$dir$work" && mount --bind "$node" "$dir/usr/local/bin/node" &&
			cd "$dir" && pivot_root . .oldroot || exit 1
		exec chroot . /usr/bin/env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
			/bin/sh -c "umount -l /.oldroot && exec \"\$@\"" sh "$@"
	' sh "$dir" "$WORK_DIR" "$node" "$@" 8>&- 9>&-
}

# pg_root_locked SUITE CMD...: CMD while holding SUITE's lock (harnesses running side by side
# share a root: 18's and 19's is sid's).
pg_root_locked() {
	local suite=$1
	shift
	mkdir -p "$PG_ROOTS_DIR" || return 1
	(
		flock 7 || exit 1
		"$@"
	) 7>"$PG_ROOTS_DIR/.lock-$suite"
}

# pg_root_tap_prepare SUITE: the packages the TAP tests need added to a cached root (its own
# stamp, so a root made before is completed in place, not made again).
pg_root_tap_prepare() { pg_root_locked "$1" pg_root_tap_prepare_unlocked "$1"; }
pg_root_tap_prepare_unlocked() {
	local suite=$1 dir want
	dir=$(pg_root_dir "$suite")
	want="chroma_sync tap packages v1: ${PG_ROOT_TAP_PACKAGES[*]}"
	if [ -f "$dir/.chroma-sync-tap" ] && [ "$(cat "$dir/.chroma-sync-tap")" = "$want" ]; then
		echo "root $suite: TAP packages already installed"
		return 0
	fi
	echo "root $suite: installing ${PG_ROOT_TAP_PACKAGES[*]}"
	in_root "$dir" apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Retries=3 update </dev/null &&
		in_root "$dir" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y \
			--no-install-recommends "${PG_ROOT_TAP_PACKAGES[@]}" </dev/null || return 1
	in_root "$dir" apt-get clean
	echo "$want" >"$dir/.chroma-sync-tap"
}

# The uid:gid of the postgres user of a root (it differs from the host's).
pg_root_postgres_ids() {
	awk -F: '$1 == "postgres" { print $3 ":" $4 }' "$1/etc/passwd"
}

# pg_root_prepare SUITE: the suite's root with its PostgreSQL majors, server headers, libcurl
# and a compiler; done once, then reused (a stamp file names what the root holds).
pg_root_prepare() { pg_root_locked "$1" pg_root_prepare_unlocked "$1"; }
pg_root_prepare_unlocked() {
	local suite=$1 dir tmp uri majors m want pkgs=() exp_pkgs=()
	dir=$(pg_root_dir "$suite")
	majors=$(pg_root_majors "$suite")
	want="chroma_sync root v1: $suite $majors"
	if [ -f "$dir/.chroma-sync-root" ] && [ "$(cat "$dir/.chroma-sync-root")" = "$want" ]; then
		echo "root $suite ($majors): cached in $dir"
		return 0
	fi
	command -v debootstrap >/dev/null || apt_install debootstrap || return 1
	uri=$(archive_uri) || { echo "cannot find the Debian archive in /etc/apt sources"; return 1; }
	tmp=$dir.tmp
	rm -rf "$tmp" "$dir" && mkdir -p "$PG_ROOTS_DIR" || return 1
	echo "debootstrap $suite from the machine's archive"
	debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
		"$suite" "$tmp" "$uri" </dev/null || return 1
	# Packages must not start services (the harness starts its own servers on free ports),
	# nor create a default cluster.
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d" && chmod 755 "$tmp/usr/sbin/policy-rc.d"
	mkdir -p "$tmp/etc/postgresql-common" &&
		echo "create_main_cluster = false" >"$tmp/etc/postgresql-common/createcluster.conf" || return 1
	for m in $majors; do
		if [ "$m" = 19 ]; then
			exp_pkgs+=("postgresql-$m" "postgresql-server-dev-$m")
		else
			pkgs+=("postgresql-$m" "postgresql-server-dev-$m")
		fi
	done
	[ ${#exp_pkgs[@]} -eq 0 ] || echo "deb $uri experimental main" >"$tmp/etc/apt/sources.list.d/experimental.list"
	# sid's and experimental's Release files may be past their Valid-Until date.
	in_root "$tmp" apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Retries=3 update </dev/null &&
		in_root "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y \
			--no-install-recommends "${pkgs[@]}" libcurl4-openssl-dev build-essential </dev/null || return 1
	if [ ${#exp_pkgs[@]} -gt 0 ]; then
		in_root "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y \
			--no-install-recommends -t experimental "${exp_pkgs[@]}" </dev/null || return 1
	fi
	in_root "$tmp" apt-get clean
	echo "$want" >"$tmp/.chroma-sync-root"
	mv "$tmp" "$dir"
}

# pg_root_build MAJOR: copies the sources into the root and builds and installs the
# extension there with WERROR=1.
pg_root_build() {
	local major=$1 dir src
	dir=$(pg_root_dir "$(pg_root_suite "$major")")
	src=$dir/build/pg$major
	rm -rf "$src" && mkdir -p "$src" || return 1
	tar -C "$ROOT" --exclude=./.cache --exclude=./.git --exclude=node_modules --exclude='*.o' \
		--exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$src" -xf - || return 1
	in_root "$dir" sh -c "gcc --version | head -n 1 && cd /build/pg$major &&
		make PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config -j$(nproc) WERROR=1 &&
		make PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config install"
}

# pg_root_regress MAJOR CHROMA_URL OUTDIR: a fresh cluster of MAJOR inside its root with
# chroma_sync preloaded, the pg_regress suite against it, the server stopped again;
# results and regression.diffs are copied to OUTDIR. REGRESS_TESTS (a space-separated list)
# runs only those tests.
pg_root_regress() {
	local major=$1 url=$2 out=$3 dir port rc
	dir=$(pg_root_dir "$(pg_root_suite "$major")")
	port=$(free_port) || return 1
	in_root "$dir" /bin/sh -c '
		major=$1 port=$2 url=$3 bin=/usr/lib/postgresql/$1/bin run=/run-pg$1
		rm -rf "$run" && mkdir -p "$run" && chown postgres: "$run" && chmod 700 "$run" || exit 1
		runuser -u postgres -- "$bin/initdb" -D "$run/data" -U postgres -A trust -E UTF8 \
			--locale=C.UTF-8 >"$run/initdb.log" 2>&1 || { cat "$run/initdb.log"; exit 1; }
		cat >>"$run/data/postgresql.conf" <<-EOF
			port = $port
			listen_addresses = '"'"'127.0.0.1'"'"'
			unix_socket_directories = '"'"'$run'"'"'
			shared_preload_libraries = '"'"'chroma_sync'"'"'
			chroma_sync.url = '"'"'$url'"'"'
			max_worker_processes = 16
			log_line_prefix = '"'"'%m [%p] %q%a '"'"'
		EOF
		runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -l "$run/server.log" -w -t 60 start ||
			{ tail -n 30 "$run/server.log"; exit 1; }
		mkdir -p "$run/out"
		make -C /build/pg$major PG_CONFIG="$bin/pg_config" installcheck PGHOST="$run" PGPORT="$port" \
			PGUSER=postgres EXTRA_REGRESS_OPTS="--outputdir=$run/out" ${4:+"REGRESS=$4"}
		rc=$?
		runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -w -t 30 -m fast stop >/dev/null ||
			runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -m immediate stop >/dev/null
		exit $rc
	' sh "$major" "$port" "$url" "${REGRESS_TESTS:-}"
	rc=$?
	mkdir -p "$out" && cp -r "$dir/run-pg$major/out/." "$dir/run-pg$major/server.log" "$out/" 2>/dev/null
	return $rc
}

# shellcheck shell=bash
# Suite "package" of test/run_all.sh: the Debian packages (debian/, built with pg_buildext)
# for PostgreSQL 15 (built on this bookworm host) and 18 (built in the sid root of
# pg_roots.sh), each installed with `apt-get install ./postgresql-NN-chroma-sync_….deb`
# into a CLEAN Debian root (debootstrap minbase, no PostgreSQL: the package pulls its server
# from the archive) where test/lib/package_smoke.sh runs a cluster with the library preloaded,
# CREATE EXTENSION and a record and a mirror round trip against a Chroma server the harness
# starts on the host. Sourced by test/run_all.sh after common.sh and pg_roots.sh.
#
# Cached under /var/cache/chroma_sync (kept clean: every run works on a copy):
#   pgroots/bookworm-clean, pgroots/sid-clean   the minimal roots (stamp .chroma-sync-clean-root)
#   apt-archives/SUITE                          the .debs the install tests downloaded
# The sid root gets the package build tools once (stamp .chroma-sync-deb-tools, apart from
# pg_roots.sh's own stamp).

PKG_MAJORS="15 18"
PKG_APT_CACHE=${PKG_APT_CACHE:-/var/cache/chroma_sync/apt-archives}
PKG_ROOT_TOOLS="debhelper dpkg-dev postgresql-server-dev-all"
PKG_HOST_TOOLS=(debhelper dpkg-dev postgresql-server-dev-all)

# The suite of the clean root a major's package is installed into.
pkg_clean_suite() {
	case $1 in
	15) echo bookworm ;;
	18) echo sid ;;
	*) return 1 ;;
	esac
}

pkg_extversion() { sed -n "s/^default_version = '\(.*\)'$/\1/p" "$ROOT/chroma_sync.control"; }
pkg_debversion() { dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version; }

# The extension's version is the package's upstream version.
pkg_check_versions() {
	local ext deb
	ext=$(pkg_extversion) && deb=$(pkg_debversion) || return 1
	echo "chroma_sync.control: $ext; debian/changelog: $deb"
	[ -n "$ext" ] && [ "${deb%-*}" = "$ext" ]
}

# pkg_copy_source DEST: the working tree (uncommitted changes included) without build
# products, as the source of a package build.
pkg_copy_source() {
	local dst=$1
	rm -rf "$dst" && mkdir -p "$dst" || return 1
	tar -C "$ROOT" --exclude=./.cache --exclude=./.git --exclude=node_modules --exclude='*.o' \
		--exclude='*.so' --exclude='*.bc' --exclude=./results --exclude=./tmp_check --exclude=./deb-build \
		-cf - . | tar -C "$dst" -xf -
}

# pkg_build_tree DIR MAJOR: run in DIR (a copy of the source): the package for MAJOR alone,
# debian/control regenerated for it from control.in. Prints the name of the .deb.
# shellcheck disable=SC2016
PKG_BUILD_CMD='cd "$1" && export PG_SUPPORTED_VERSIONS=$2 PG_UPDATECONTROL=yes &&
	pg_buildext updatecontrol && grep "^Package:" debian/control &&
	dpkg-buildpackage -us -uc -b -j$(nproc)'

# The build tools on the host (the build runs against /usr/lib/postgresql/15, read only).
pkg_host_tools() {
	local p missing=()
	for p in "${PKG_HOST_TOOLS[@]}"; do
		package_installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && { echo "package build tools installed"; return 0; }
	apt_install "${missing[@]}"
}

# pkg_build_host OUTDIR: postgresql-15-chroma-sync built on the host.
pkg_build_host() {
	local out=$1 dir=$WORK_DIR/deb/build-15 src ver
	ver=$(pkg_extversion)
	src=$dir/chroma-sync-$ver
	pkg_copy_source "$src" || return 1
	bash -c "$PKG_BUILD_CMD" sh "$src" 15 || return 1
	mkdir -p "$out" && cp "$dir"/postgresql-15-chroma-sync_*.deb "$out/" &&
		ls -l "$out"/postgresql-15-chroma-sync_*.deb
}

# pkg_root_tools DIR: the package build tools in a root of pg_roots.sh, installed once
# (stamp .chroma-sync-deb-tools; the root's own stamp is pg_roots.sh's).
pkg_root_tools() {
	local dir=$1 want="chroma_sync deb tools v1: $PKG_ROOT_TOOLS" stamp=$1/.chroma-sync-deb-tools
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && { echo "build tools: cached"; return 0; }
	(
		flock 7 || exit 1
		[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
		# shellcheck disable=SC2086
		pkg_root_apt "$dir" install -y --no-install-recommends $PKG_ROOT_TOOLS &&
			in_root "$dir" apt-get clean 7>&- &&
			echo "$want" >"$stamp"
	) 7>"$dir.deb-tools.lock"
}

# pkg_root_apt DIR ARGS...: apt-get ARGS in the root; when that fails (the root's package
# lists may be older than the archive), apt-get update and once more.
pkg_root_apt() {
	local dir=$1
	shift
	in_root "$dir" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 "$@" </dev/null 7>&- && return 0
	echo "apt-get $* failed: apt-get update and again"
	in_root "$dir" apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Retries=3 update </dev/null 7>&- &&
		in_root "$dir" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 "$@" </dev/null 7>&-
}

# pkg_build_root MAJOR OUTDIR: postgresql-MAJOR-chroma-sync built in MAJOR's root of
# pg_roots.sh (made by pg_root_prepare).
pkg_build_root() {
	local major=$1 out=$2 dir rel ver rc
	dir=$(pg_root_dir "$(pg_root_suite "$major")")
	ver=$(pkg_extversion)
	rel=/build/deb-pg$major-$$
	pkg_root_tools "$dir" || return 1
	pkg_copy_source "$dir$rel/chroma-sync-$ver" || return 1
	in_root "$dir" /bin/bash -c "$PKG_BUILD_CMD" sh "$rel/chroma-sync-$ver" "$major" 7>&-
	rc=$?
	if [ $rc -eq 0 ]; then
		mkdir -p "$out" && cp "$dir$rel/postgresql-$major-chroma-sync_"*.deb "$out/" &&
			ls -l "$out/postgresql-$major-chroma-sync_"*.deb
		rc=$?
	fi
	rm -rf "${dir:?}$rel"
	return $rc
}

# pkg_clean_prepare SUITE: the minimal root (debootstrap minbase, no PostgreSQL) every
# install test copies, with the apt sources a machine of that suite has (for the host's own
# suite, the host's: its security and point-release updates too, which the host's PostgreSQL
# packages, and so the package built against them, may come from) and package lists
# fetched; made once (stamp .chroma-sync-clean-root; a root of stamp v1 only gets v2's
# sources and lists).
pkg_clean_prepare() {
	local suite=$1 dir want base uri
	dir=$PG_ROOTS_DIR/$suite-clean
	want="chroma_sync clean root v2: $suite"
	base="chroma_sync clean root v1: $suite"
	[ -f "$dir/.chroma-sync-clean-root" ] && [ "$(cat "$dir/.chroma-sync-clean-root")" = "$want" ] &&
		{ echo "clean root $suite: cached in $dir"; return 0; }
	mkdir -p "$PG_ROOTS_DIR" || return 1
	(
		flock 7 || exit 1
		[ -f "$dir/.chroma-sync-clean-root" ] && [ "$(cat "$dir/.chroma-sync-clean-root")" = "$want" ] && exit 0
		if ! [ -f "$dir/.chroma-sync-clean-root" ] || [ "$(cat "$dir/.chroma-sync-clean-root")" != "$base" ]; then
			command -v debootstrap >/dev/null || apt_install debootstrap || exit 1
			uri=$(archive_uri) || { echo "cannot find the Debian archive in /etc/apt sources"; exit 1; }
			rm -rf "$dir.tmp" "$dir" || exit 1
			echo "debootstrap $suite (minbase) from the machine's archive"
			debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
				"$suite" "$dir.tmp" "$uri" </dev/null 7>&- || exit 1
			# Installed packages start no services, and postgresql-common makes no cluster
			# on 5432: the test makes its own on a free port.
			printf '#!/bin/sh\nexit 101\n' >"$dir.tmp/usr/sbin/policy-rc.d" &&
				chmod 755 "$dir.tmp/usr/sbin/policy-rc.d" &&
				mkdir -p "$dir.tmp/etc/postgresql-common" &&
				echo "create_main_cluster = false" >"$dir.tmp/etc/postgresql-common/createcluster.conf" || exit 1
			echo "$base" >"$dir.tmp/.chroma-sync-clean-root" && mv "$dir.tmp" "$dir" || exit 1
		fi
		# shellcheck disable=SC1091
		if [ "$suite" = "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" ] &&
			[ -r /etc/apt/sources.list.d/debian.sources ]; then
			echo "apt sources of the host:"
			cp /etc/apt/sources.list.d/debian.sources "$dir/etc/apt/sources.list.d/" &&
				rm -f "$dir/etc/apt/sources.list" || exit 1
		fi
		cat "$dir/etc/apt/sources.list" "$dir"/etc/apt/sources.list.d/* 2>/dev/null
		in_root "$dir" apt-get -o Acquire::Check-Valid-Until=false -o Acquire::Retries=3 update \
			</dev/null 7>&- || exit 1
		in_root "$dir" apt-get clean 7>&-
		echo "$want" >"$dir/.chroma-sync-clean-root"
	) 7>"$dir.lock"
}

# pkg_install_test MAJOR DEB CHROMA_URL: a copy of the clean root, the package installed
# into it from the file with apt-get (which pulls postgresql-MAJOR from the archive), then
# package_smoke.sh; its "ok"/"not ok" lines are the tests. The copy is removed unless KEEP=1.
pkg_install_test() {
	local major=$1 deb=$2 url=$3 suite tmp cache port rc
	suite=$(pkg_clean_suite "$major")
	tmp=$WORK_DIR/deb/root-$major
	cache=$PKG_APT_CACHE/$suite
	rm -rf "$tmp" && mkdir -p "$cache" || return 1
	cp -a "$PG_ROOTS_DIR/$suite-clean" "$tmp" || return 1
	# A throwaway root: dpkg need not sync every file it unpacks.
	echo force-unsafe-io >"$tmp/etc/dpkg/dpkg.cfg.d/chroma-sync-unsafe-io" || return 1
	# The archive's .debs of earlier runs (hard links when the file system allows).
	find "$cache" -maxdepth 1 -name '*.deb' -exec cp -l -t "$tmp/var/cache/apt/archives/" {} + 2>/dev/null ||
		find "$cache" -maxdepth 1 -name '*.deb' -exec cp -t "$tmp/var/cache/apt/archives/" {} +
	cp "$deb" "$ROOT/test/lib/package_smoke.sh" "$tmp/tmp/" || return 1
	if pkg_root_apt "$tmp" install -y --no-install-recommends "/tmp/$(basename "$deb")"; then
		echo "ok - apt-get install ./$(basename "$deb") into a clean $suite root"
	else
		echo "not ok - apt-get install ./$(basename "$deb") into a clean $suite root"
		return 1
	fi
	find "$tmp/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec cp -n -t "$cache/" {} +
	port=$(free_port) || return 1
	# shellcheck disable=SC2046
	in_root "$tmp" /bin/bash /tmp/package_smoke.sh "$major" "$port" "$url" "$(pkg_extversion)" \
		"$(pkg_debversion)" $(sed -n 's/^DATA = //p' "$ROOT/Makefile" | xargs -n1 basename) 7>&-
	rc=$?
	[ "$KEEP" = 1 ] || rm -rf "$tmp"
	return $rc
}

# count_pkg LOG: sets ok and bad from the "ok - …" and "not ok - …" lines of LOG.
count_pkg() {
	ok=$(grep -c '^ok - ' "$1")
	bad=$(grep -c '^not ok - ' "$1")
}

# pkg_install_stage MAJOR URL OUTDIR: the install test of MAJOR's package as a stage; its
# "ok"/"not ok" lines counted.
pkg_install_stage() {
	local m=$1 url=$2 out=$3 s log deb ok bad
	s=$(pkg_clean_suite "$m")
	deb=$(find "$out" -maxdepth 1 -name "postgresql-$m-chroma-sync_*.deb" | head -n 1)
	log=$LOG_DIR/pkg-install-$m.log
	STAGE_TAIL=0 stage "package: install + smoke test, PostgreSQL $m ($s)" "pkg-install-$m" \
		pkg_install_test "$m" "$deb" "$url"
	count_pkg "$log"
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + bad))
	note "package pg$m: $ok passed, $bad failed"
	if [ "$bad" -gt 0 ] || ! grep -q '^ok - server log' "$log"; then
		[ "$bad" -gt 0 ] || broken "package pg$m: the smoke test did not finish"
		show_tail "$log" 40
	fi
}

# The suite: the clean roots made (once, cached) in the background; the package for 18
# built in the sid root in the background while the one for 15 is built on the host and
# installed; then the one for 18 installed. One Chroma server for both install tests.
run_package() {
	local out=$WORK_DIR/deb/out kind=${SERVERS%% *} s m port cpid pid18 url
	local -A clean_pid=() clean_ok=()
	mkdir -p "$out"
	if stage "package: debian/changelog's version" pkg-versions pkg_check_versions; then
		PASSED=$((PASSED + 1))
	else
		broken "package: debian/changelog's upstream version is not default_version of chroma_sync.control"
	fi
	if ! command -v debootstrap >/dev/null &&
		! stage "install debootstrap" install-debootstrap apt_install debootstrap; then
		broken "package: debootstrap could not be installed"
		return
	fi
	for m in $PKG_MAJORS; do
		s=$(pkg_clean_suite "$m")
		(
			t=$SECONDS
			pkg_clean_prepare "$s"
			rc=$?
			echo "clean root $s: exit $rc after $((SECONDS - t))s"
			exit $rc
		) >>"$LOG_DIR/pkg-clean-$s.log" 2>&1 </dev/null 8>&- 9>&- &
		clean_pid[$m]=$!
		ROOT_PIDS+=("$!")
	done
	(
		t=$SECONDS
		pg_root_prepare sid && pkg_build_root 18 "$out"
		rc=$?
		echo "sid root and build: exit $rc after $((SECONDS - t))s"
		exit $rc
	) >>"$LOG_DIR/pkg-build-18.log" 2>&1 </dev/null 8>&- 9>&- &
	pid18=$!
	ROOT_PIDS+=("$pid18")
	port=$(free_port) || { broken "package: no free port"; return; }
	url=http://127.0.0.1:$port
	if ! stage "start $kind Chroma server (port $port)" chroma-start-pkg \
		start_chroma "$kind" "$WORK_DIR/chroma-pkg" "$port" "$LOG_DIR/chroma-pkg.log"; then
		broken "package: Chroma server did not start"
		return
	fi
	cpid=$CHROMA_PID
	for m in $PKG_MAJORS; do
		s=$(pkg_clean_suite "$m")
		if STAGE_TAIL=30 stage "package: clean $s root (no PostgreSQL)" "pkg-clean-$s" wait "${clean_pid[$m]}"; then
			clean_ok[$m]=1
		else
			broken "package: the clean $s root could not be made (see $LOG_DIR/pkg-clean-$s.log)"
		fi
		if [ "$m" = 15 ]; then
			if stage "package: build tools on the host" pkg-host-tools pkg_host_tools &&
				stage "package: build postgresql-15-chroma-sync (host)" pkg-build-15 pkg_build_host "$out"; then
				PASSED=$((PASSED + 1))
			else
				broken "package: postgresql-15-chroma-sync could not be built (see $LOG_DIR/pkg-build-15.log)"
				continue
			fi
		else
			if STAGE_TAIL=30 stage "package: build postgresql-18-chroma-sync (sid root)" pkg-build-18 wait "$pid18"; then
				PASSED=$((PASSED + 1))
			else
				broken "package: postgresql-18-chroma-sync could not be built (see $LOG_DIR/pkg-build-18.log)"
				continue
			fi
		fi
		[ "${clean_ok[$m]:-0}" = 1 ] && pkg_install_stage "$m" "$url" "$out"
	done
	ROOT_PIDS=()
	cp "$out"/*.deb "$LOG_DIR/" 2>/dev/null
	[ "$KEEP" = 1 ] || stop_chroma "$cpid"
}

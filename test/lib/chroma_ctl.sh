#!/usr/bin/env bash
# Start and stop the Chroma servers used by the tests (test/run_all.sh and TAP tests).
#
#   chroma_ctl.sh start old|new DIR PORT LOGFILE   start a server on 127.0.0.1:PORT with its
#                                                  data in DIR; prints its pid once it answers
#   chroma_ctl.sh stop PID                         SIGINT (SIGTERM after 1 s), then SIGKILL
#                                                  after a grace period
#   chroma_ctl.sh wait PORT [SECONDS]              wait until a server answers on PORT
#   chroma_ctl.sh command old|new                  print the command line (without run args)
#
# "old" is the server of chromadb-js-bindings 1.0.5 (runs on the system glibc), "new" the
# one of 1.3.4, which needs glibc >= 2.38 and is started through the dynamic loader of the
# glibc that test/lib/common.sh (prepare_glibc) unpacks under .cache/glibc13.
#
# Environment: CHROMA_ROOT (repository root; default: derived from this file's location),
# CHROMA_GLIBC_LIB (the unpacked glibc's lib dir), CHROMA_START_TIMEOUT (seconds, 60),
# CHROMA_STOP_GRACE (seconds before SIGKILL, 3), CHROMA_PIDS_DIR (when set, every started
# server is recorded there as a file named by its pid, so the harness can stop leftovers).
set -euo pipefail

CHROMA_ROOT=${CHROMA_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CHROMA_GLIBC_LIB=${CHROMA_GLIBC_LIB:-$CHROMA_ROOT/.cache/glibc13/root/usr/lib/x86_64-linux-gnu}
CHROMA_START_TIMEOUT=${CHROMA_START_TIMEOUT:-60}
CHROMA_STOP_GRACE=${CHROMA_STOP_GRACE:-3}

die() { echo "chroma_ctl: $*" >&2; exit 1; }

# Prints one argument per line: the command that runs the CLI of the given server.
server_command() {
	local kind=$1 node cli
	node=$(command -v node) || die "node is not installed"
	cli=$CHROMA_ROOT/test/chroma/$kind/node_modules/chromadb/dist/cli.mjs
	case $kind in
	old)
		[ -r "$cli" ] || die "$cli is missing (run npm ci in test/chroma/old)"
		printf '%s\n' "$node" "$cli"
		;;
	new)
		[ -r "$cli" ] || die "$cli is missing (run npm ci in test/chroma/new)"
		[ -x "$CHROMA_GLIBC_LIB/ld-linux-x86-64.so.2" ] ||
			die "no glibc >= 2.38 under $CHROMA_GLIBC_LIB (see prepare_glibc in test/lib/common.sh)"
		printf '%s\n' "$CHROMA_GLIBC_LIB/ld-linux-x86-64.so.2" --library-path \
			"$CHROMA_GLIBC_LIB:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" "$node" "$cli"
		;;
	*) die "unknown server '$kind' (old or new)" ;;
	esac
}

heartbeat() {
	curl -sf --max-time 2 "http://127.0.0.1:$1/api/v2/heartbeat" >/dev/null 2>&1
}

# True while the process exists and is not a zombie.
alive() {
	local state
	[ -r "/proc/$1/stat" ] || return 1
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

is_chroma() {
	tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q 'chromadb/dist/cli\.mjs'
}

cmd_start() {
	[ $# -eq 4 ] || die "usage: start old|new DIR PORT LOGFILE"
	local kind=$1 dir=$2 port=$3 log=$4 pid i
	local -a cmd
	mapfile -t cmd < <(server_command "$kind")
	[ ${#cmd[@]} -gt 0 ] || exit 1
	mkdir -p "$dir"
	if heartbeat "$port"; then
		die "something already answers on port $port"
	fi
	echo "chroma_ctl: starting $kind server: ${cmd[*]} run --path $dir --host 127.0.0.1 --port $port" >>"$log"
	(
		# The server outlives its caller: hand it none of the caller's pipes.
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			if [ "$fd" -gt 2 ] && [ "$fd" -lt 255 ]; then
				eval "exec $fd>&-" 2>/dev/null || true
			fi
		done
		exec "${cmd[@]}" run --path "$dir" --host 127.0.0.1 --port "$port" >>"$log" 2>&1 </dev/null
	) &
	pid=$!
	if [ -n "${CHROMA_PIDS_DIR:-}" ]; then
		echo "$kind $port $dir" >"$CHROMA_PIDS_DIR/$pid" || true
	fi
	for ((i = 0; i < CHROMA_START_TIMEOUT * 4; i++)); do
		if ! alive "$pid"; then
			echo "chroma_ctl: $kind server exited during start-up; last lines of $log:" >&2
			tail -n 20 "$log" >&2
			[ -z "${CHROMA_PIDS_DIR:-}" ] || rm -f "$CHROMA_PIDS_DIR/$pid"
			exit 1
		fi
		if heartbeat "$port"; then
			echo "$pid"
			return 0
		fi
		sleep 0.25
	done
	echo "chroma_ctl: $kind server did not answer on port $port within ${CHROMA_START_TIMEOUT}s; last lines of $log:" >&2
	tail -n 20 "$log" >&2
	cmd_stop "$pid" >/dev/null 2>&1 || true
	exit 1
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: stop PID"
	local pid=$1 i
	[ -z "${CHROMA_PIDS_DIR:-}" ] || rm -f "$CHROMA_PIDS_DIR/$pid"
	alive "$pid" || return 0
	is_chroma "$pid" || die "process $pid is not a Chroma server; not stopping it"
	# SIGINT first: both servers exit on it at once, while the new one, once it got a
	# SIGTERM, logs that it shuts down and then never exits (seen with bindings 1.3.4).
	kill -INT "$pid" 2>/dev/null || true
	for ((i = 0; i < CHROMA_STOP_GRACE * 10; i++)); do
		alive "$pid" || return 0
		if [ $i -eq 10 ]; then kill -TERM "$pid" 2>/dev/null || true; fi
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	die "process $pid survived SIGKILL"
}

cmd_wait() {
	local port=${1:?usage: wait PORT [SECONDS]} secs=${2:-$CHROMA_START_TIMEOUT} i
	for ((i = 0; i < secs * 4; i++)); do
		heartbeat "$port" && return 0
		sleep 0.25
	done
	die "no Chroma server answered on port $port within ${secs}s"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
wait) shift; cmd_wait "$@" ;;
command) shift; server_command "${1:?usage: command old|new}" ;;
*) die "usage: chroma_ctl.sh start old|new DIR PORT LOGFILE | stop PID | wait PORT [SECONDS] | command old|new" ;;
esac

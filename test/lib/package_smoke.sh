#!/bin/bash
# The smoke test of an installed postgresql-NN-chroma-sync package, run inside a clean
# Debian root by test/lib/package.sh (pkg_install_test) after `apt-get install ./…deb`:
# a fresh cluster with the library preloaded, CREATE EXTENSION, a record round trip and a
# mirror round trip against the Chroma server at URL (on the host; the root shares its
# network). One line per check, "ok - what" or "not ok - what"; the server is stopped at
# the end, also after a failed check.
#
#   package_smoke.sh MAJOR PORT URL EXTVERSION DEBVERSION SQLSCRIPT...
#
# SQLSCRIPT: the names of the extension's SQL scripts (the Makefile's DATA).

major=$1 port=$2 url=$3 extversion=$4 debversion=$5
shift 5
bin=/usr/lib/postgresql/$major/bin
run=/run-chroma-sync-pkg
pkg=postgresql-$major-chroma-sync
coll=pkg_pg${major}

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }

# check WHAT SQL...: each SQL (one psql -c each, in order) runs without error, and each
# SELECT prints one line, "t" (command tags are not printed).
check() {
	local what=$1 out s args=() want=
	shift
	for s in "$@"; do
		args+=(-c "$s")
		[[ $s == SELECT* ]] && want+=t$'\n'
	done
	out=$(runuser -u postgres -- "$bin/psql" -h "$run" -p "$port" -U postgres -d postgres \
		-X -q -At -v ON_ERROR_STOP=1 "${args[@]}" 2>&1)
	if [ "$out"$'\n' = "$want" ]; then
		ok "$what"
	else
		notok "$what"
		printf '%s\n' "$out" | sed 's/^/#   /'
	fi
}

# The package: its version, and the files the extension needs where this major looks.
v=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)
if [ "$v" = "$debversion" ]; then ok "$pkg $v installed"; else notok "$pkg installed (found '$v', want $debversion)"; fi
missing=
for f in "/usr/lib/postgresql/$major/lib/chroma_sync.so" \
	"/usr/share/postgresql/$major/extension/chroma_sync.control" \
	"/usr/share/doc/$pkg/copyright" "${@/#//usr/share/postgresql/$major/extension/}"; do
	dpkg -S "$f" >/dev/null 2>&1 || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "$pkg ships the library, control file, SQL scripts and copyright"; else notok "$pkg lacks:$missing"; fi
if ldd "/usr/lib/postgresql/$major/lib/chroma_sync.so" | grep -q 'not found'; then
	notok "chroma_sync.so: every shared library it needs is installed"
	ldd "/usr/lib/postgresql/$major/lib/chroma_sync.so" | grep 'not found' | sed 's/^/#   /'
else
	ok "chroma_sync.so: every shared library it needs is installed"
fi

# A cluster with the library preloaded.
rm -rf "$run" && mkdir -p "$run" && chown postgres: "$run" && chmod 700 "$run" || exit 1
if ! runuser -u postgres -- "$bin/initdb" -D "$run/data" -U postgres -A trust -E UTF8 --no-sync \
	--locale=C.UTF-8 >"$run/initdb.log" 2>&1; then
	notok "initdb"
	sed 's/^/#   /' "$run/initdb.log"
	exit 1
fi
cat >>"$run/data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$run'
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$url'
max_worker_processes = 16
EOF
# Stopped on every way out, also when the harness interrupts the checks (TERM, INT).
stop_server() {
	runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -w -t 30 -m fast stop >/dev/null ||
		runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -m immediate stop >/dev/null
}
trap 'stop_server 2>/dev/null' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
if runuser -u postgres -- "$bin/pg_ctl" -D "$run/data" -l "$run/server.log" -w -t 60 start >/dev/null; then
	ok "PostgreSQL $major starts with shared_preload_libraries = chroma_sync"
else
	notok "PostgreSQL $major starts with shared_preload_libraries = chroma_sync"
	tail -n 20 "$run/server.log" | sed 's/^/#   /'
	exit 1
fi

check "CREATE EXTENSION chroma_sync (version $extversion)" \
	"CREATE EXTENSION chroma_sync" \
	"SELECT extversion = '$extversion' FROM pg_extension WHERE extname = 'chroma_sync'"
check "the Chroma server at $url answers" "SELECT chroma_heartbeat() > 0"

# Records: upsert, then read back exactly what was sent.
check "chroma_upsert + chroma_get round trip" \
	"SELECT chroma_create_collection('${coll}_records') IS NOT NULL" \
	"SELECT chroma_upsert('${coll}_records', ARRAY['a', 'b'],
		'{{0.5, -1, 3.25}, {1e-3, 2, -0}}'::real[], ARRAY['doc a', 'doc é'],
		ARRAY['{\"k\": 1, \"s\": \"x\"}', '{\"flag\": true}']::jsonb[]) = 2" \
	"SELECT count(*) = 2 AND bool_and(g.embedding = w.embedding AND g.document = w.document
			AND g.metadata = w.metadata)
		FROM chroma_get('${coll}_records') AS g
		JOIN (VALUES ('a', '{0.5, -1, 3.25}'::real[], 'doc a', '{\"k\": 1, \"s\": \"x\"}'::jsonb),
			('b', '{1e-3, 2, -0}'::real[], 'doc é', '{\"flag\": true}'::jsonb))
			AS w (id, embedding, document, metadata) USING (id)"

# A mirror: backfill, insert, update, delete, then the collection compared with the table.
check "mirror round trip (backfill, insert, update, delete, chroma_flush, chroma_verify)" \
	"CREATE TABLE pkg_items (id int PRIMARY KEY, embedding real[], body text, meta jsonb)" \
	"INSERT INTO pkg_items SELECT i, ARRAY[i, i * 2, i * 3]::real[], 'item ' || i,
		jsonb_build_object('n', i) FROM generate_series(1, 20) AS i" \
	"SELECT chroma_mirror('pkg_items', collection => '${coll}_mirror', document_column => 'body',
		metadata_columns => ARRAY['meta']) IS NOT NULL" \
	"SELECT chroma_flush('pkg_items', '60 s')" \
	"SELECT count(*) = 20 FROM chroma_get('${coll}_mirror')" \
	"INSERT INTO pkg_items VALUES (21, '{7, 8, 9}', 'new', '{\"n\": 21}')" \
	"UPDATE pkg_items SET body = 'changed', embedding = '{-1, -2, -3}' WHERE id = 2" \
	"DELETE FROM pkg_items WHERE id IN (3, 4)" \
	"SELECT chroma_flush('pkg_items', '60 s')" \
	"SELECT count(*) = 19 FROM chroma_get('${coll}_mirror')" \
	"SELECT document = 'changed' AND embedding = '{-1,-2,-3}'
		FROM chroma_get('${coll}_mirror', ARRAY['2'])" \
	"SELECT NOT EXISTS (SELECT FROM chroma_get('${coll}_mirror', ARRAY['3', '4']))" \
	"SELECT metadata = '{\"n\": 21}' AND document = 'new' FROM chroma_get('${coll}_mirror', ARRAY['21'])" \
	"SELECT rows = 19 AND missing = 0 AND extra = 0 AND different = 0 FROM chroma_verify('pkg_items')" \
	"SELECT state = 'syncing' AND last_error IS NULL FROM chroma_sync.status
		WHERE source = 'pkg_items'::regclass"

trap - EXIT
stop_server
if grep -E 'PANIC|TRAP|terminated by signal' "$run/server.log" >/dev/null; then
	notok "server log without PANIC, assertion failure or crash"
	grep -E 'PANIC|TRAP|terminated by signal' "$run/server.log" | head -n 10 | sed 's/^/#   /'
else
	ok "server log without PANIC, assertion failure or crash"
fi
exit 0

#!/bin/sh
# encode_ratios.sh — run encode_bench and its Node reference, print ours vs Node.
#   bench/encode_ratios.sh [runs]      (BENCH_CLOCK=wall for wall-clock time)
# A ratio above 1 means the C encoder is that many times faster than Node.
set -eu
cd "$(dirname "$0")"
runs=${1:-101}
make -s encode_bench
ours=$(mktemp)
node_out=$(mktemp)
trap 'rm -f "$ours" "$node_out"' EXIT
./encode_bench "$runs" > "$ours"
node encode_node.js "$runs" > "$node_out"

grep '^#' "$ours" "$node_out" | sed 's/^[^:]*://'
value() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }

printf '%-34s %10s %10s %8s\n' "measurement (ms, median)" "ours" "node" "ratio"
row() {
	o=$(value "$ours" "$1")
	n=$(value "$node_out" "$2")
	[ -n "$o" ] && [ -n "$n" ] || return 0
	awk -v l="$3" -v o="$o" -v n="$n" \
		'BEGIN { printf "%-34s %10.3f %10.3f %7.1fx\n", l, o, n, (o > 0 ? n / o : 0) }'
}
row base64_rows base64_rows "base64 1000x1536, per row"
row base64_rows_avx2 base64_rows "base64 1000x1536, per row, AVX2"
row base64_rows_scalar base64_rows "base64 1000x1536, per row, scalar"
row base64_whole base64_whole "base64 1000x1536, one call"
row base64_rows base64_js_client "base64 1000x1536 vs the JS client's"
row base64_whole_scalar base64_whole "base64 1000x1536, one call, scalar"
row body_json body_json "body 20000x4 + metadata (JSON)"
row body_base64 body_json "  ... base64 embeddings"
row body_json_meta_built body_json "  ... metadata rendered too"
# the floor of any encoder: copying the input once (base64 also writes a third more)
awk -v o="$(value "$ours" base64_whole)" -v m="$(value "$ours" memcpy_whole)" \
	'BEGIN { if (m > 0) printf "%-34s %10.3f %10s %7.1fx (memcpy/base64: how close to a copy)\n", "memcpy of the same 6,144,000 bytes", m, "-", m / o }'

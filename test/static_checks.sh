#!/usr/bin/env bash
# Static checks: cppcheck on src/, META.json against the PGXN meta-spec and the
# control file, and the SQL scripts' operators and functions (test/lib/check_sql_scripts.sh,
# a scratch PostgreSQL cluster with plpgsql_check). Prints one "ok"/"not ok" line per check and a closing count.
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0
check() {
	local name=$1
	shift
	if out=$("$@" 2>&1); then
		echo "ok - $name"
		printf '%s\n' "$out" | grep '^# ' | sed 's/^/    /'	# a check's own count
		passed=$((passed + 1))
	else
		echo "not ok - $name"
		printf '%s\n' "$out" | sed 's/^/    /' | head -40
		failed=$((failed + 1))
	fi
}

run_cppcheck() {
	local inc
	inc=$(pg_config --includedir-server)
	cppcheck --quiet --enable=warning,portability,performance --std=c11 --inline-suppr \
		--library=posix --error-exitcode=1 --max-configs=1 -j 2 -I src -I "$inc" \
		--suppress=missingIncludeSystem --suppress=toomanyconfigs \
		--suppress="*:${inc}/*" src/*.c
}

# META.json: the keys the meta-spec requires, and the same version as the control file.
check_meta() {
	perl -MJSON::PP -e '
		use strict;
		local $/;
		open my $fh, "<", "META.json" or die "META.json: $!\n";
		my $m = JSON::PP->new->decode(<$fh>);
		my @missing = grep { !exists $m->{$_} }
		  qw(name abstract version maintainer license provides meta-spec);
		die "META.json lacks: @missing\n" if @missing;
		die "meta-spec version is not 1.0.0\n" unless $m->{"meta-spec"}{version} eq "1.0.0";
		open my $ctl, "<", "chroma_sync.control" or die "control: $!\n";
		my ($ver) = <$ctl> =~ /^default_version\s*=\s*\x27([^\x27]+)\x27/m or die "no default_version\n";
		# PGXN versions are semantic versions: 0.2 is released as 0.2.0
		(my $semver = $ver) =~ s/^(\d+\.\d+)$/$1.0/;
		die "META.json version $m->{version} is not the control file version $ver\n"
		  unless $m->{version} eq $semver;
		my $p = $m->{provides}{chroma_sync} or die "provides.chroma_sync is missing\n";
		die "provides.chroma_sync.version $p->{version} is not $semver\n" unless $p->{version} eq $semver;
		die "provides.chroma_sync.file $p->{file} does not exist\n" unless -f $p->{file};
		die "provides.chroma_sync.abstract is missing\n" unless $p->{abstract};
		# The PostgreSQL majors tested (see README, Supported PostgreSQL versions): 15 to 19.
		my $pg = $m->{prereqs}{runtime}{requires}{PostgreSQL} // "";
		die "prereqs.runtime.requires.PostgreSQL is \"$pg\", not \">= 15.0.0, < 20.0.0\"\n"
		  unless $pg eq ">= 15.0.0, < 20.0.0";
	'
}

# Every install and upgrade script is installed by the Makefile.
check_scripts() {
	local f
	for f in sql/chroma_sync--*.sql; do
		grep -q "$(basename "$f")" Makefile || { echo "$f is not in the Makefile's DATA"; return 1; }
		head -3 "$f" | grep -q '\\echo Use' || { echo "$f lacks the \\echo guard"; return 1; }
	done
}

# The SQL check run on a copy of the scripts with test/lib/sql_check_fixture.sql appended to
# the last upgrade script: it must fail, reporting exactly the fixture's "caught" lines.
check_sql_check_fixture() {
	local dir out last rc
	dir=$(mktemp -d /tmp/chroma_sql_fixture.XXXXXX) || return 1
	chmod 755 "$dir"
	cp sql/chroma_sync--*.sql "$dir/"
	last=$(ls "$dir"/chroma_sync--*--*.sql | sort -V | tail -n 1)
	cat test/lib/sql_check_fixture.sql >>"$last"
	out=$(bash test/lib/check_sql_scripts.sh "$dir" 2>&1)
	rc=$?
	rm -rf "$dir"
	[ $rc -eq 1 ] || { echo "expected exit 1, got $rc:"; echo "$out"; return 1; }
	local want=(
		'chroma_sync.fixture uses operator hostile./(numeric,numeric)'
		'chroma_sync.fixture uses operator hostile.=(integer,integer)'
		'chroma_sync.fixture uses function hostile.lower(text)'
		'chroma_sync.fixture uses operator hostile.=(text,text)'
		'fixture_fn(integer) uses function hostile.abs(integer)'
		'DO block .* uses operator hostile.>(integer,integer)'
		'chroma_sync.fixture: operator =(oid,oid) casts an operand implicitly (relabeltype)'
	)
	local w
	for w in "${want[@]}"; do
		grep -q -- "$w" <<<"$out" || { echo "not reported: $w"; echo "$out"; return 1; }
	done
	if grep -E 'hostile\.(int8|upper|coalesce|greatest|extract|date_part|\+|now|length|current_user)\b' <<<"$out"; then
		echo "reported what is qualified or not a call:"
		echo "$out"
		return 1
	fi
}

# The SQL check run on each "-- case" section of test/lib/sql_check_cases.sql appended alone
# to a copy of the scripts: each must fail it, reported as the case's pattern; the "-- clean"
# section must pass it. Prints how many cases were caught.
check_sql_check_cases() {
	local dir out rc name pattern last caught=0 missed=0 total i
	dir=$(mktemp -d /tmp/chroma_sql_cases.XXXXXX) || return 1
	chmod 755 "$dir"
	perl -e '
		my ($dir) = @ARGV;
		my ($n, $fh) = (0);
		open my $in, "<", "test/lib/sql_check_cases.sql" or die "cases: $!\n";
		while (<$in>) {
			if (/^-- (case (\S+): (.*)|clean)$/) {
				$n++;
				open $fh, ">", "$dir/section_$n.sql" or die "$!\n";
				open my $meta, ">", "$dir/section_$n.meta" or die "$!\n";
				print $meta $2 // "clean", "\n", $3 // "", "\n";
				close $meta;
				next;
			}
			print $fh $_ if $fh;
		}
	' "$dir" || { rm -rf "$dir"; return 1; }
	total=$(ls "$dir"/section_*.sql | wc -l)
	local failures=()
	for ((i = 1; i <= total; i++)); do
		{ read -r name; read -r pattern; } <"$dir/section_$i.meta"
		rm -rf "$dir/sql"
		mkdir "$dir/sql" && chmod 755 "$dir/sql"
		cp sql/chroma_sync--*.sql "$dir/sql/"
		last=$(ls "$dir"/sql/chroma_sync--*--*.sql | sort -V | tail -n 1)
		cat "$dir/section_$i.sql" >>"$last"
		out=$(bash test/lib/check_sql_scripts.sh "$dir/sql" 2>&1)
		rc=$?
		if [ "$name" = clean ]; then
			[ $rc -eq 0 ] || failures+=("the clean section fails the check (exit $rc):" "$out")
		elif [ $rc -eq 1 ] && PATTERN=$pattern perl -e 'local $/; exit(<STDIN> =~ /$ENV{PATTERN}/ ? 0 : 1)' <<<"$out"; then
			caught=$((caught + 1))
		else
			missed=$((missed + 1))
			failures+=("missed: case $name (exit $rc, want /$pattern/):" "$out")
		fi
	done
	rm -rf "$dir"
	echo "# statement cases: $caught of $((caught + missed)) caught, $missed missed"
	[ ${#failures[@]} -eq 0 ] || { printf '%s\n' "${failures[@]}"; return 1; }
}

if command -v cppcheck >/dev/null; then
	check "cppcheck src/" run_cppcheck
else
	echo "not ok - cppcheck src/ (cppcheck is not installed)"
	failed=$((failed + 1))
fi
check "META.json follows the meta-spec and the control file" check_meta
check "install and upgrade scripts are installed and guarded" check_scripts
check "install and upgrade scripts qualify every operator and function" bash test/lib/check_sql_scripts.sh sql
check "the qualification check reports what it must, and nothing else" check_sql_check_fixture
check "the qualification check catches every kind of statement (test/lib/sql_check_cases.sql)" check_sql_check_cases
echo "static: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

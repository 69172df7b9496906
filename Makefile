EXTENSION = chroma_sync
EXTVERSION = 0.5

MODULE_big = chroma_sync
OBJS = \
	src/chroma_sync.o \
	src/partition.o \
	src/encode.o \
	src/base64.o \
	src/http.o \
	src/chroma_api.o \
	src/metadata.o \
	src/response.o \
	src/recordset.o \
	src/records.o \
	src/records_read.o \
	src/read_filters.o \
	src/query.o \
	src/records_replace.o \
	src/records_delete.o \
	src/get_pages.o \
	src/collection_config.o \
	src/collections.o \
	src/shared.o \
	src/mirror_config.o \
	src/mirror_filter.o \
	src/mirror_filter_depend.o \
	src/mirror_check.o \
	src/mirror_columns.o \
	src/trigger.o \
	src/mirror.o \
	src/sync.o \
	src/sync_send.o \
	src/sync_rows.o \
	src/sync_txn.o \
	src/sync_unknown.o \
	src/unsettled.o \
	src/worker.o \
	src/verify.o \
	src/ddl.o \
	src/utility_hook.o \
	src/key_redact.o \
	src/ownership.o \
	src/progress.o

DATA = sql/chroma_sync--0.1.sql sql/chroma_sync--0.1--0.2.sql sql/chroma_sync--0.2--0.3.sql sql/chroma_sync--0.3--0.4.sql sql/chroma_sync--0.4--0.5.sql

REGRESS = setup server collections collection_config records records_bad query query_filters query_batch upsert_query upsert_replace records_get delete_where encoding security metadata_arrays mirror_setup mirror_basic mirror_keys mirror_exact mirror_truncate mirror_failed mirror_admin mirror_multi mirror_errors mirror_options mirror_configuration mirror_composite mirror_metadata_types mirror_metadata_arrays metadata_numbers mirror_subxact mirror_virtual mirror_partitioned
REGRESS_OPTS = --inputdir=. --load-extension=chroma_sync

SHLIB_LINK = -lcurl

# CI builds with WERROR=1; everyone gets the warnings. Postgres' headers are included as
# system headers (they are not -Wextra clean); unused parameters are the fmgr convention.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter
ifeq ($(WERROR),1)
PG_CFLAGS += -Werror
endif
# SANITIZE=1: ASan and UBSan (gcc's "undefined" leaves out float-cast-overflow: a double
# out of an integer type's range converted to it); test/run_all.sh --sanitize runs it.
ifeq ($(SANITIZE),1)
PG_CFLAGS += -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -O1
SHLIB_LINK += -fsanitize=address,undefined,float-cast-overflow
endif

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server)
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The regression and TAP suites against a SANITIZE=1 build, every server run with the ASan
# runtime preloaded; fails on any sanitizer report (see test/lib/sanitize.sh). As root;
# PG_PREFIX and run_all.sh's environment variables apply, ARGS adds options (--server new).
.PHONY: sanitize-check
sanitize-check:
	bash test/run_all.sh --sanitize $(ARGS)

# TAP 050's randomized workload at 100,000 transactions (not part of the test command);
# ARGS adds run_all.sh options (--server new).
.PHONY: soak
soak:
	bash test/soak.sh $(ARGS)

# TAP 202 at its full size: 12 partitions x 20,000 rows mirrored as one while writers run
# and partitions are detached and attached (the default run uses 2,000 rows a partition);
# ARGS adds run_all.sh options (--server new).
.PHONY: partition-scale
partition-scale:
	CHROMA_SYNC_202_ROWS=20000 TAP_TIMEOUT=3600 TAP='202_*' bash test/run_all.sh --only tap $(ARGS)

# The PGXN distribution of the committed tree (HEAD): chroma_sync-VERSION.zip with one top
# directory chroma_sync-VERSION/, VERSION being META.json's.
DISTVERSION = $(shell perl -MJSON::PP -0777 -ne 'print decode_json($$_)->{version}' META.json)
.PHONY: dist
dist:
	git archive --format=zip --prefix=$(EXTENSION)-$(DISTVERSION)/ \
		-o $(EXTENSION)-$(DISTVERSION).zip HEAD
	@echo "$(EXTENSION)-$(DISTVERSION).zip"

# The Debian packages (debian/, pg_buildext) of the committed tree (HEAD), built in
# deb-build/ for every PostgreSQL major installed here that debian/pgversions allows
# (PG_SUPPORTED_VERSIONS=18 picks one); needs dpkg-dev, debhelper and
# postgresql-server-dev-all. debian/control is regenerated there for those majors.
.PHONY: deb
deb:
	rm -rf deb-build && mkdir -p deb-build/$(EXTENSION)
	git archive --format=tar HEAD | tar -C deb-build/$(EXTENSION) -xf -
	cd deb-build/$(EXTENSION) && PG_UPDATECONTROL=yes pg_buildext updatecontrol && \
		PG_UPDATECONTROL=yes dpkg-buildpackage -us -uc -b
	ls deb-build/*.deb

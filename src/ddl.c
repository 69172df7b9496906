/*
 * ddl.c — what the DDL event triggers need from C: telling every backend that mirror
 * configuration changed (their trigger caches reload).
 *
 * The event triggers themselves are in the install script: DROP TABLE removes the
 * mirror, dropping or retyping a mirrored column pauses it, disabling its trigger is
 * reported in status, renames need nothing (columns are held by attnum).
 */
#include "postgres.h"

#include "fmgr.h"

#include "shared.h"

PG_FUNCTION_INFO_V1(chroma_sync_config_changed);

Datum
chroma_sync_config_changed(PG_FUNCTION_ARGS)
{
	chroma_bump_config();
	PG_RETURN_VOID();
}

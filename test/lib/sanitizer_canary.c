/*
 * The positive control of test/run_all.sh --sanitize; not part of the extension.
 *
 * Built with the extension's sanitizer flags and loaded into a server started the way the
 * test servers are: sanitizer_canary() commits a signed overflow (UBSan reports and goes
 * on) and then writes past a malloc'd block (ASan reports and aborts the backend). The
 * harness expects both reports in the report directory; without them a run with no
 * reports would prove nothing.
 */
#include "postgres.h"

#include <stdlib.h>

#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(sanitizer_canary);

Datum
sanitizer_canary(PG_FUNCTION_ARGS)
{
	volatile int big = PG_INT32_MAX;
	volatile int sum;
	char	   *block;
	volatile size_t past;

	sum = big + PG_GETARG_INT32(0);
	block = malloc(16);
	past = 16 + (size_t) PG_GETARG_INT32(0);
	if (block != NULL)
		block[past] = 'x';
	free(block);
	PG_RETURN_INT32(sum);
}

/*
 * pg_shim.h — the few backend services src/response.c needs, for running it outside a
 * server (fuzzing). See pg_shim.c.
 */
#ifndef CHROMA_SYNC_PG_SHIM_H
#define CHROMA_SYNC_PG_SHIM_H

#include "postgres.h"

#include <setjmp.h>

/* The last error raised with ereport/elog. */
typedef struct ShimError
{
	int			elevel;
	int			sqlerrcode;
	char		message[512];
	char		detail[512];
	const char *filename;
	int			lineno;
} ShimError;

extern ShimError shim_error;

/*
 * Marks the top of the stack for check_stack_depth (call at the start of every input);
 * the limit is the backend's default max_stack_depth, 2 MB.
 */
extern void shim_set_stack_base(void);

/* Frees everything palloc'd since the last reset (a memory context reset). */
extern void shim_reset_memory(void);

/* Bytes currently palloc'd, and the most palloc'd at once since the last reset. */
extern size_t shim_allocated_bytes(void);
extern size_t shim_peak_bytes(void);

/* The backend's check: ERROR "stack depth limit exceeded" past max_stack_depth. */
extern void check_stack_depth(void);

#endif							/* CHROMA_SYNC_PG_SHIM_H */

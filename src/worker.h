/*
 * worker.h — the launcher and the per-database workers.
 */
#ifndef CHROMA_SYNC_WORKER_H
#define CHROMA_SYNC_WORKER_H

extern char *chroma_worker_databases;

/* Registers the launcher (from _PG_init, under shared_preload_libraries). */
extern void chroma_register_launcher(void);

/* Stops the worker of a database about to be dropped, and waits for it to exit. */
extern void chroma_stop_worker_for_drop(Oid dboid);

/* Installs the utility hook that frees a database of its worker (utility_hook.c). */
extern void chroma_utility_hook_init(void);

#endif							/* CHROMA_SYNC_WORKER_H */

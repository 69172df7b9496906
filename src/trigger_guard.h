/*
 * trigger_guard.h — a capture trigger dropped by someone else than the extension.
 */
#ifndef CHROMA_TRIGGER_GUARD_H
#define CHROMA_TRIGGER_GUARD_H

/* The object access hook's OAT_DROP of a pg_trigger row. */
extern void trigger_guard_dropped(Oid trigoid);

/* Around the extension's own DROP TRIGGER of a mirror's trigger (depth counted). */
extern void trigger_guard_own_begin(void);
extern void trigger_guard_own_end(void);

/* At PRE_COMMIT and PRE_PREPARE; at the end of the transaction. */
extern void trigger_guard_pre_commit(void);
extern void trigger_guard_xact_end(void);

#endif

/*
 * unsettled.h — requests a sync worker left unsettled, remembered across its exit.
 */
#ifndef CHROMA_SYNC_UNSETTLED_H
#define CHROMA_SYNC_UNSETTLED_H

#include "datatype/timestamp.h"

/*
 * In a database's sync worker, once: returns until when requests of the previous worker
 * of this database may still be applied by the server (0: none can), and from now on
 * keeps this worker's own value in the file for the next one.
 */
extern TimestampTz unsettled_begin(void);

/*
 * Once recovery has ended, once: when the server's timeline is not the one the file was
 * written on (a promotion, a point-in-time recovery), returns until when requests of
 * another server may still be applied (one request timeout from now); else 0. From now on
 * the file names this timeline.
 */
extern TimestampTz unsettled_check_timeline(void);

#endif							/* CHROMA_SYNC_UNSETTLED_H */

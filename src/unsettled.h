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

#endif							/* CHROMA_SYNC_UNSETTLED_H */

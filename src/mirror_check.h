/*
 * mirror_check.h — checks of a mirrored table's shape that DDL could break unseen.
 */
#ifndef CHROMA_SYNC_MIRROR_CHECK_H
#define CHROMA_SYNC_MIRROR_CHECK_H

#include "mirror_config.h"

/* Why the mirror cannot stay exact as the table now is, or NULL (in a transaction). */
extern char *mirror_shape_problem(MirrorConfig *m);

#endif							/* CHROMA_SYNC_MIRROR_CHECK_H */

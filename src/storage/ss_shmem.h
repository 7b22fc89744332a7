/*-------------------------------------------------------------------------
 *
 * ss_shmem.h
 *	  The extension's structs in the main shared memory segment
 *	  (ss_shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_SHMEM_H
#define SS_SHMEM_H

#include "postgres.h"

typedef Size (*SSShmemSizeFn) (void);

extern void ss_shmem_reserve(SSShmemSizeFn size);
extern void *ss_shmem_struct(const char *name, Size size,
							 void (*init) (void *ptr));

#endif							/* SS_SHMEM_H */

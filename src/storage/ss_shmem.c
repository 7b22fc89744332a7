/*-------------------------------------------------------------------------
 *
 * ss_shmem.c
 *	  The extension's structs in the main shared memory segment.
 *
 * Nothing needs shared_preload_libraries: a struct is made by the first
 * backend that needs it, from the segment's spare memory (as pg_prewarm's
 * autoprewarm does), and reserved at startup when the library is
 * preloaded, so that it never runs short there.  A server crash resets
 * the structs with the rest of shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "ss_shmem.h"

#define SS_SHMEM_STRUCTS	4

/* the sizes to reserve, asked when the server requests its memory */
static SSShmemSizeFn sizes[SS_SHMEM_STRUCTS];
static int	nsizes = 0;
static shmem_request_hook_type prev_shmem_request_hook = NULL;

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < nsizes; i++)
		RequestAddinShmemSpace(MAXALIGN(sizes[i] ()));
}

/*
 * Called by a part's init: while the library is preloaded, reserve a
 * struct of size() bytes, asked once the server knows its settings
 * (MaxBackends); otherwise nothing.
 */
void
ss_shmem_reserve(SSShmemSizeFn size)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	if (nsizes >= SS_SHMEM_STRUCTS)
		elog(ERROR, "too many streamsketch shared memory structs");
	if (nsizes == 0)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = request_shmem;
	}
	sizes[nsizes++] = size;
}

/*
 * Find or make the struct called name: the first backend to ask for it
 * runs init on it, under the lock that serializes every extension's
 * structs.  Raises an error if the segment has no room left for it.
 */
void *
ss_shmem_struct(const char *name, Size size, void (*init) (void *ptr))
{
	void	   *ptr;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ptr = ShmemInitStruct(name, size, &found);
	if (!found)
		init(ptr);
	LWLockRelease(AddinShmemInitLock);
	return ptr;
}

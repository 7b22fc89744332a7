/*-------------------------------------------------------------------------
 *
 * unit_test.h
 *	  What the standalone unit tests share: failing with the place, and
 *	  deterministic random numbers (splitmix64), so that a failure is
 *	  reproducible from the seed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef UNIT_TEST_H
#define UNIT_TEST_H

#include <stdio.h>
#include <stdlib.h>

#define FAIL(...) \
	do { \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n"); \
		exit(1); \
	} while (0)

/* the next number of the splitmix64 sequence whose state is *state */
static inline uint64
splitmix64(uint64 *state)
{
	uint64		z = (*state += UINT64CONST(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

#endif							/* UNIT_TEST_H */

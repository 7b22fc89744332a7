/*
 * firehose.c -- the active-set stream generator of the LERT evaluation,
 * written for the lert benchmark (test/bench/lert_bench.py).
 *
 * An active set of `active` slots each holds a key and the number of
 * observations it has left; a key's lifetime count is power-law
 * distributed with exponent -1.5 (floor(1/u^2) for u uniform in (0, 1]),
 * capped at 65,536.  Each observation picks a slot uniformly at random, so
 * a key's arrivals are spread over its lifetime; a key that has used up its
 * count is replaced by a fresh key from an unbounded key space (keys are
 * numbered in order of first appearance, then mixed by an invertible
 * function so that they are not sorted).
 *
 *	 firehose N ACTIVE SEED > stream.txt		one key per line
 *
 * Deterministic for a given SEED (xorshift64*).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state;

static uint64_t
next64(void)
{
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 0x2545F4914F6CDD1DULL;
}

/* uniform in (0, 1] */
static double
unit(void)
{
	return ((next64() >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static int64_t
lifetime(void)
{
	double		u = unit();
	double		c = 1.0 / (u * u);

	return c >= 65536.0 ? 65536 : (int64_t) c;
}

/* a bijection on 63-bit non-negative integers, so keys are unsorted */
static int64_t
mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return (int64_t) (x & 0x7fffffffffffffffULL);
}

int
main(int argc, char **argv)
{
	long long	n;
	long		active;
	uint64_t   *key;
	int64_t    *left;
	uint64_t	next_key = 1;

	if (argc != 4)
	{
		fprintf(stderr, "usage: firehose N ACTIVE SEED\n");
		return 2;
	}
	n = atoll(argv[1]);
	active = atol(argv[2]);
	state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
	if (n < 0 || active < 1)
		return 2;
	key = malloc(sizeof(uint64_t) * active);
	left = malloc(sizeof(int64_t) * active);
	if (!key || !left)
		return 1;
	for (long i = 0; i < active; i++)
	{
		key[i] = next_key++;
		left[i] = lifetime();
	}
	for (long long p = 0; p < n; p++)
	{
		long		i = (long) (next64() % (uint64_t) active);

		printf("%lld\n", (long long) mix(key[i]));
		if (--left[i] == 0)
		{
			key[i] = next_key++;
			left[i] = lifetime();
		}
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

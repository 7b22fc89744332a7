/*
 * notify_delay.c -- the notification delay of a lert with a NOTIFY channel,
 * written for the notification benchmark (test/bench/notify_bench.py).
 *
 * Two connections, one thread each:
 *
 * - a writer commits one INSERT per transaction (autocommit) at RATE
 *   commits per second on a fixed schedule (a late commit is not made up
 *   for by sleeping less later: the next one starts at once).  Commit i
 *   observes, in each of LANES lanes, the keys i-T+1 .. i (those >= 0), so
 *   key k of a lane reaches T at commit k+T-1 and each commit from T-1 on
 *   makes exactly one key per lane reach T.  Key k of lane l is
 *   l * 1000000000 + k.  The time the COMMIT returned (PQexec's return)
 *   is recorded per commit.
 * - a listener LISTENs on CHANNEL before the writer starts and then never
 *   sends a query: it waits on the socket with poll(), reads with
 *   PQconsumeInput and takes every notification with PQnotifies, stamping
 *   its arrival.
 *
 * Both clocks are CLOCK_MONOTONIC in one process.  The listener stops
 * once every expected key has been notified and LINGER more seconds have
 * passed (to catch duplicates), or WAIT seconds after the last commit.
 * With READER non-zero, after that WAIT a third connection queries the
 * lert (SELECT count(*): a reader consolidates what is waiting) and the
 * listener goes on for up to another WAIT seconds; the time of that query
 * is printed.
 *
 *	 notify_delay CONNINFO TABLE CHANNEL RATE LANES COMMITS T WAIT LINGER READER
 *
 * Output on stdout, tab-separated:
 *	 commit  I  START_NS  DONE_NS                 one per commit
 *	 key     KEY  COMMIT  COMMIT_DONE_NS  FIRST_ARRIVAL_NS(-1: none)  N
 *	                                              one per expected key
 *	 unexpected  KEY  ARRIVAL_NS                  a notification of another key
 *	 reader  START_NS  DONE_NS                    the reader's query
 *	 end     NS                                   the listener stopped
 * Times are nanoseconds since the writer's start.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define LANE_SPAN 1000000000LL

static const char *conninfo;
static const char *table;
static const char *channel;
static double rate;
static int	lanes;
static long commits;
static int	T;
static double wait_s;
static double linger_s;
static int	reader;

static int64_t t0;
static int64_t *commit_start;
static int64_t *commit_done;
static int64_t *arrival;		/* per expected key: first arrival, -1 none */
static int *notified;			/* per expected key: notifications */
static long expected_per_lane;
static int	writer_finished;	/* __atomic */
static int64_t writer_end;		/* __atomic */

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PGconn *
connect_db(void)
{
	PGconn	   *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "connection failed: %s", PQerrorMessage(c));
		exit(1);
	}
	return c;
}

static void
exec_ok(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
		exit(1);
	}
	PQclear(r);
}

static void *
writer_main(void *arg)
{
	PGconn	   *c = arg;
	size_t		cap = (size_t) lanes * T * 24 + 256;
	char	   *sql = malloc(cap);
	int64_t		period = (int64_t) (1e9 / rate);

	for (long i = 0; i < commits; i++)
	{
		int64_t		due = t0 + i * period;
		int64_t		now = now_ns();
		size_t		len;
		int			first = 1;

		if (now < due)
		{
			struct timespec ts = {due / 1000000000LL, due % 1000000000LL};

			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
		}
		len = snprintf(sql, cap, "INSERT INTO %s (key) VALUES ", table);
		for (int l = 0; l < lanes; l++)
			for (long k = i - T + 1; k <= i; k++)
			{
				if (k < 0)
					continue;
				len += snprintf(sql + len, cap - len, "%s(%lld)", first ? "" : ",",
								(long long) (l * LANE_SPAN + k));
				first = 0;
			}
		commit_start[i] = now_ns() - t0;
		exec_ok(c, sql);
		commit_done[i] = now_ns() - t0;
	}
	__atomic_store_n(&writer_end, now_ns(), __ATOMIC_SEQ_CST);
	__atomic_store_n(&writer_finished, 1, __ATOMIC_SEQ_CST);
	free(sql);
	return NULL;
}

static long received_keys = 0;
static long unexpected_n = 0;

static void
take_notifications(PGconn *c, FILE *unexpected)
{
	PGnotify   *n;

	if (!PQconsumeInput(c))
	{
		fprintf(stderr, "listener: %s", PQerrorMessage(c));
		exit(1);
	}
	while ((n = PQnotifies(c)) != NULL)
	{
		int64_t		t = now_ns() - t0;
		long long	key = strtoll(n->extra, NULL, 10);
		long long	lane = key / LANE_SPAN;
		long long	k = key % LANE_SPAN;

		if (strcmp(n->relname, channel) == 0 && key >= 0 && lane < lanes &&
			k < expected_per_lane)
		{
			long		idx = lane * expected_per_lane + k;

			if (notified[idx]++ == 0)
			{
				arrival[idx] = t;
				received_keys++;
			}
		}
		else
		{
			fprintf(unexpected, "unexpected\t%s\t%" PRId64 "\n", n->extra, t);
			unexpected_n++;
		}
		PQfreemem(n);
	}
}

int
main(int argc, char **argv)
{
	PGconn	   *w,
			   *l;
	pthread_t	wt;
	char		sql[512];
	int64_t		all_at = -1;
	int64_t		reader_start = -1,
				reader_done = -1;
	long		expected;
	struct pollfd pfd;
	char	   *ubuf = NULL;
	size_t		ulen = 0;
	FILE	   *unexpected;

	if (argc != 11)
	{
		fprintf(stderr, "usage: notify_delay CONNINFO TABLE CHANNEL RATE LANES COMMITS T WAIT LINGER READER\n");
		return 2;
	}
	conninfo = argv[1];
	table = argv[2];
	channel = argv[3];
	rate = atof(argv[4]);
	lanes = atoi(argv[5]);
	commits = atol(argv[6]);
	T = atoi(argv[7]);
	wait_s = atof(argv[8]);
	linger_s = atof(argv[9]);
	reader = atoi(argv[10]);
	if (rate <= 0 || lanes < 1 || commits < T || T < 1)
		return 2;
	expected_per_lane = commits - T + 1;
	expected = expected_per_lane * lanes;
	commit_start = calloc(commits, sizeof(int64_t));
	commit_done = calloc(commits, sizeof(int64_t));
	arrival = malloc(sizeof(int64_t) * expected);
	notified = calloc(expected, sizeof(int));
	for (long i = 0; i < expected; i++)
		arrival[i] = -1;
	unexpected = open_memstream(&ubuf, &ulen);

	w = connect_db();
	l = connect_db();
	snprintf(sql, sizeof(sql), "LISTEN %s", channel);
	exec_ok(l, sql);
	pfd.fd = PQsocket(l);
	pfd.events = POLLIN;

	t0 = now_ns();
	if (pthread_create(&wt, NULL, writer_main, w) != 0)
		return 1;
	for (;;)
	{
		int64_t		now;
		int			rc = poll(&pfd, 1, 20);

		if (rc < 0 && errno != EINTR)
		{
			perror("poll");
			return 1;
		}
		take_notifications(l, unexpected);
		now = now_ns();
		if (received_keys == expected && all_at < 0)
			all_at = now;
		if (!__atomic_load_n(&writer_finished, __ATOMIC_SEQ_CST))
			continue;
		if (all_at >= 0 && now - all_at >= (int64_t) (linger_s * 1e9))
			break;
		if (now - __atomic_load_n(&writer_end, __ATOMIC_SEQ_CST) >= (int64_t) (wait_s * 1e9))
		{
			PGconn	   *r;
			int64_t		until;

			if (!reader || reader_start >= 0)
				break;
			/* a reader consolidates what waits, then listen on */
			r = connect_db();
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
			reader_start = now_ns() - t0;
			exec_ok(r, sql);
			reader_done = now_ns() - t0;
			PQfinish(r);
			until = now_ns() + (int64_t) (wait_s * 1e9);
			while (now_ns() < until && !(all_at >= 0 && now_ns() - all_at >= (int64_t) (linger_s * 1e9)))
			{
				poll(&pfd, 1, 20);
				take_notifications(l, unexpected);
				if (received_keys == expected && all_at < 0)
					all_at = now_ns();
			}
			break;
		}
	}
	pthread_join(wt, NULL);
	fclose(unexpected);

	for (long i = 0; i < commits; i++)
		printf("commit\t%ld\t%" PRId64 "\t%" PRId64 "\n", i, commit_start[i], commit_done[i]);
	for (int ln = 0; ln < lanes; ln++)
		for (long k = 0; k < expected_per_lane; k++)
		{
			long		idx = ln * expected_per_lane + k;
			long		c = k + T - 1;

			printf("key\t%lld\t%ld\t%" PRId64 "\t%" PRId64 "\t%d\n",
				   (long long) (ln * LANE_SPAN + k), c, commit_done[c], arrival[idx], notified[idx]);
		}
	fputs(ubuf, stdout);
	if (reader_start >= 0)
		printf("reader\t%" PRId64 "\t%" PRId64 "\n", reader_start, reader_done);
	printf("end\t%" PRId64 "\n", now_ns() - t0);
	fprintf(stderr, "notify_delay: %ld commits, %ld of %ld keys notified, %ld unexpected\n",
			commits, received_keys, expected, unexpected_n);
	PQfinish(w);
	PQfinish(l);
	return fflush(stdout) == 0 ? 0 : 1;
}

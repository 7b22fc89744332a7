-- Retention by time: a bfile or a cbt range partitioned by its time
-- column drops old data a partition at a time (DETACH, then DROP), and
-- the functions on the parent then answer for the partitions left.

-- a bfile sample of events by day, one partition per 10 days
CREATE TABLE ret_s (id int, day int NOT NULL) PARTITION BY RANGE (day);
SELECT bfile_create('ret_s_0', 'id int, day int NOT NULL', sample_size => 100000,
	time_column => 'day');
SELECT bfile_create('ret_s_1', 'id int, day int NOT NULL', sample_size => 100000,
	time_column => 'day');
SELECT bfile_create('ret_s_2', 'id int, day int NOT NULL', sample_size => 100000,
	time_column => 'day');
ALTER TABLE ret_s ATTACH PARTITION ret_s_0 FOR VALUES FROM (0) TO (10);
ALTER TABLE ret_s ATTACH PARTITION ret_s_1 FOR VALUES FROM (10) TO (20);
ALTER TABLE ret_s ATTACH PARTITION ret_s_2 FOR VALUES FROM (20) TO (30);
INSERT INTO ret_s SELECT g, g % 30 FROM generate_series(1, 3000) g;
SELECT seen, size FROM bfile_info('ret_s');
-- the oldest ten days leave with their partition
ALTER TABLE ret_s DETACH PARTITION ret_s_0;
DROP TABLE ret_s_0;
SELECT seen, size FROM bfile_info('ret_s');
SELECT min(day), max(day), count(*) FROM bfile_subsample(NULL::ret_s, 100000);
SELECT count(*) FROM bfile_window(NULL::ret_s, 0, 15);
SELECT min(day), count(*) FROM ret_s;

-- a cbt of page views by day, partitioned by the time its rows carry
-- (max(day) AS day: the input's day in a result column)
CREATE TABLE ret_v (url text, hits bigint, day int) PARTITION BY RANGE (day);
SELECT cbt_create('ret_v_0', group_by => 'url text',
	aggregates => 'count(*) AS hits, max(day::int) AS day');
SELECT cbt_create('ret_v_1', group_by => 'url text',
	aggregates => 'count(*) AS hits, max(day::int) AS day');
ALTER TABLE ret_v ATTACH PARTITION ret_v_0 FOR VALUES FROM (0) TO (10);
ALTER TABLE ret_v ATTACH PARTITION ret_v_1 FOR VALUES FROM (10) TO (20);
INSERT INTO ret_v (url, day) SELECT 'u' || g % 5, g % 20 FROM generate_series(1, 1000) g;
SELECT hits, day FROM cbt_lookup(NULL::ret_v, 'u1');
ALTER TABLE ret_v DETACH PARTITION ret_v_0;
DROP TABLE ret_v_0;
-- the group counts the rows of the days left only
SELECT hits, day FROM cbt_lookup(NULL::ret_v, 'u1');
SELECT count(*) FROM generate_series(1, 1000) g WHERE g % 5 = 1 AND g % 20 >= 10;

DROP TABLE ret_s, ret_v;

-- errors: errors a user can reach get a proper SQLSTATE, never XX000
-- (after every statement that must fail, \echo :LAST_ERROR_SQLSTATE shows
-- its SQLSTATE)
SET client_min_messages = warning;
LOAD 'streamsketch';

CREATE TABLE er_bcms (k int) USING bcms;
CREATE TABLE er_qf (k int) USING quotient_filter;
CREATE TABLE er_bloom (k int) USING bloom_filter;
CREATE TABLE er_heap (k int);
CREATE VIEW er_view AS SELECT 1 AS k;
CREATE INDEX er_heap_k ON er_heap (k);

-- a relation OID that does not exist: 42P01
SELECT bcms_estimate(0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_info(0);
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_flush(0);
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_merge(0, cms_agg(1, 0.01, 0.1));
\echo :LAST_ERROR_SQLSTATE
SELECT qf_info(0);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_contains(0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_count(0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_delete(0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge('er_qf', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge(0, 'er_qf');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge_value(0, qfilter_agg(1, 100, 0.01));
\echo :LAST_ERROR_SQLSTATE
SELECT qf_resize(0);
\echo :LAST_ERROR_SQLSTATE
SELECT bloom_info(0);
\echo :LAST_ERROR_SQLSTATE
SELECT bloom_contains(0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT bloom_flush(0);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_info(4294967295::oid::regclass);
\echo :LAST_ERROR_SQLSTATE

-- not a structure, or a structure of another access method: 42809
SELECT bcms_info('er_heap');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_info('er_view');
\echo :LAST_ERROR_SQLSTATE
SELECT bloom_info('er_heap_k');
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_estimate('er_qf', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_count('er_bloom', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT bloom_contains('er_bcms', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge('er_qf', 'er_bcms');
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_merge('er_qf', cms_agg(1, 0.01, 0.1));
\echo :LAST_ERROR_SQLSTATE
SELECT qf_merge_value('er_bcms', qfilter_agg(1, 100, 0.01));
\echo :LAST_ERROR_SQLSTATE

-- writers in a read-only transaction: 25006 (readers work)
BEGIN READ ONLY;
SELECT bcms_estimate('er_bcms', 1), qf_count('er_qf', 1), bloom_contains('er_bloom', 1);
SELECT bcms_flush('er_bcms');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT qf_delete('er_qf', 1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT bloom_flush('er_bloom');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT qf_resize('er_qf');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- a temporary structure may change in a read-only transaction (as nextval)
CREATE TEMP TABLE er_temp (k int) USING bloom_filter;
BEGIN READ ONLY;
SELECT bloom_flush('er_temp');
ROLLBACK;

-- cms and qfilter values naming a key type that does not exist: 42704
-- (a type OID is accepted in the text form, as regtype accepts one)
SELECT ('version=1 seed=1592598101 epsilon=0.1 delta=0.1 depth=3 cols_per_page=339 '
        'pages=1 total=1 type="23" counters=.Im1.Fp1.Ni1.Dl')::cms IS NOT NULL AS int4_by_oid;
SELECT 'version=1 seed=1592598101 epsilon=0.1 delta=0.1 depth=3 cols_per_page=339 pages=1 total=1 type="4294967295" counters=.Im1.Fp1.Ni1.Dl'::cms;
\echo :LAST_ERROR_SQLSTATE
SELECT 'version=1 seed=1592598101 epsilon=0.1 delta=0.1 depth=3 cols_per_page=339 pages=1 total=1 type="no_such_type" counters=.Im1.Fp1.Ni1.Dl'::cms;
\echo :LAST_ERROR_SQLSTATE
SELECT regexp_replace(qfilter_agg(1, 10, 0.1)::text, 'type="integer"', 'type="4294967295"')::qfilter;
\echo :LAST_ERROR_SQLSTATE
-- the same through the binary input (cms_recv, qfilter_recv): the binary
-- form names the key type as text; "integer" becomes "1234567", an OID
-- without a type
SELECT cms_agg(k, 0.1, 0.1) AS c, qfilter_agg(k, 10, 0.1) AS q
INTO TEMP er_values FROM generate_series(1, 3) k;
CREATE TEMP TABLE er_c (c cms);
CREATE TEMP TABLE er_q (q qfilter);
\getenv abs_builddir PG_ABS_BUILDDIR
\set bin :abs_builddir '/results/errors_value.bin'
\set bad :abs_builddir '/results/errors_bad_value.bin'
\set prog 'base64 -d > ' :bad
COPY (SELECT c FROM er_values) TO :'bin' WITH (FORMAT binary);
COPY er_c FROM :'bin' WITH (FORMAT binary);
COPY (SELECT translate(encode(decode(replace(encode(pg_read_binary_file(:'bin'), 'hex'),
                                             encode('integer', 'hex'),
                                             encode('1234567', 'hex')), 'hex'),
                              'base64'), E'\n', ''))
	TO PROGRAM :'prog';
COPY er_c FROM :'bad' WITH (FORMAT binary);
\echo :LAST_ERROR_SQLSTATE
COPY (SELECT q FROM er_values) TO :'bin' WITH (FORMAT binary);
COPY er_q FROM :'bin' WITH (FORMAT binary);
COPY (SELECT translate(encode(decode(replace(encode(pg_read_binary_file(:'bin'), 'hex'),
                                             encode('integer', 'hex'),
                                             encode('1234567', 'hex')), 'hex'),
                              'base64'), E'\n', ''))
	TO PROGRAM :'prog';
COPY er_q FROM :'bad' WITH (FORMAT binary);
\echo :LAST_ERROR_SQLSTATE
-- the good copies came through
SELECT cms_estimate(c, 2) AS cms_2, qfilter_count(q, 2) AS qf_2 FROM er_c, er_q;

-- a stored value whose key type was dropped since: 42704 on use, the OID
-- in its text form
CREATE TYPE er_enum AS ENUM ('a', 'b');
CREATE TEMP TABLE er_dropped AS
SELECT cms_agg(e, 0.1, 0.1) AS c, qfilter_agg(e, 10, 0.1) AS q
FROM unnest('{a,b,b}'::er_enum[]) e;
DROP TYPE er_enum;
\set VERBOSITY terse
SELECT cms_estimate(c, 'a'::text) FROM er_dropped;
\echo :LAST_ERROR_SQLSTATE
SELECT qfilter_contains(q, 'a'::text) FROM er_dropped;
\echo :LAST_ERROR_SQLSTATE
SELECT (cms_info(c)).total, (qfilter_info(q)).total,
       c::text ~ 'type="[0-9]+"' AS cms_names_oid,
       q::text ~ 'type="[0-9]+"' AS qfilter_names_oid
FROM er_dropped;
SELECT cms_union(c, (SELECT cms_agg(1, 0.1, 0.1))) FROM er_dropped;
\echo :LAST_ERROR_SQLSTATE
SELECT qfilter_union(q, (SELECT qfilter_agg(1, 10, 0.1))) FROM er_dropped;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

DROP TABLE er_dropped, er_bcms, er_qf, er_bloom, er_heap, er_temp, er_values, er_c, er_q;
DROP VIEW er_view;

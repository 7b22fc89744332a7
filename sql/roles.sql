-- Ordinary roles: a role with CREATE on a schema creates, fills, queries,
-- truncates and drops every kind of structure it owns; other roles need
-- SELECT to query and INSERT to insert, and never change the structure or
-- its parameters.
\set VERBOSITY sqlstate
CREATE ROLE ss_owner;
CREATE ROLE ss_other;
CREATE SCHEMA ss_roles;
GRANT CREATE, USAGE ON SCHEMA ss_roles TO ss_owner;
GRANT USAGE ON SCHEMA ss_roles TO ss_other;

SET ROLE ss_owner;
SET search_path = ss_roles, public;
CREATE TABLE r_bcms (k text) USING bcms;
CREATE TABLE r_qf (k int) USING quotient_filter;
CREATE TABLE r_bqf (k int) USING buffered_quotient_filter;
CREATE TABLE r_cf (k int) USING cascade_filter;
CREATE TABLE r_bloom (k int) USING bloom_filter;
SELECT bcms_create('r_bcms2', 'int', epsilon => 0.01, weighted => true);
SELECT qf_create('r_qf2', 'int', capacity => 1000, access_method => 'cascade_filter');
SELECT bloom_create('r_bloom2', 'int', capacity => 1000, mode => 'elevator');
INSERT INTO r_bcms VALUES ('a'), ('a');
INSERT INTO r_bcms2 VALUES (1, 5);
INSERT INTO r_qf VALUES (1), (1);
INSERT INTO r_bqf VALUES (1);
INSERT INTO r_cf VALUES (1);
INSERT INTO r_qf2 VALUES (1);
INSERT INTO r_bloom VALUES (1);
INSERT INTO r_bloom2 VALUES (1);
SELECT bcms_estimate('r_bcms', 'a'::text) AS a, bcms_estimate('r_bcms2', 1) AS w,
	   qf_count('r_qf', 1) AS qf, qf_contains('r_bqf', 1) AS bqf,
	   qf_contains('r_cf', 1) AS cf, qf_contains('r_qf2', 1) AS qf2,
	   bloom_contains('r_bloom', 1) AS bloom, bloom_contains('r_bloom2', 1) AS bloom2;
SELECT bcms_flush('r_bcms'), bloom_flush('r_bloom2');
SELECT qf_delete('r_qf', 1);
SELECT qf_count('r_qf', 1);
SELECT qf_resize('r_qf2') > 0 AS resized;
SELECT (bcms_info('r_bcms')).items, (qf_info('r_cf')).items, (bloom_info('r_bloom')).items;
-- the owner may set parameters on a structure never written to
CREATE TABLE r_fresh (k int) USING bcms;
SECURITY LABEL FOR streamsketch ON TABLE r_fresh IS
	'mode=plain epsilon=0.01 delta=0.1 width=272 depth=3 buffer_size_kb=0 conservative=off seed=7';
SELECT mode, width, depth, seed FROM bcms_info('r_fresh');
TRUNCATE r_bcms, r_qf, r_bqf, r_cf, r_bloom;
SELECT bcms_estimate('r_bcms', 'a'::text) AS a, qf_count('r_qf', 1) AS qf,
	   bloom_contains('r_bloom', 1) AS bloom;
GRANT SELECT ON r_bcms, r_qf, r_bloom TO ss_other;
GRANT INSERT ON r_cf TO ss_other;
INSERT INTO r_bcms VALUES ('b');
INSERT INTO r_qf VALUES (3);
INSERT INTO r_bloom VALUES (3);

-- another role: SELECT lets it query, INSERT lets it insert, nothing more
SET ROLE ss_other;
SELECT bcms_estimate('r_bcms', 'b'::text) AS b, qf_contains('r_qf', 3) AS qf,
	   bloom_contains('r_bloom', 3) AS bloom;
SELECT (bcms_info('r_bcms')).items;
INSERT INTO r_bcms VALUES ('x');
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_flush('r_bcms');
\echo :LAST_ERROR_SQLSTATE
SELECT qf_delete('r_qf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT qf_resize('r_qf');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO r_cf VALUES (9);
SELECT qf_contains('r_cf', 9);
\echo :LAST_ERROR_SQLSTATE
SELECT bcms_estimate('r_bcms2', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT log_records FROM streamsketch_log_info('r_bcms2');
\echo :LAST_ERROR_SQLSTATE
SELECT log_records FROM streamsketch_log_info('r_bcms');
SELECT qf_merge('r_qf2', 'r_qf');
\echo :LAST_ERROR_SQLSTATE
TRUNCATE r_bcms;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE r_qf;
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR streamsketch ON TABLE r_bloom IS
	'mode=plain capacity=10 fp_rate=0.5 buffer_size_kb=0 seed=1';
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE r_nope (k int) USING bcms;
\echo :LAST_ERROR_SQLSTATE

-- nothing changed
SET ROLE ss_owner;
SELECT bcms_estimate('r_bcms', 'b'::text) AS b, qf_contains('r_qf', 3) AS qf,
	   qf_contains('r_cf', 9) AS cf, bloom_contains('r_bloom', 3) AS bloom;
SELECT objname, label FROM pg_catalog.pg_seclabels
WHERE provider = 'streamsketch' AND objname = 'r_bloom';
DROP TABLE r_bcms, r_qf, r_bqf, r_cf, r_bloom, r_bcms2, r_qf2, r_bloom2, r_fresh;
RESET search_path;
RESET ROLE;
-- commits that used to run SQL at commit time without a snapshot
BEGIN;
CREATE TABLE ss_roles.n (k int) USING bcms;
INSERT INTO ss_roles.n VALUES (1);
GRANT SELECT ON ss_roles.n TO PUBLIC;
COMMIT;
BEGIN;
TRUNCATE ss_roles.n;
INSERT INTO ss_roles.n VALUES (1), (1);
ANALYZE ss_roles.n;
COMMIT;
SELECT bcms_estimate('ss_roles.n', 1);
DROP TABLE ss_roles.n;
SELECT count(*) AS labels_left FROM pg_catalog.pg_seclabel
WHERE provider = 'streamsketch'
  AND objoid NOT IN (SELECT oid FROM pg_catalog.pg_class);
DROP SCHEMA ss_roles;
DROP ROLE ss_owner;
DROP ROLE ss_other;

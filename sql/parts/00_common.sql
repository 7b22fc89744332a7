/* streamsketch -- external-memory streaming structures for PostgreSQL */

\echo Use "CREATE EXTENSION streamsketch" to load this file. \quit


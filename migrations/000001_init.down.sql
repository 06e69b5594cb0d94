DROP TABLE IF EXISTS kafka2pg.dead_letters;
DROP TABLE IF EXISTS kafka2pg.offsets;
DROP SCHEMA IF EXISTS kafka2pg;

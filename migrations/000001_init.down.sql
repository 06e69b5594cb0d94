DROP TABLE IF EXISTS kafka2pg.dead_letters;
DROP TABLE IF EXISTS kafka2pg.offsets;
-- The schema itself is dropped by Down once the migration history, which
-- lives in it, is no longer needed.

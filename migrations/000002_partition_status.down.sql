DROP VIEW IF EXISTS kafka2pg.partition_status;
ALTER TABLE kafka2pg.offsets
    DROP COLUMN IF EXISTS log_end_offset,
    DROP COLUMN IF EXISTS log_end_offset_at,
    DROP COLUMN IF EXISTS committed_at;

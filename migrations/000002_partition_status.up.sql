-- The log end offset the bridge last saw for each partition, written in the
-- same transaction as next_offset, so lag can be queried with SQL next to
-- the data without asking Kafka.
-- committed_at is the time of the last data transaction (updated_at also
-- moves on every claim).
ALTER TABLE kafka2pg.offsets
    ADD COLUMN log_end_offset    bigint,
    ADD COLUMN log_end_offset_at timestamptz,
    ADD COLUMN committed_at      timestamptz;

CREATE VIEW kafka2pg.partition_status AS
SELECT consumer_group,
       topic,
       partition,
       next_offset,
       log_end_offset,
       CASE WHEN log_end_offset IS NULL THEN NULL
            ELSE greatest(log_end_offset - coalesce(next_offset, 0), 0)
       END                AS lag,
       log_end_offset_at  AS log_end_offset_seen_at,
       committed_at       AS last_commit_at,
       epoch
FROM kafka2pg.offsets;

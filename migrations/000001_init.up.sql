-- The kafka2pg schema: durable consumer positions (the source of truth for
-- where each partition resumes) and the dead letters of records that could not
-- be written. Both are only ever written in the same transaction as the rows.
-- Created only when missing: CREATE SCHEMA IF NOT EXISTS needs the CREATE
-- privilege on the database even when the schema exists, and an administrator
-- may have created it for a migrating role without that privilege. (Up
-- creates the schema before this runs, to hold the migration history.)
DO $$
BEGIN
    IF to_regnamespace('kafka2pg') IS NULL THEN
        CREATE SCHEMA kafka2pg;
    END IF;
END
$$;

CREATE TABLE kafka2pg.offsets (
    consumer_group text        NOT NULL,
    topic          text        NOT NULL,
    partition      integer     NOT NULL,
    -- The offset of the next record to consume. NULL: the partition was
    -- claimed but nothing has been written yet (the start policy applies).
    next_offset    bigint      CHECK (next_offset >= 0),
    -- Bumped by every claim; a write succeeds only while its epoch is current.
    epoch          bigint      NOT NULL DEFAULT 1,
    -- Kafka leader epoch of the last written record (-1: unknown), so a seek
    -- keeps KIP-320 truncation detection.
    leader_epoch   integer     NOT NULL DEFAULT -1,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition)
);

CREATE TABLE kafka2pg.dead_letters (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group  text        NOT NULL,
    topic           text        NOT NULL,
    partition       integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    kafka_timestamp timestamptz,
    key             bytea,
    value           bytea,
    headers         jsonb,
    target_table    text,
    error_kind      text        NOT NULL,
    error_message   text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dead_letters_source_idx
    ON kafka2pg.dead_letters (consumer_group, topic, partition, kafka_offset);
CREATE INDEX dead_letters_created_at_idx ON kafka2pg.dead_letters (created_at);

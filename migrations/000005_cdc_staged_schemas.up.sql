-- Connect's JsonConverter (schemas.enable) writes each event's schema into
-- its key and value: two thirds of a Debezium event's bytes, and the same
-- bytes in every event of a table. A staged event keeps its payload, and
-- the schema once in cdc_staged_schemas, by its SHA-256; the applier puts
-- the event back together byte for byte. Rows are never deleted: a digest
-- names its schema for ever, so a staging never races a prune, and there
-- is one row per schema text a source ever sent.
CREATE TABLE kafka2pg.cdc_staged_schemas (
    digest    bytea       PRIMARY KEY,
    schema    bytea       NOT NULL,
    staged_at timestamptz NOT NULL DEFAULT now()
);

-- NULL: the key or value is staged whole (not a {"schema":...,"payload":...}
-- envelope, or staged by an earlier release).
ALTER TABLE kafka2pg.cdc_staged ADD COLUMN key_schema bytea, ADD COLUMN value_schema bytea;

-- The queues' keys are compared byte for byte: under a database's
-- linguistic collation every comparison of their index went through
-- strcoll.
ALTER TABLE kafka2pg.cdc_staged
    ALTER COLUMN consumer_group TYPE text COLLATE "C",
    ALTER COLUMN source TYPE text COLLATE "C",
    ALTER COLUMN txid TYPE text COLLATE "C";
ALTER TABLE kafka2pg.cdc_tx_ends
    ALTER COLUMN consumer_group TYPE text COLLATE "C",
    ALTER COLUMN source TYPE text COLLATE "C",
    ALTER COLUMN txid TYPE text COLLATE "C";

-- An END before its applier's position (cdc_appliers.applied_tx_offset)
-- is applied; only an END applied partially (on_incomplete: apply) is
-- still marked, applied_at and applied_events set (earlier releases
-- marked every one). The ENDs are found by position alone, through one
-- index: the two halves of applied_at no longer mean pending and applied.
DROP INDEX IF EXISTS kafka2pg.cdc_tx_ends_pending_idx;
DROP INDEX IF EXISTS kafka2pg.cdc_tx_ends_applied_idx;
CREATE INDEX cdc_tx_ends_offset_idx ON kafka2pg.cdc_tx_ends (consumer_group, source, tx_offset);

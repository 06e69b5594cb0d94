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
-- still marked, applied_at and applied_events set (earlier releases marked
-- every one). The partial index of unmarked ENDs stays: it is what the
-- head and window reads and the pruning go through, and, unlike an index
-- of all ENDs by offset, Postgres cannot take it for the probes of an END
-- by its transaction id, which the primary key serves (with the statistics
-- of an empty queue it took such an index for them, and read every END of
-- the source per probe).

-- An applier deletes the END records it applied once its applied position
-- is far enough past them (ingest.ApplierConfig.RetainEnds): this index
-- finds them by position.
CREATE INDEX cdc_tx_ends_applied_idx ON kafka2pg.cdc_tx_ends (consumer_group, source, tx_offset)
    WHERE applied_at IS NOT NULL;

-- A staged event's Kafka timestamp: a soft delete applied with its
-- transaction marks the row with it, as one applied from its batch does.
ALTER TABLE kafka2pg.cdc_staged ADD COLUMN kafka_timestamp timestamptz;

-- A staged event is one of its transaction's total_order: that key
-- serves the apply's cursor, which reads a transaction's events in that
-- order, and tells a copy of an event (a connector's replay) from a new
-- one, so the staging keeps one index where it had two.
ALTER TABLE kafka2pg.cdc_staged DROP CONSTRAINT cdc_staged_pkey;
DROP INDEX kafka2pg.cdc_staged_order_idx;
ALTER TABLE kafka2pg.cdc_staged ADD PRIMARY KEY (consumer_group, source, txid, total_order);

-- A staged value is a Connect JSON envelope, often over the 2 kB at which
-- Postgres compresses it: lz4, where the server has it, compresses and
-- decompresses it for a fraction of pglz's CPU.
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE kafka2pg.cdc_staged ALTER COLUMN key SET COMPRESSION lz4, ALTER COLUMN value SET COMPRESSION lz4;
    END IF;
END $$;

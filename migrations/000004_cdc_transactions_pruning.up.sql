-- An applier deletes the END records it applied once its applied position
-- is far enough past them (ingest.ApplierConfig.RetainEnds): this index
-- finds them by position.
CREATE INDEX cdc_tx_ends_applied_idx ON kafka2pg.cdc_tx_ends (consumer_group, source, tx_offset)
    WHERE applied_at IS NOT NULL;

-- A staged event's Kafka timestamp: a soft delete applied with its
-- transaction marks the row with it, as one applied from its batch does.
ALTER TABLE kafka2pg.cdc_staged ADD COLUMN kafka_timestamp timestamptz;

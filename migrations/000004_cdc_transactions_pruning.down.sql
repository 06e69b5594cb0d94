ALTER TABLE kafka2pg.cdc_staged DROP COLUMN IF EXISTS kafka_timestamp;
DROP INDEX IF EXISTS kafka2pg.cdc_tx_ends_applied_idx;

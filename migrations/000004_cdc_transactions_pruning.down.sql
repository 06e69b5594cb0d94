ALTER TABLE kafka2pg.cdc_staged DROP CONSTRAINT cdc_staged_pkey;
ALTER TABLE kafka2pg.cdc_staged ADD PRIMARY KEY (consumer_group, source, txid, data_collection, collection_order);
CREATE INDEX cdc_staged_order_idx ON kafka2pg.cdc_staged (consumer_group, source, txid, total_order);
ALTER TABLE kafka2pg.cdc_staged DROP COLUMN IF EXISTS kafka_timestamp;
DROP INDEX IF EXISTS kafka2pg.cdc_tx_ends_applied_idx;

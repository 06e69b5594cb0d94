DROP TABLE IF EXISTS kafka2pg.cdc_appliers;
DROP TABLE IF EXISTS kafka2pg.cdc_tx_ends;
DROP TABLE IF EXISTS kafka2pg.cdc_staged;

-- Put the staged events back together before their schemas go.
UPDATE kafka2pg.cdc_staged s SET
    key = CASE WHEN s.key_schema IS NULL THEN s.key ELSE
        '\x7b22736368656d61223a'::bytea || (SELECT schema FROM kafka2pg.cdc_staged_schemas WHERE digest = s.key_schema)
        || '\x2c227061796c6f6164223a'::bytea || s.key || '\x7d'::bytea END,
    value = CASE WHEN s.value_schema IS NULL THEN s.value ELSE
        '\x7b22736368656d61223a'::bytea || (SELECT schema FROM kafka2pg.cdc_staged_schemas WHERE digest = s.value_schema)
        || '\x2c227061796c6f6164223a'::bytea || s.value || '\x7d'::bytea END
WHERE s.key_schema IS NOT NULL OR s.value_schema IS NOT NULL;
ALTER TABLE kafka2pg.cdc_staged DROP COLUMN IF EXISTS key_schema, DROP COLUMN IF EXISTS value_schema;
DROP TABLE IF EXISTS kafka2pg.cdc_staged_schemas;
ALTER TABLE kafka2pg.cdc_staged
    ALTER COLUMN consumer_group TYPE text COLLATE "default",
    ALTER COLUMN source TYPE text COLLATE "default",
    ALTER COLUMN txid TYPE text COLLATE "default";
ALTER TABLE kafka2pg.cdc_tx_ends
    ALTER COLUMN consumer_group TYPE text COLLATE "default",
    ALTER COLUMN source TYPE text COLLATE "default",
    ALTER COLUMN txid TYPE text COLLATE "default";

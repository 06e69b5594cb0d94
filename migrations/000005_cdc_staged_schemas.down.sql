-- An earlier release reads an END as applied by its mark alone: mark
-- every END before its applier's position.
UPDATE kafka2pg.cdc_tx_ends e SET applied_at = now(), applied_events = e.event_count
FROM kafka2pg.cdc_appliers a
WHERE a.consumer_group = e.consumer_group AND a.source = e.source
  AND e.tx_offset < a.applied_tx_offset AND e.applied_at IS NULL;

-- Put the staged events back together before their schemas go:
-- {"schema": S ,"payload": P }.
CREATE FUNCTION kafka2pg.joined_staged(stored bytea, digest bytea) RETURNS bytea LANGUAGE sql AS $$
    SELECT CASE WHEN digest IS NULL THEN stored ELSE
        '\x7b22736368656d61223a'::bytea || (SELECT schema FROM kafka2pg.cdc_staged_schemas WHERE cdc_staged_schemas.digest = joined_staged.digest)
        || '\x2c227061796c6f6164223a'::bytea || stored || '\x7d'::bytea END
$$;
UPDATE kafka2pg.cdc_staged s SET key = kafka2pg.joined_staged(s.key, s.key_schema), value = kafka2pg.joined_staged(s.value, s.value_schema)
WHERE s.key_schema IS NOT NULL OR s.value_schema IS NOT NULL;
DROP FUNCTION kafka2pg.joined_staged(bytea, bytea);
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

CREATE TABLE IF NOT EXISTS "sales"."Orders-2026" (
    "kafka_topic" text NOT NULL,
    "kafka_partition" integer NOT NULL,
    "kafka_offset" bigint NOT NULL,
    "kafka_timestamp" timestamptz,
    "kafka_key" bytea,
    "kafka_headers" jsonb,
    "value" text,
    PRIMARY KEY ("kafka_partition", "kafka_offset", "kafka_topic")
)

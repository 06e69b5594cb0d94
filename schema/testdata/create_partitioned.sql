CREATE SCHEMA IF NOT EXISTS "sales";

CREATE TABLE IF NOT EXISTS "sales"."Orders" (
    "id" bigint NOT NULL,
    "customer" character varying(200) NOT NULL,
    "total" numeric(14,4),
    "ratio" double precision,
    "qty" integer,
    "tags" text[],
    "placed_at" timestamp with time zone NOT NULL,
    "payload" jsonb,
    "we""ird name" uuid,
    "kafka_topic" text NOT NULL,
    "kafka_offset" bigint NOT NULL,
    "trace" text,
    PRIMARY KEY ("id", "placed_at")
) PARTITION BY RANGE ("placed_at");

CREATE TABLE IF NOT EXISTS "sales"."Orders_p202612" PARTITION OF "sales"."Orders" FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00');

CREATE TABLE IF NOT EXISTS "sales"."Orders_p202701" PARTITION OF "sales"."Orders" FOR VALUES FROM ('2027-01-01 00:00:00+00') TO ('2027-02-01 00:00:00+00');

CREATE TABLE IF NOT EXISTS "sales"."Orders_p202702" PARTITION OF "sales"."Orders" FOR VALUES FROM ('2027-02-01 00:00:00+00') TO ('2027-03-01 00:00:00+00');

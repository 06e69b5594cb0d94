CREATE SCHEMA IF NOT EXISTS "sales";

CREATE TABLE IF NOT EXISTS "sales"."Orders" (
    "id" bigint NOT NULL,
    "customer" character varying(200) NOT NULL,
    "total" numeric(14,4),
    "ratio" double precision,
    "qty" integer,
    "tags" text[],
    "placed_at" timestamp with time zone,
    "payload" jsonb,
    "we""ird name" uuid,
    "kafka_topic" text NOT NULL,
    "kafka_offset" bigint NOT NULL,
    "trace" text,
    PRIMARY KEY ("id")
);

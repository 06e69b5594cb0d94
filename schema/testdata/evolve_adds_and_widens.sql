ALTER TABLE "sales"."Orders" ALTER COLUMN "customer" TYPE character varying(200);

ALTER TABLE "sales"."Orders" ALTER COLUMN "total" TYPE numeric(14,4);

ALTER TABLE "sales"."Orders" ALTER COLUMN "ratio" TYPE double precision;

ALTER TABLE "sales"."Orders" ALTER COLUMN "qty" TYPE integer;

ALTER TABLE "sales"."Orders" ALTER COLUMN "qty" DROP NOT NULL;

ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "placed_at" timestamp with time zone;

ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "payload" jsonb;

ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "we""ird name" uuid;

-- "kafka_topic" is added without NOT NULL: the rows already in the table have no value for it
ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "kafka_topic" text;

-- "kafka_offset" is added without NOT NULL: the rows already in the table have no value for it
ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "kafka_offset" bigint;

ALTER TABLE "sales"."Orders" ADD COLUMN IF NOT EXISTS "trace" text;

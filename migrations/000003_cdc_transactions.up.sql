-- Transaction-consistent CDC (a debezium sink with transactions: true).
-- A member stages the change events of its partitions that carry a
-- Debezium transaction block in cdc_staged, and the END records of the
-- connector's transaction topic in cdc_tx_ends, each in the fenced
-- transaction that advances the partition's offsets row. One applier per
-- (consumer group, source), fenced by cdc_appliers.epoch, applies each
-- complete source transaction in one Postgres transaction, in the order of
-- the END records, deletes its staged events and marks its END applied.

CREATE TABLE kafka2pg.cdc_staged (
    consumer_group   text        NOT NULL,
    source           text        NOT NULL,
    txid             text        NOT NULL,
    data_collection  text        NOT NULL,
    collection_order bigint      NOT NULL,
    total_order      bigint      NOT NULL,
    topic            text        NOT NULL,
    partition        integer     NOT NULL,
    kafka_offset     bigint      NOT NULL,
    key              bytea,
    value            bytea,
    staged_at        timestamptz NOT NULL DEFAULT now(),
    -- A Connect restart writes some events again: the same event, at a new
    -- offset, counts once.
    PRIMARY KEY (consumer_group, source, txid, data_collection, collection_order)
);
CREATE INDEX cdc_staged_order_idx ON kafka2pg.cdc_staged (consumer_group, source, txid, total_order);

CREATE TABLE kafka2pg.cdc_tx_ends (
    consumer_group   text        NOT NULL,
    source           text        NOT NULL,
    txid             text        NOT NULL,
    tx_partition     integer     NOT NULL,
    tx_offset        bigint      NOT NULL,
    event_count      bigint      NOT NULL,
    data_collections jsonb,
    staged_at        timestamptz NOT NULL DEFAULT now(),
    applied_at       timestamptz,
    -- applied_events < event_count: applied partially (OnIncomplete apply).
    applied_events   bigint,
    PRIMARY KEY (consumer_group, source, txid)
);
CREATE INDEX cdc_tx_ends_pending_idx ON kafka2pg.cdc_tx_ends (consumer_group, source, tx_offset)
    WHERE applied_at IS NULL;

CREATE TABLE kafka2pg.cdc_appliers (
    consumer_group    text        NOT NULL,
    source            text        NOT NULL,
    epoch             bigint      NOT NULL DEFAULT 0,
    applied_tx_offset bigint      NOT NULL DEFAULT -1,
    applied_txid      text,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, source)
);

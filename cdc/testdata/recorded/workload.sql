-- The changes made while the connectors stream (see README.md), after
-- their snapshots. Each statement is its own transaction unless grouped.
SET TimeZone = 'UTC';

-- creates: copies of the snapshot's rows under new keys, in one transaction
BEGIN;
CREATE TEMP TABLE copies AS SELECT * FROM all_types WHERE id IN (1, 2, 3, 4, 5);
UPDATE copies SET id = id + 10;
INSERT INTO all_types SELECT * FROM copies;
COMMIT;

-- updates, with REPLICA IDENTITY DEFAULT: the before image is the key
UPDATE all_types SET c_text = 'changed', c_int4 = c_int4 - 1, c_tstz = '2000-01-01 00:00:00+00' WHERE id = 1;
UPDATE all_types SET c_num = 0.5, c_date = '2000-01-01', c_point = '(0,0)', c_enum = 'ok', c_text_arr = '{x}' WHERE id = 3;
-- a primary-key change: a delete of the old key and a create of the new
-- one in pgoutput; one update event in Debezium? (see README.md)
UPDATE all_types SET id = 20 WHERE id = 2;
-- a delete, and its tombstone
DELETE FROM all_types WHERE id = 13;

-- the unavailable-value placeholder: the TOASTed text is not sent when an
-- update leaves it unchanged
UPDATE toasty SET n = n + 10 WHERE id = 1;
UPDATE toasty SET big = big || 'tail', n = 0 WHERE id = 2;

-- keys, deletes, a truncate, a column added while running
INSERT INTO accounts VALUES (3, 'cy', 1.23), (4, 'di', 4.56);
UPDATE accounts SET id = 100 WHERE id = 1;
UPDATE accounts SET balance = balance + 1 WHERE id = 100;
DELETE FROM accounts WHERE id = 2;
TRUNCATE accounts;
INSERT INTO accounts VALUES (5, 'ed', 5), (6, 'fi', 6);
ALTER TABLE accounts ADD COLUMN note text;
INSERT INTO accounts VALUES (7, 'gu', 7, 'new');
UPDATE accounts SET note = 'n5' WHERE id = 5;
DELETE FROM accounts WHERE id = 6;

-- a composite key, one of whose columns changes
INSERT INTO order_lines VALUES (2, 1, 1);
UPDATE order_lines SET line = 3 WHERE order_id = 1 AND line = 2;
UPDATE order_lines SET qty = qty + 1 WHERE order_id = 1;
DELETE FROM order_lines WHERE order_id = 2;

-- a column added to the table of every type, while running
ALTER TABLE all_types ADD COLUMN c_added text;
UPDATE all_types SET c_added = 'added' WHERE id = 1;
INSERT INTO all_types (id, c_int4, c_added) VALUES (21, 21, 'new row');

INSERT INTO done VALUES (1);

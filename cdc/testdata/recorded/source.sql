-- The source tables of the recorded change events, and the rows the
-- connectors' snapshots read (see README.md). Run by record.sh in a fresh
-- database of a Postgres with wal_level = logical.
SET TimeZone = 'UTC';
CREATE EXTENSION hstore;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);

-- One column of every type the decoder maps, at its edges.
CREATE TABLE all_types (
	id          integer PRIMARY KEY,
	c_int2      smallint,
	c_int4      integer,
	c_int8      bigint,
	c_num       numeric,
	c_num_ps    numeric(12,4),
	c_num_p     numeric(10),
	c_num_big   numeric(38,10),
	c_real      real,
	c_double    double precision,
	c_bool      boolean,
	c_text      text,
	c_varchar   varchar(20),
	c_char      char(5),
	c_bytea     bytea,
	c_date      date,
	c_time      time,
	c_time3     time(3),
	c_time0     time(0),
	c_timetz    timetz,
	c_ts        timestamp,
	c_ts3       timestamp(3),
	c_tstz      timestamptz,
	c_interval  interval,
	c_uuid      uuid,
	c_json      json,
	c_jsonb     jsonb,
	c_xml       xml,
	c_enum      mood,
	c_bit1      bit(1),
	c_bit       bit(10),
	c_varbit    varbit(16),
	c_int_arr   integer[],
	c_text_arr  text[],
	c_num_arr   numeric[],
	c_money     money,
	c_inet      inet,
	c_cidr      cidr,
	c_macaddr   macaddr,
	c_point     point,
	c_range     int4range,
	c_hstore    hstore,
	c_domain    posint
);

INSERT INTO all_types VALUES
-- ordinary values
(1, 12, 1234, 123456789012, 3.14159, 1234.5678, 1234567890, 12345.6789012345, 1.5, 2.25, true,
 'hello', 'varchar', 'ab', '\x00ff10', '2024-02-29', '12:34:56.789012', '12:34:56.789', '12:34:56',
 '10:11:12.123456+05:30', '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.789',
 '2024-02-29 12:34:56.789012+02', '1 year 2 mons 3 days 04:05:06.789', '0e2c74a1-9b3d-4c5e-8f00-123456789abc',
 '{"b": 1, "a": [1, 2.50]}', '{"b": 1, "a": [1, 2.50]}', '<a>1</a>', 'happy', B'1', B'1000000101', B'101',
 '{1,NULL,3}', '{"a,b",NULL,""}', '{1.5,NULL,-2}', 1234.56, '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03',
 '(1.5,-2)', '[1,10)', 'a=>1, b=>NULL', 7),
-- the edges: extremes, specials, infinities, BC dates, unicode
(2, -32768, -2147483648, -9223372036854775808, -123456789012345678901234567890.123456789012,
 -99999999.9999, -9999999999, 9999999999999999999999999999.9999999999, 'NaN', '-Infinity', false,
 E'h\u00e9llo "q" \\ \U0001F600\n\ttab', '', '     ', '', '0001-01-01 BC', '24:00:00', '00:00:00.001', '23:59:59',
 '23:59:59.999999-12', '0001-01-01 00:00:00 BC', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.999999+00',
 '-100 years -1 mons +3 days -00:00:00.000001', '00000000-0000-0000-0000-000000000000', '[]', '{}', '<e/>', 'sad', B'0', B'0000000000', B'',
 '{}', '{}', '{}', -92233720368547758.08, '::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff',
 '(-0.5,1e300)', 'empty', '', 1),
-- nulls everywhere but the key
(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL);
-- the special values: NaN and infinities, the last day, the first day
INSERT INTO all_types (id, c_num, c_num_ps, c_real, c_double, c_date, c_ts, c_ts3, c_tstz, c_int_arr) VALUES
(4, 'NaN', 'NaN', 'Infinity', 'NaN', 'infinity', 'infinity', '-infinity', '-infinity', '{-2147483648,2147483647}'),
(5, 'Infinity', NULL, '-Infinity', 'Infinity', '-infinity', '-infinity', 'infinity', 'infinity', NULL),
(6, '-Infinity', NULL, 3.4028235e38, 5e-324, '5874897-12-31', '4713-01-01 00:00:00 BC', '4713-01-01 00:00:00 BC',
 '294276-12-31 23:59:59.999999+00', NULL),
(7, 1e-20, NULL, 1.17549435e-38, 1.7976931348623157e308, '4713-01-01 BC', '1900-01-01 00:00:00.000001', NULL,
 '4713-01-01 00:00:00+00 BC', NULL),
-- the last timestamp, which Debezium 3.6.0 overflows into a negative count
(8, NULL, NULL, NULL, NULL, NULL, '294276-12-31 23:59:59.999999', NULL, NULL, NULL);

-- A large text stored out of line (TOAST): an update that leaves it
-- unchanged sends the unavailable-value placeholder instead.
CREATE TABLE toasty (id integer PRIMARY KEY, big text, n integer);
INSERT INTO toasty SELECT i, (SELECT string_agg(md5((i * 10000 + g)::text), '') FROM generate_series(1, 200) g), i
FROM generate_series(1, 2) i;

-- Key changes, deletes, a truncate and a column added while running.
CREATE TABLE accounts (id integer PRIMARY KEY, owner text NOT NULL, balance numeric(12,2));
INSERT INTO accounts VALUES (1, 'ann', 10.00), (2, 'bob', -0.01);

-- A composite key, one of whose columns changes.
CREATE TABLE order_lines (order_id integer, line smallint, qty integer NOT NULL, PRIMARY KEY (order_id, line));
INSERT INTO order_lines VALUES (1, 1, 5), (1, 2, 6);

-- The workload's last statement writes here: its event in Kafka says the
-- connector has sent everything before it.
CREATE TABLE done (id integer PRIMARY KEY);

-- normalize.sql: how a source table looks in its replica, as text.
--
-- replica_select(table, mode) returns a SELECT of every column of the
-- table as the text the replica's column prints (::text, TimeZone UTC),
-- for the columns Debezium's mapping and kafka2pg's type table give the
-- replica; mode is the connector's: 'default' (decimal.handling.mode
-- precise, time.precision.mode adaptive, interval.handling.mode numeric),
-- 'string_connect' (string, connect, string) or 'double_micro' (double,
-- adaptive_time_microseconds, numeric). The recorder writes the expected
-- rows of the fixtures with it, and the end-to-end test compares the
-- replica with the source through it. Each case below is a difference of
-- representation, or a value Debezium cannot send, said in its comment.
CREATE FUNCTION replica_text(col name, typ text, mode text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	c text := quote_ident(col);
BEGIN
	CASE
	WHEN typ = 'numeric[]' THEN
		IF mode = 'double_micro' THEN
			RETURN c || '::float8[]::text';
		END IF;
		RETURN c || '::text';
	WHEN typ = 'money' OR typ LIKE 'numeric%' THEN
		IF mode = 'double_micro' THEN
			RETURN c || '::numeric::float8::text';
		ELSIF mode = 'default' AND typ <> 'money' THEN
			-- A Connect Decimal has no NaN nor infinity: Debezium sends NULL.
			RETURN format('CASE WHEN %s IN (''NaN'', ''Infinity'', ''-Infinity'') THEN NULL ELSE %s::text END', c, c);
		ELSIF mode = 'string_connect' AND typ <> 'money' THEN
			-- decimal.handling.mode string names them as Java does.
			RETURN format('CASE %s WHEN ''NaN'' THEN ''NAN'' WHEN ''Infinity'' THEN ''POSITIVE_INFINITY'''
				' WHEN ''-Infinity'' THEN ''NEGATIVE_INFINITY'' ELSE %s::text END', c, c);
		END IF;
		RETURN c || '::numeric::text';
	WHEN typ = 'json' THEN
		-- json is replicated into jsonb, which normalizes the text.
		RETURN c || '::jsonb::text';
	WHEN typ = 'hstore' THEN
		-- hstore.handling.mode json: an io.debezium.data.Json object.
		RETURN 'hstore_to_jsonb(' || c || ')::text';
	WHEN typ = 'time with time zone' THEN
		-- Debezium's ZonedTime is in UTC: the offset is not kept.
		RETURN format('(%s AT TIME ZONE ''UTC'')::text', c);
	WHEN typ IN ('inet', 'cidr') THEN
		-- Debezium sends the output text, which leaves out a host's /32 or
		-- /128 (the cast to text writes it).
		RETURN format('CASE WHEN %s IS NOT NULL THEN format(''%%s'', %s) END', c, c);
	WHEN typ = 'bit(1)' THEN
		-- Debezium sends bit(1) as a boolean.
		RETURN format('(%s = B''1'')::text', c);
	WHEN typ LIKE 'character(%' THEN
		-- bpchar's cast to text drops the padding, which Debezium sends.
		RETURN format('rpad(%s::text, %s)', c, substring(typ FROM '\((\d+)\)'));
	WHEN typ = 'point' THEN
		-- io.debezium.data.geometry.Point, replicated as its WKB
		-- (little-endian, no SRID).
		RETURN format('(''\x0101000000'' || replica_le(float8send(%s[0])) || replica_le(float8send(%s[1])))::text', c, c);
	WHEN typ = 'interval' AND mode <> 'string_connect' THEN
		-- io.debezium.time.MicroDuration: microseconds, a month counted as
		-- 30.4375 days, a year as 365.25.
		RETURN format('make_interval(secs => (extract(year from %s) * 12 + extract(month from %s)) * 2629800'
			' + extract(day from %s) * 86400 + extract(hour from %s) * 3600 + extract(minute from %s) * 60'
			' + extract(second from %s))::text', c, c, c, c, c, c);
	WHEN mode = 'string_connect' AND typ ~ '^time(\(\d+\))? without time zone$' THEN
		-- time.precision.mode connect: milliseconds, truncated.
		RETURN format('CASE WHEN %s = ''24:00:00'' THEN %s ELSE %s - (extract(microseconds from %s)::bigint %% 1000) * interval ''1 microsecond'' END::text', c, c, c, c);
	WHEN mode = 'string_connect' AND typ ~ '^timestamp(\(\d+\))? without time zone$' THEN
		RETURN format('CASE WHEN isfinite(%s) THEN date_trunc(''milliseconds'', %s) ELSE %s END::text', c, c, c);
	ELSE
		RETURN c || '::text';
	END CASE;
END $$;

-- replica_le reverses the bytes of a float8send: WKB here is little-endian.
CREATE FUNCTION replica_le(b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT decode(string_agg(substr(encode(b, 'hex'), i, 2), '' ORDER BY i DESC), 'hex')
	FROM generate_series(1, length(b) * 2 - 1, 2) i
$$;

CREATE FUNCTION replica_select(tbl regclass, mode text) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT format('SELECT %s FROM %s', string_agg(format('%s AS %I',
		replica_text(a.attname, format_type(a.atttypid, a.atttypmod), mode), a.attname), ', ' ORDER BY a.attnum), tbl)
	FROM pg_attribute a WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
$$;

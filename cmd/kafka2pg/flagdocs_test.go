package main

// What docs/CONFIGURATION.md says of a flag or key beyond its one-line
// help: how it interacts with others, what its values mean, when to change
// it. Markdown, one paragraph each; the reference renders it under the
// section's table. Keyed by flag name, or by "command flag" where a command
// means something else by the same name.
var flagDetails = map[string]string{
	"kafka-start": "Where a partition starts when `kafka2pg.offsets` has no position for it (a new group, or a " +
		"partition added to a topic): `earliest` (the oldest record retention kept), `latest` (only records " +
		"produced from now on), `committed` (the group's offset in Kafka, once: the way to take over from " +
		"another consumer of the same group), or an RFC 3339 time such as `2026-11-30T09:00:00Z` (the first " +
		"record at or after it). Once a partition has a stored position, the position wins; `kafka2pg offsets " +
		"reset` moves it.",
	"kafka-instance-id": "Static group membership (KIP-345): a member that restarts within " +
		"`--kafka-session-timeout` gets its partitions back without a rebalance, and the others keep theirs. " +
		"Give every instance its own, stable id, such as the pod or host name.",
	"kafka-group-protocol": "`classic`: the members balance partitions among themselves with " +
		"`--kafka-balancers`. `consumer`: the broker assigns them (KIP-848, Apache Kafka 4.0 or newer); " +
		"older brokers fall back to classic.",
	"kafka-balancers": "Used by the classic protocol, in order of preference: `cooperative-sticky` (partitions " +
		"move without stopping the others), `sticky`, `range`, `round-robin`. Every member of a group must share one.",
	"kafka-isolation-level": "`read_committed` skips the records of aborted Kafka transactions and waits for " +
		"open ones; `read_uncommitted` reads everything as written.",
	"kafka-metadata-max-age": "How often topic metadata is refreshed: partitions added to a topic, and topics " +
		"that start to match a `topic_regex` sink, are consumed within this long.",
	"kafka-commit-interval": "Postgres holds the offsets that count; they are also committed to the Kafka " +
		"group this often, so that lag monitors and `--kafka-start committed` see them.",
	"kafka-fetch-max-bytes": "The most one fetch response may hold, compressed. Default: " +
		"`--max-buffered-bytes` / 8, between 1 MiB and 50 MiB. A fetch is held whole (one a broker) beside " +
		"the memory budget.",
	"kafka-fetch-max-partition-bytes": "Every fetch lists every owned partition, least recently served first. " +
		"Unless set, a partition's share of a fetch is `--kafka-fetch-max-bytes` over the partitions owned, at " +
		"least twice the largest record batch seen (a broker skips a partition whose batch exceeds its share) " +
		"and at most 1 MiB: with hundreds of partitions and a backlog, every partition is served a little in " +
		"every turn rather than some partitions' whole backlogs while the others wait. Set `1MiB` to drain in " +
		"waves instead, which is faster on a large backlog and less fair.",
	"kafka-fetch-min-bytes": "A fetch returns once this many bytes are ready, or after `--kafka-fetch-max-wait`.",
	"on-data-loss": "When retention deleted records before they were read (the stored position is below the " +
		"log start): `stop` halts that partition with an error naming the lost offsets, the others go on; " +
		"`skip` continues from the log start and logs the range. Counted in " +
		"`kafka2pg_reader_skipped_records_total`.",
	"batch-max-rows": "A partition's batch, one transaction, is written at the first limit reached of " +
		"`--batch-max-rows`, `--batch-max-bytes` and `--batch-max-wait`, or at once when the partition has " +
		"read up to its end offset (see `--batch-linger`).",
	"batch-max-bytes": "Key and value bytes of the records in one batch; the batch is written when the next " +
		"record would pass it.",
	"batch-linger": "A partition that has read up to its end offset writes at once, but at most one batch per " +
		"this long; what arrives meanwhile joins the next. Under a steady flow that makes fewer, larger " +
		"transactions for less CPU a row, and no record waits for a slow topic's next one. `0` writes every " +
		"time at once.",
	"batch-wait-at-end": "Wait `--batch-max-wait` even at the end offset: fewer, larger transactions on slow " +
		"topics, at the price of that much latency.",
	"max-tables-per-sink": "The most tables one sink whose `table` or `schema` reads the records " +
		"(`${value.type}`, `${header.tenant}`: docs/MAPPING.md, Routing by content) sends records to, counted " +
		"from the start, tables that existed included. A record routed to one more table is a dead letter of " +
		"kind `route_limit`, and the log gets one WARN; `kafka2pg_ingest_dead_letters_total{kind=\"route_limit\"}` " +
		"counts them. `0` sets no limit.",
	"table-writers": "Transactions that may write one append table at once. Batches of the table's " +
		"partitions that find them all busy share the next one: one COPY, one fenced offset advance per " +
		"partition, one COMMIT. `0` gives every batch its own transaction at once. See docs/SCALING.md.",
	"max-buffered-bytes": "Memory of the records buffered over all partitions, queued or being written: key " +
		"and value plus some 190 bytes a record of the client's own. Over it nothing more is fetched until a " +
		"write, a halt or a revoke frees some, so it bounds memory however many partitions are owned.",
	"queue-capacity": "Records a partition buffers before its fetching pauses. Default: twice " +
		"`--batch-max-rows`, so one batch fills while the previous one is written.",
	"memory-limit": "Go's soft memory limit, as `GOMEMLIMIT` sets it (which wins when set): near it the " +
		"collector works harder and returns freed memory sooner. `auto` is 3 × `--max-buffered-bytes` plus " +
		"256 KiB a partition owned, at least 128 MiB (192 MiB at the defaults and a few partitions, 442 MiB " +
		"at 1,000). `off` sets none. A size such as `400MiB` should stay above the live set " +
		"(`--max-buffered-bytes`, a fetch, and a few tens of MiB), or the collector runs without pause. The " +
		"resident memory is the limit plus some 23 MiB of the binary's own pages. Under a limit, `GOGC` is " +
		"400 unless set in the environment: in a steady flow the heap stays far under the limit, and the " +
		"default 100 would collect far more often for nothing.",
	"shutdown-timeout": "How long a revoke (a rebalance) waits for the queued records to be written before it " +
		"abandons them, and the whole deadline of a graceful stop: writing what is queued, committing the " +
		"offsets to the group and leaving it. Abandoned records are not lost: their offsets were not " +
		"advanced, so the next owner reads them again. A container's grace period should be longer.",
	"fatal-retry-timeout": "Trouble that retrying cannot fix stops `run` with exit 1 and one ERROR line naming " +
		"the fix, once it has lasted this long: credentials or ACLs the brokers refuse, a certificate that does " +
		"not verify, a topic that does not exist (checked before a table is created for it), a role or " +
		"privilege Postgres refuses (SQLSTATE 28xxx, 42501). The wait covers what a rolling restart or a grant " +
		"being rolled out causes for a moment.",
	"caught-up-timeout": "With `--until-caught-up`, exit 1 when no write has committed for this long, from the " +
		"start or the last commit, whichever side is down; the message says what failed. 0 waits for ever.",
	"ready-stall-timeout": "`/readyz` answers 503 when a partition has lag and has committed no write for this " +
		"long, or has had a write in flight this long (a lock on the table, a stalled connection); the body " +
		"names the partition and what it waits on. 0 turns the check off. Whatever it says, `/readyz` answers " +
		"503 while a partition with lag has failed writes or claims since its last commit: a write that gets " +
		"no answer fails at its step's deadline (see `--pg-write-timeout`), within seconds on a database that " +
		"answered fast.",
	"fence-check-interval": "A partition that writes learns at once that it was fenced (its epoch changed: an " +
		"offsets reset, or a new owner). One that idles asks Postgres this often, so an `offsets reset` takes " +
		"effect within it.",
	"retry-backoff-max": "Failed writes are retried with a backoff that belongs to the partition's failure " +
		"streak: about 100ms after the first, doubling with each failed write or claim in a row (with jitter) " +
		"up to this cap, and back to the start only when a write commits. A partition in backoff shows in " +
		"`kafka2pg_reader_partitions_halted`.",
	"pg-write-timeout": "The longest one write transaction of up to `--batch-max-rows` rows may take, from taking a " +
		"connection to COMMIT. A transaction of more rows gets proportionally more (a combined one, " +
		"`--table-writers`: 100,000 rows at most, 10 × at the defaults), and one that isolates bad rows twice as " +
		"much. Within it, each step (BEGIN, the fence, the COPY, COMMIT) has a deadline of its own from what " +
		"that step took in the writes before, as TCP derives its retransmission timeout: the smoothed latency " +
		"plus 4 times its deviation, the COPY's in proportion to the batch's bytes (and at least 3 times the " +
		"smoothed rate), at least 5s, doubled after a step is cut until it succeeds again; a step not measured " +
		"yet has this ceiling only. A path that stops answering is then cut within seconds, a slow one (latency, " +
		"bandwidth, a big batch) is not: OPERATIONS.md has the rule. Past a deadline the transaction is " +
		"cancelled and its connection closed, never reused (the pool's idle connections too); the partition logs a " +
		"WARN naming the step it waited on (begin, fence, copy, dead letters, notify, commit), counts a write " +
		"error of cause `timeout`, claims again and retries: a COMMIT past its deadline may have committed, and " +
		"the claim reads back what did. A claim gets it too, beyond its lock waits (3 × `--claim-lock-timeout`). " +
		"A lock held on a target table makes writes wait up to the deadline, then retry. kafka2pg's sessions " +
		"start with `statement_timeout` and `lock_timeout` at the longest of these deadlines (20m at the " +
		"defaults, a combined transaction's; 4m with `--table-writers 0`), unless `--pg-url` sets them (`?statement_timeout=10min`, or in " +
		"`options`), so that a database's or role's defaults meant for interactive queries cannot cancel its " +
		"statements. Behind PgBouncer, which refuses startup parameters it does not know, list both in its " +
		"`ignore_startup_parameters` (the server's defaults then apply). A role's `transaction_timeout` " +
		"(PostgreSQL 17) must exceed the deadline too.",
	"claim-lock-timeout": "A new owner of a partition first waits this long for the previous owner's open " +
		"transaction on it (a member that was cut off mid-write), then terminates that session; the fence " +
		"makes its commit fail either way.",
	"pg-url": "Any URL or key=value string pgx accepts: `postgres://user:password@host:5432/db?sslmode=verify-full`. " +
		"Also read from `KAFKA2PG_PG_URL`, then `DATABASE_URL`. A password is better kept out of the command " +
		"line, where `ps` shows it: use the environment or `--pg-url-file`. Several hosts with " +
		"`target_session_attrs=read-write` follow a failover.",
	"pg-url-file": "A file holding the URL, such as a mounted secret; a trailing newline is ignored. Give " +
		"either this or `--pg-url`.",
	"pg-max-conns": "Writes of different partitions run in parallel, each on a connection; the claims, the " +
		"fence checks and the table preparation take one too, and the applier of a sink with `transactions: " +
		"true` two while it applies (one reads the next transactions).",
	"migrate": "Install or upgrade the `kafka2pg` schema (offsets, dead letters) on start. `--migrate=false` " +
		"for a role without the privilege: run `kafka2pg migrate up` as the owner, once and before each " +
		"upgrade. Old name: `--no-migrate`.",
	"config": "A YAML file: any of run's flags as a key (`kafka-brokers: [a:9092, b:9092]`), and `sinks`, the " +
		"topic → table mappings (below). The command line, then the environment, win over the file.",
	"config-watch": "Reads `--config` every second and reloads it when its content changed, as SIGHUP does " +
		"(see Reloading the configuration below). Off by default: SIGHUP alone reloads.",
	"pg-table": "Without `--config` sinks, each topic goes to a table named after it (lower case, every " +
		"character outside `[a-z0-9_]` replaced by `_`); `--pg-table` sends every topic to this one table. " +
		"Old name: `--table`.",
	"value-format": "The type of the zero-config table's value column: `json` (jsonb; a record that is not " +
		"JSON is a bad record), `text` (UTF-8), or `bytes` (bytea, anything).",
	"create-tables": "Create a missing target table (and, for a sink with `evolve`, add columns). With " +
		"`--create-tables=false` a missing table stops the start with an error naming it.",
	"notify": "Each batch transaction also runs `NOTIFY \"kafka2pg_<table>\"` with the payload " +
		"`{\"table\",\"topic\",\"partition\",\"first_offset\",\"last_offset\",\"rows\"}`, delivered at commit: " +
		"`LISTEN` to learn of new rows the moment they are visible, never before.",
	"on-error": "A record that cannot be written (not JSON, a value that does not fit its column, too " +
		"large): `dead-letter` writes it to `kafka2pg.dead_letters` in the same transaction as the good rows; " +
		"`stop` halts its partition, nothing committed past it; `skip` logs and counts it. " +
		"`kafka2pg dead-letters list|replay` read and replay the dead letters.",
	"max-record-bytes": "Records whose key and value together are larger are bad records (kind `too_large`), " +
		"handled as `--on-error` says. `0`: no limit.",
	"until-caught-up": "Exit 0 once every partition is durable up to the end offset seen at start: a backfill " +
		"or a batch job. Exit 3 when records of the run became dead letters or were skipped (the log says " +
		"how many, and `kafka2pg dead-letters list` why), so that a cron job notices rows that did not land. " +
		"Exit 1 when a partition stops.",
	"log-dead-letters": "Bad records are not logged one line each: a table gets at most one line per " +
		"this long, with the count by kind and the first reason (the first bad record of a quiet table at " +
		"once). When every record of three batches in a row of a table was bad, the line is an ERROR: its " +
		"mapping or its constraints refuse everything (`kafka2pg check --config` says why).",
	"metrics-addr": "Serves `/metrics` (Prometheus, see docs/METRICS.md), `/healthz` (the process runs) and " +
		"`/readyz` (Postgres answers, the group has settled, no partition is in backoff or stopped). Loopback by default; `:9187` exposes it; empty turns it off.",
	"pprof": "Go's profiler at `/debug/pprof/` on `--metrics-addr`: " +
		"`go tool pprof http://127.0.0.1:9187/debug/pprof/heap`.",
	"log-format": "Logs go to stderr through log/slog, as text (`key=value`) or JSON lines.",
	"kafka-sasl-password": "Better in the environment (`KAFKA2PG_KAFKA_SASL_PASSWORD`) or in " +
		"`--kafka-sasl-password-file` than on the command line, where `ps` shows it.",
	"kafka-sasl-password-file": "Read at start; a trailing newline is ignored.",
	"kafka-sasl-token-file":    "Read again for every new connection, so a token may be rotated in place.",
	"kafka-tls": "Implied by any other `--kafka-tls-*` flag; the system's CAs are trusted unless " +
		"`--kafka-tls-ca-file` names others.",
	"schema-registry-url": "A Confluent-compatible Schema Registry (Confluent, Redpanda, Apicurio's ccompat, " +
		"Karapace) for sinks of format `avro`, `protobuf` or `json_schema`; several URLs are tried in turn.",
	"schema-registry-password": "Better in the environment (`KAFKA2PG_SCHEMA_REGISTRY_PASSWORD`) or in " +
		"`--schema-registry-password-file`.",
	"schema-registry-tls-ca-file":   "Old name: `--schema-registry-tls-ca`.",
	"schema-registry-tls-cert-file": "With `--schema-registry-tls-key-file`. Old name: `--schema-registry-tls-cert`.",
	"schema-registry-tls-key-file":  "Old name: `--schema-registry-tls-key`.",

	"offsets reset to": "`earliest`, `latest`, an offset (the same for every partition chosen), or an RFC 3339 " +
		"time (each partition's first record at or after it).",
	"offsets reset delete-rewound-rows": "Moving a partition back, the reset's transaction also deletes " +
		"what the records read again wrote the first time: the rows at or past the new offset of an append " +
		"table whose rows say which record wrote them (the zero-config table's `kafka_partition` and " +
		"`kafka_offset`; a typed sink's `metadata: {partition: ..., offset: ...}`, and `topic:` where its " +
		"table gathers topics), and the group's dead letters of those offsets. So each record ends up once. " +
		"`--delete-rewound-rows=false` keeps them (then a table without a unique index needs " +
		"`--allow-duplicates`).",
	"offsets reset allow-duplicates": "Move back even into a table where the records read again cannot be " +
		"found and deleted first (no partition and offset columns, rows written before they were added, " +
		"topics it cannot tell apart) and that has no unique index: those records are then written twice. " +
		"Without it reset refuses (exit 1) and says how to add the columns.",
	"offsets reset config": "Run's config file: reset finds each topic's table (and whether its rows say " +
		"which record wrote them) as run does. Without it, `--pg-table` or the topic's name, as run.",
	"dead-letters replay pg-table": "Without `--config`, the zero-config table, as in run; with it or " +
		"without, only the dead letters written for this table (`orders`, `sales.orders`) are replayed. " +
		"Old name: `--table`.",
	"dead-letters replay config": "Run's config file: each dead letter is replayed through the sink of its " +
		"topic that writes the table the letter was written for (`target_table`), with that sink's " +
		"mapping; a letter whose table no sink writes is kept and named, and replay exits 1.",
	"dead-letters replay dry-run": "Reads the dead letters without locking them and maps them with the " +
		"sinks' mappings, writes nothing, and prints by table how many would be replayed and how many the " +
		"mapping still refuses (Postgres may refuse more: those would stay), and each letter when there " +
		"are 20 or fewer.",
	"infer pg-table": "The table name written into the config. With `--pg-url`, a table of that name that " +
		"exists with columns the sink cannot write makes infer fail, naming a free name. Old name: `--table`.",
	"infer pg-url": "The database run will write to. infer then never proposes a table that exists there " +
		"with columns the sink cannot write (the topic's zero-config table, say): it picks `<table>_typed`, " +
		"and a group of its own, and says so in the config's header.",
	"infer nested": "`flatten` makes a column of every leaf (`a.b` becomes `a_b`), up to depth 3; `jsonb` " +
		"keeps each nested object in one jsonb column.",
}

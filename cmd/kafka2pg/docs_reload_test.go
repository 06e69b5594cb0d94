package main

import "strings"

// writeReloadReference renders the section of docs/CONFIGURATION.md on
// reloading the config file while run runs.
func writeReloadReference(b *strings.Builder) {
	b.WriteString(`
## Reloading the configuration

` + "`kafka2pg run --config FILE`" + ` reads the file again on SIGHUP (` + "`kill -HUP PID`" + `, ` + "`docker kill -s HUP`" + `),
and, with ` + "`--config-watch`" + `, whenever its content changes (read every second). The command
line and the environment are read again too, as at start, so a reload sees the file exactly as a
restart would.

- **Sinks** change live: a sink can be added, removed or changed (its table, columns, format,
  mode, ` + "`where`" + `...). The partitions of unchanged sinks keep writing throughout. A changed sink
  takes over at the next batch of each of its partitions, from the durable ` + "`next_offset`" + `
  in ` + "`kafka2pg.offsets`" + `: every record is written once, by the old sink or the new one. The
  tables of new and changed sinks are created or evolved first, as at start. An added topic joins
  the consumer group's subscription; a removed one leaves it, its partitions finishing what they
  have queued, their positions kept in Postgres for a later run.
- **A configuration that is invalid is refused**, and the running one stays: a YAML error, a
  field error, a table that cannot take the mapping (a column it lacks without ` + "`evolve: true`" + `).
  The error is logged at ERROR and counted in ` + "`kafka2pg_config_reloads_total{result=\"refused\"}`" + `;
  ` + "`/readyz`" + `'s body says it (` + "`config generation 3; last reload refused: ...`" + `) until a
  reload succeeds.
- **Every other key of the file needs a restart** (the brokers, the group, the Postgres URL, batch
  sizes, timeouts...): a reload that finds one changed logs a WARN naming them, and they keep their
  running values.
- **A regex subscription is fixed at start**: with a ` + "`topic_regex`" + ` sink, a reload may change the
  mappings of the same topics and patterns, not add or remove a topic or a pattern; without one, a
  reload cannot add one. Such a reload is refused with a message that says to restart.

` + "`kafka2pg_config_generation`" + ` is 1 at start and one more after each reload that took effect;
` + "`/readyz`" + `'s body shows it (` + "`ready`" + ` then ` + "`config generation 2`" + `). Without ` + "`--config`" + `,
SIGHUP keeps its default and ends the process.
`)
}

package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/sinks"
)

// configurationReference renders docs/CONFIGURATION.md: every command's
// flags by section, with type, default, environment variable, one-line
// meaning and the longer text of flagDetails; the config file's keys; the
// renamed flags.
func configurationReference() string {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	fmt.Fprintf(&b, generatedNote, "the flag definitions", "the flags in cmd/kafka2pg (commands.go, flagdocs_test.go)")
	b.WriteString(`
Every flag can be given in three places; the first that sets it wins:

1. the command line: ` + "`--pg-url postgres://…`" + ` or ` + "`--pg-url=postgres://…`" + `;
2. the environment: ` + "`KAFKA2PG_`" + ` and the flag's name in upper snake case,
   ` + "`KAFKA2PG_PG_URL=postgres://…`" + ` (an empty variable counts as unset); ` + "`--pg-url`" + `
   also comes from ` + "`DATABASE_URL`" + `;
3. for ` + "`run`" + ` and ` + "`check`" + `, the YAML file of ` + "`--config`" + `, the flag's name as a key:
   ` + "`pg-url: postgres://…`" + ` (see [the config file](#the-config-file)).

Values: a **size** is a number of bytes, or one with a unit: ` + "`64MiB`, `1GiB`, `300MB`" + `. A
**duration** is ` + "`500ms`, `10s`, `5m`" + `. A **list** is comma-separated, or the flag given
again (in the config file, a YAML list). A bool is ` + "`--flag`" + ` or ` + "`--flag=false`" + `. A bad
value stops the command with exit code 2 and a message naming the flag, before anything is
written.

`)
	cmds := commands()
	for _, c := range cmds {
		fmt.Fprintf(&b, "- [kafka2pg %s](#%s)\n", c.name, mdAnchor("kafka2pg "+c.name))
	}
	b.WriteString("- [The config file](#the-config-file)\n- [Reloading the configuration](#reloading-the-configuration)\n- [Renamed flags](#renamed-flags)\n")
	for _, c := range cmds {
		writeCommandReference(&b, c)
	}
	writeConfigFileReference(&b)
	writeReloadReference(&b)
	writeRenamedFlags(&b, cmds)
	return b.String()
}

// sameFlagsAs names, for commands whose flags are another's, that command:
// the reference lists them once.
var sameFlagsAs = map[string]string{"check": "run", "offsets show": "status"}

func writeCommandReference(b *strings.Builder, c command) {
	fmt.Fprintf(b, "\n## kafka2pg %s\n\n", c.name)
	b.WriteString("```\n")
	for _, u := range c.help.usage {
		b.WriteString("kafka2pg " + u + "\n")
	}
	b.WriteString("```\n")
	if c.help.about != "" {
		b.WriteString("\n" + strings.Join(strings.Fields(c.help.about), " ") + "\n")
	}
	if other, ok := sameFlagsAs[c.name]; ok {
		fmt.Fprintf(b, "\nThe flags are those of [kafka2pg %s](#%s).\n", other, mdAnchor("kafka2pg "+other))
		return
	}
	fs := c.flagSet()
	for _, s := range c.help.sectionsOf(fs) {
		fmt.Fprintf(b, "\n### %s: %s\n\n", c.name, s.title)
		b.WriteString("| flag | type | default | environment | meaning |\n|---|---|---|---|---|\n")
		var details []string
		for _, f := range s.flags {
			env := "`" + envName(f.Name) + "`"
			for _, extra := range databaseURLEnv[f.Name] {
				env += ", `" + extra + "`"
			}
			def := flagDefault(f)
			if def != "" {
				def = "`" + def + "`"
			}
			_, usage := pflag.UnquoteUsage(f)
			fmt.Fprintf(b, "| `--%s` | %s | %s | %s | %s |\n", f.Name, flagType(f), mdCell(def), env, mdCell(usage))
			if d := flagDetail(c.name, f.Name); d != "" {
				details = append(details, fmt.Sprintf("- `--%s`: %s\n", f.Name, d))
			}
		}
		if len(details) > 0 {
			b.WriteString("\n" + strings.Join(details, ""))
		}
	}
}

// flagType is a flag's type as the reference names it.
func flagType(f *pflag.Flag) string {
	if f.Value.Type() == "bool" {
		return "bool"
	}
	return flagArg(f)
}

// flagDetail is the longer text of a flag: the command's own, else, for
// run and check, the flag's.
func flagDetail(command, flag string) string {
	if d, ok := flagDetails[command+" "+flag]; ok {
		return d
	}
	if command == "run" || command == "check" {
		return flagDetails[flag]
	}
	return ""
}

// sinkKeyDocs are the meanings of sink keys the reference words for the
// command: its --pg-schema is the sinks.Config's schema.
var sinkKeyDocs = map[string]string{"schema": "the target table's schema (default: `--pg-schema`); a template as table is"}

func writeConfigFileReference(b *strings.Builder) {
	b.WriteString(`
## The config file

` + "`kafka2pg run --config FILE`" + ` (and ` + "`check`" + `) read a YAML mapping. Its keys are
[run's flags](#kafka2pg-run), by name (` + "`kafka-brokers: [kafka-1:9092, kafka-2:9092]`" + `,
` + "`batch-max-rows: 10000`" + `), and ` + "`sinks`" + `, a list of topic → table mappings. The command
line, then the environment, win over the file. Any value may say ` + "`${NAME}`" + ` to take the
environment variable NAME, so that secrets stay out of the file; in a sink's table and schema,
` + "`${topic}`, `${topic.N}`" + ` and topic_regex's named groups are parts of the topic instead
(see table). An unknown key is an error with its line number, and every mapping is checked
before anything connects.

` + "```yaml" + `
kafka-brokers: [kafka-1:9092]
kafka-group: shop-to-pg
pg-url: ${DATABASE_URL}
sinks:
  - topic: orders
    columns:
      - {name: id, path: id, type: bigint, not_null: true}
      - {name: amount, path: amount, type: "numeric(12,2)"}
    metadata: {offset: kafka_offset, timestamp: kafka_timestamp}
` + "```" + `
`)
	for _, g := range sinks.Keys() {
		fmt.Fprintf(b, "\n### %s\n\n| key | type | meaning |\n|---|---|---|\n", g.Title)
		for _, k := range g.Keys {
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", k.Name, k.Type, mdCell(cmp.Or(sinkKeyDocs[g.Prefix+k.Name], k.Doc)))
		}
	}
}

func writeRenamedFlags(b *strings.Builder, cmds []command) {
	b.WriteString(`
## Renamed flags

These flags have new names. The old ones still work, on the command line, in the environment
and as config keys, and print a notice naming the new one; they will go in a release that says so.

| old | new | old variable | commands |
|---|---|---|---|
`)
	for _, a := range flagAliases {
		var in []string
		for _, c := range cmds {
			if c.flagSet().Lookup(a.old) != nil {
				in = append(in, c.name)
			}
		}
		use := "`--" + a.name + "`"
		if a.inverted {
			use = "`--" + a.name + "=false`"
		}
		fmt.Fprintf(b, "| `--%s` | %s | `%s` | %s |\n", a.old, use, envName(a.old), strings.Join(in, ", "))
	}
}

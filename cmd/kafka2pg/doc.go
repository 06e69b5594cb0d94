// Command kafka2pg materializes Kafka topics into PostgreSQL tables, exactly
// once.
//
// This package is the command line around package bridge: flags (pflag,
// each bound to one field of bridge.Config and mirrored by a KAFKA2PG_
// environment variable), the YAML config file (its sinks are package
// sinks' Config, built once per command and handed to the bridge),
// signals, the process's memory limit, the HTTP endpoints (/metrics,
// /healthz, /readyz: bound before anything connects, served until the
// bridge has stopped), and printing. The libraries name their settings as
// fields; a configuration error carries its field (stream.FieldError),
// which the command prints under its flag, and advice that mentions a
// field gets the field's flag beside it (cliFields, clinames.go).
//
// Goroutines: run's work is bridge.Run's; SIGINT or SIGTERM cancels its
// context, which stops it gracefully within --shutdown-timeout, and a
// second signal exits at once (hardStop).
//
// Commands: run, check, infer, migrate, status, offsets, dead-letters,
// demo and version. commands.go holds every command's help and flag
// sections, help.go prints them, aliases.go keeps renamed flags working.
// Exit codes: 0 clean stop, 1 a run-time failure, 2 bad flags or
// configuration (nothing was written), 3 caught up with dead letters or
// skipped records (run --until-caught-up).
package main

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kafka2pg/kafka2pg/internal/redact"
)

// envName is the environment variable that mirrors a flag:
// --pg-url → KAFKA2PG_PG_URL.
func envName(flag string) string {
	return "KAFKA2PG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable: KAFKA2PG_<FLAG>, then those of the flag's old names
// (aliases.go), then the variables extra names for it (DATABASE_URL for
// pg-url). Command-line flags win.
func applyEnv(fs *pflag.FlagSet, extra map[string][]string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || aliasTarget(f) != "" || given(fs, f.Name) {
			return
		}
		type source struct{ flag, variable string }
		sources := []source{{f.Name, envName(f.Name)}}
		for _, old := range aliasesOf(fs, f.Name) {
			sources = append(sources, source{old, envName(old)})
		}
		for _, v := range extra[f.Name] {
			sources = append(sources, source{f.Name, v})
		}
		for _, src := range sources {
			v := os.Getenv(src.variable)
			if v == "" {
				continue // unset and empty are the same: deployment tools often export empty variables
			}
			if e := fs.Set(src.flag, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q for --%s: %w", src.variable, redactFlagValue(f.Name, v), f.Name, e)
			}
			return
		}
	})
	return err
}

// redact hides values of flags that may carry secrets.
func redactFlagValue(flag, v string) string {
	switch {
	case strings.Contains(flag, "password") || strings.Contains(flag, "token") || strings.Contains(flag, "secret"):
		return "xxxxx"
	case strings.Contains(flag, "url"):
		return redact.URL(v)
	}
	return v
}

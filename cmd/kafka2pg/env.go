package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// envName is the environment variable that mirrors a flag:
// --pg-url → KAFKA2PG_PG_URL.
func envName(flag string) string {
	return "KAFKA2PG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable; aliases add more variables for a flag (checked after
// the KAFKA2PG_ one). Command-line flags win.
func applyEnv(fs *pflag.FlagSet, aliases map[string][]string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		for _, name := range append([]string{envName(f.Name)}, aliases[f.Name]...) {
			v := os.Getenv(name)
			if v == "" {
				continue // unset and empty are the same: deployment tools often export empty variables
			}
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q for --%s: %w", name, redact(f.Name, v), f.Name, e)
			}
			return
		}
	})
	return err
}

// redact hides values of flags that may carry secrets.
func redact(flag, v string) string {
	switch {
	case strings.Contains(flag, "password") || strings.Contains(flag, "token") || strings.Contains(flag, "secret"):
		return "xxxxx"
	case strings.Contains(flag, "url"):
		return redactURL(v)
	}
	return v
}

package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// kafka2pgBinary is $KAFKA2PG_BIN (make test sets it), else kafka2pg built
// from this checkout.
func kafka2pgBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("KAFKA2PG_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "kafka2pg")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kafka2pg")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kafka2pg: %v\n%s", err, out)
	}
	return bin
}

// checkConfig runs `kafka2pg check` with the container's args and env, the
// config file holding text and the Postgres URL file in place of the
// mounted ones, and Kafka and Postgres on a closed loopback port: the
// configuration is loaded and validated as `run` would (exit 2 when it is
// refused), then the connections fail at once (exit 1).
func checkConfig(t *testing.T, bin string, s settings, c *corev1.Container, text string) (code int, out string) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, s.configKey)
	pgURLFile := filepath.Join(dir, "pg-url")
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pgURLFile, []byte("postgres://kafka2pg@127.0.0.1:1/shop?connect_timeout=5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"check"}
	for name, value := range s.args {
		switch name {
		case "config":
			value = config
		case "pg-url-file":
			value = pgURLFile
		}
		args = append(args, "--"+name+"="+value)
	}
	args = append(args, "--kafka-brokers=127.0.0.1:1")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"=kafka2pg-5c8d7f9b6d-x7k2p")
		default:
			t.Fatalf("env %s: the test does not know what its valueFrom gives; teach checkConfig", e.Name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, buf.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), buf.String()
	}
	t.Fatalf("kafka2pg %s: %v\n%s", strings.Join(args, " "), err, buf.String())
	return 0, ""
}

func TestKafka2pgAcceptsTheConfigMap(t *testing.T) {
	m := loadManifests(t)
	s, c := bridgeSettings(t, m)
	bin := kafka2pgBinary(t)
	text := m.configMap.Data[s.configKey]
	code, out := checkConfig(t, bin, s, c, text)
	t.Logf("kafka2pg check:\n%s", out)
	if code == 2 || !strings.Contains(out, "ok    configuration: ") {
		t.Fatalf("kafka2pg check refused the configuration (exit %d)", code)
	}

	// The same check refuses a misspelt key: it is the loader that decides.
	broken := strings.Replace(text, "max-buffered-bytes:", "max-bufered-bytes:", 1)
	if broken == text {
		t.Fatal("the ConfigMap no longer sets max-buffered-bytes: update the test")
	}
	if code, out := checkConfig(t, bin, s, c, broken); code != 2 || !strings.Contains(out, "max-bufered-bytes: unknown key") {
		t.Fatalf("a misspelt key: exit %d, want 2 naming the key:\n%s", code, out)
	}
}

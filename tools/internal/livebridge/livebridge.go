// Package livebridge holds what programs that run the built kafka2pg binary
// as a subprocess and read its /metrics share (the bench, the peers bench
// and the metrics chart): a free loopback address for --metrics-addr, an
// environment without KAFKA2PG_* variables so that only the flags
// configure the bridge, a GET that fails on a non-200 answer, a log buffer
// safe for exec's copying goroutines, and Sum, which reads a metric out of
// the Prometheus text exposition. No goroutines of its own; imports nothing
// of ours.
package livebridge

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// FreeAddr returns a 127.0.0.1 address nobody listens on right now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Env returns env without KAFKA2PG_* variables.
func Env(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KAFKA2PG_") {
			out = append(out, kv)
		}
	}
	return out
}

// Get fetches url and returns its body; an answer other than 200 is an error.
func Get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// LogBuffer collects a subprocess's output; exec writes to it from its own
// goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package reader

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
)

// lockedBuffer is a bytes.Buffer that the reader's goroutines may log to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestALeaveThatCannotFinishIsAbandonedAndSaysSo(t *testing.T) {
	c := newCluster(t, 2)
	produce(t, c, 500)
	s := newStore()
	var logged lockedBuffer
	cfg := Config{
		Brokers: c.ListenAddrs(), Group: "g", Topics: []string{topic},
		FetchMaxWait: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		CommitInterval: 50 * time.Millisecond, BatchMaxRows: 300, BatchMaxWait: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	r, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "every record durable", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next[0]+s.next[1] == 500
	})
	kafkatest.HoldRequests(t, c, kmsg.LeaveGroup)
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}

	const deadline = 2 * time.Second
	sctx, scancel := context.WithTimeout(context.Background(), deadline)
	defer scancel()
	began := time.Now()
	err = r.Shutdown(sctx)
	took := time.Since(began)
	if !errors.Is(err, ErrLeaveAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a leave that cannot finish = %v, want ErrLeaveAbandoned and the deadline", err)
	}
	if took > deadline+time.Second {
		t.Errorf("Shutdown took %v, past its %v deadline", took, deadline)
	}
	out := logged.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "data is durable") || !strings.Contains(out, "session timeout") {
		t.Errorf("want one WARN saying the data is durable and the session timeout drops the member; log:\n%s", out)
	}
}

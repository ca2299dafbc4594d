package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// noSession is a txnSession that is never used: txnOpenUntilLocked only asks whether there
// is one.
type noSession struct{}

func (noSession) Client() *kgo.Client                                      { return nil }
func (noSession) Begin() error                                             { return nil }
func (noSession) End(context.Context, kgo.TransactionEndTry) (bool, error) { return false, nil }

// The transaction begun for the outputs held while the last one ended stays open one
// commit interval (at most a quarter of the transaction timeout); nothing holds a
// transaction begun otherwise, a blocking-commit runtime or an at-least-once one.
func TestTxnOpenUntil(t *testing.T) {
	carried := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cfg := Config{CommitInterval: 20 * time.Millisecond, TransactionTimeout: 10 * time.Second}
	for _, c := range []struct {
		name string
		r    *Runtime
		want time.Time
	}{
		{"carried", &Runtime{cfg: cfg, sess: noSession{}, inTxn: true, carried: carried}, carried.Add(20 * time.Millisecond)},
		{"long interval", &Runtime{cfg: Config{CommitInterval: 30 * time.Second, TransactionTimeout: 10 * time.Second}, sess: noSession{}, inTxn: true, carried: carried}, carried.Add(2500 * time.Millisecond)},
		{"never carried", &Runtime{cfg: cfg, sess: noSession{}, inTxn: true}, time.Time{}},
		{"no transaction open", &Runtime{cfg: cfg, sess: noSession{}, carried: carried}, time.Time{}},
		{"blocking commits", &Runtime{cfg: Config{CommitInterval: 20 * time.Millisecond, TransactionTimeout: 10 * time.Second, BlockingCommits: true}, sess: noSession{}, inTxn: true, carried: carried}, time.Time{}},
		{"at-least-once", &Runtime{cfg: cfg, inTxn: true, carried: carried}, time.Time{}},
	} {
		if got := c.r.txnOpenUntilLocked(); !got.Equal(c.want) {
			t.Errorf("%s: txnOpenUntilLocked() = %v, want %v", c.name, got, c.want)
		}
	}
}

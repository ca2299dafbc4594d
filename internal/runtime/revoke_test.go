package runtime

import (
	"testing"
	"testing/synctest"
	"time"
)

// The revocation callback runs inside kgo's GroupTransactSession with a lock that the
// session's End takes too, while the loop calls End holding mu. A callback that waits for
// mu when a transaction starts ending must give up mu and set its partitions aside, or the
// two wait for each other for ever (seen in a rebalance storm on Apache Kafka: a shutdown
// commit's End against a revocation). Here the loop holds mu; the callback waits for it;
// then the loop starts ending a transaction: the callback returns, its partitions deferred.
func TestRevocationDoesNotWaitForMuWhileATransactionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runtime{}
		r.mu.Lock() // the loop, committing
		parts := map[string][]int32{"in": {0}}
		done := make(chan bool)
		go func() { done <- r.lockOrDefer(parts) }()
		time.Sleep(10 * time.Millisecond) // the callback polls for mu
		select {
		case <-done:
			t.Fatal("lockOrDefer returned while mu was held and no transaction was ending")
		default:
		}
		r.endMu.Lock()
		r.ending = true // the loop calls End, still holding mu
		r.endMu.Unlock()
		if locked := <-done; locked {
			t.Fatal("lockOrDefer took mu, which the loop holds")
		}
		if len(r.deferred) != 1 || !r.txnFailed.Load() {
			t.Fatalf("deferred %v, transaction failed %v: want the partitions set aside and the transaction failed", r.deferred, r.txnFailed.Load())
		}
		r.mu.Unlock()

		// With no transaction ending, the callback takes mu once the loop releases it.
		r.endMu.Lock()
		r.ending = false
		r.endMu.Unlock()
		r.mu.Lock()
		go func() { done <- r.lockOrDefer(parts) }()
		time.Sleep(10 * time.Millisecond)
		r.mu.Unlock()
		if locked := <-done; !locked {
			t.Fatal("lockOrDefer deferred with no transaction ending")
		}
		r.mu.Unlock()
	})
}

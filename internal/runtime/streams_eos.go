package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once under the streams protocol. kgo's GroupTransactSession commits offsets only
// for a group kgo manages (classic or KIP-848 consumer groups), so a streams member runs a
// plain transactional client and commits its input offsets into the transaction itself, as
// Kafka Streams' producer does (sendOffsetsToTransaction with the streams member's group
// metadata):
//
//   - AddOffsetsToTxn ties the group to the transaction, only before transaction version 2
//     (KIP-890 part 2: TxnOffsetCommit v5 adds the group by itself, and Java skips it too);
//   - TxnOffsetCommit carries the transactional id, the producer id and epoch (from the
//     client), the streams member id and its member epoch as the generation, and the
//     offsets by topic name and id (v6, KIP-1319, names topics by id).
//
// Apache Kafka 4.4's StreamsGroup.validateOffsetCommit (read from its group coordinator)
// accepts a TxnOffsetCommit of a streams member when its epoch is the member's; an older
// epoch only for partitions whose task the member still owns or is revoking, assigned at or
// before that epoch; otherwise STALE_MEMBER_EPOCH (a member it no longer knows:
// UNKNOWN_MEMBER_ID). A TxnOffsetCommit without member id and with generation -1 it does not
// validate at all, which is why the member's id and epoch are sent: a member that has given
// up a task (acknowledged its revocation) cannot commit that task's offsets any more, and one
// that was fenced cannot commit at all. Such a refusal aborts the transaction, as a rebalance
// aborts a classic member's.
//
// The session does not watch the group as kgo's does (its revocation callbacks mark the
// transaction): the streams membership revokes tasks through the runtime's onRevoked,
// which commits the open transaction first, or, while a transaction ends, sets the tasks
// aside and marks the transaction failed (deferDrop), which End reads before it commits
// offsets. A new owner of a task reads its offsets with require_stable, so it waits for a
// transaction that committed them to end.
type streamsTxnSession struct {
	r  *Runtime
	m  *streamsMembership
	cl *kgo.Client
	// written counts the batches the client wrote since the transaction began: kgo ends a
	// transaction that wrote nothing without an EndTxn, so offsets are then committed
	// without the transaction (there is nothing for them to be atomic with).
	written atomic.Int64
}

// newStreamsTxnSession creates the transactional client of a streams member.
func newStreamsTxnSession(r *Runtime, m *streamsMembership, opts []kgo.Opt) (*streamsTxnSession, error) {
	s := &streamsTxnSession{r: r, m: m}
	cl, err := kgo.NewClient(append(opts, kgo.WithHooks(s))...)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	return s, nil
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (s *streamsTxnSession) OnProduceBatchWritten(kgo.BrokerMetadata, string, int32, kgo.ProduceBatchMetrics) {
	s.written.Add(1)
}

// Client implements txnSession.
func (s *streamsTxnSession) Client() *kgo.Client { return s.cl }

// Begin implements txnSession.
func (s *streamsTxnSession) Begin() error {
	s.written.Store(0)
	return s.cl.BeginTransaction()
}

// End implements txnSession: with TryCommit it flushes, commits the offsets that the
// context's pre-commit function sets (unless the transaction was marked failed meanwhile),
// and commits; a refused offset commit aborts instead. With TryAbort it aborts. The
// runtime rewinds the consumer after an abort (abortedLocked).
func (s *streamsTxnSession) End(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	r := s.r
	if try == kgo.TryCommit {
		if err := s.cl.Flush(ctx); err != nil {
			return false, err // the context ended: the caller aborts
		}
	} else if err := s.cl.AbortBufferedRecords(ctx); err != nil {
		return false, err
	}
	commit := bool(try)
	var commitErr error
	var offsets map[string]map[int32]kgo.EpochOffset
	if commit {
		// The epoch is read before the failure mark: a revocation set aside while this
		// transaction ends marks it before the member acknowledges the revocation (and
		// gets a newer epoch), so a newer epoch read here comes with the mark seen below.
		epoch := s.m.currentEpoch()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		if fn := preCommitFn(ctx); fn != nil {
			if err := fn(req); err != nil {
				commit, commitErr = false, err
			}
		}
		offsets = txnOffsetsOf(req)
		switch {
		case !commit:
		case r.txnFailed.Load():
			commit = false
		case len(offsets) == 0:
		case s.written.Load() == 0:
			// Nothing was written: kgo ends such a transaction without an EndTxn, so the
			// offsets would stay pending. Alone, they need no transaction.
			if err := s.commitPlain(ctx, offsets); err != nil {
				commit, commitErr = false, err
			}
		default:
			if err := s.m.commitTxnOffsets(ctx, s.cl, epoch, offsets); err != nil {
				commit = false
				if !abortableCommitErr(err) {
					commitErr = err
				} else {
					r.log.Info("kstream: the streams group refused the transaction's offsets; aborting it", "transactional_id", r.txnID, "err", err)
				}
			}
		}
	}
	// As kgo's session: an EndTxn the broker did not attempt, or one it answers so that
	// only an abort is possible, is retried as an abort.
	var endErr error
	for tries := 0; tries < 10; tries++ {
		endErr = s.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		if endErr == nil || !(errors.Is(endErr, kerr.OperationNotAttempted) || errors.Is(endErr, kerr.TransactionAbortable) || errors.Is(endErr, kerr.UnknownServerError)) {
			break
		}
		commit = false
	}
	switch {
	case endErr != nil:
		return false, endErr
	case commitErr != nil:
		return false, fmt.Errorf("committing the transaction's offsets to streams group %q: %w", r.cfg.ApplicationID, commitErr)
	}
	if commit {
		for topic, ps := range offsets {
			for p, eo := range ps {
				s.m.noteCommitted(topic, p, eo)
			}
		}
	}
	return commit, nil
}

// commitPlain commits offsets outside the transaction, through the membership.
func (s *streamsTxnSession) commitPlain(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	var out error
	s.m.commit(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			out = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && out == nil {
					out = fmt.Errorf("topic %q partition %d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return out
}

// txnOffsetsOf reads the offsets a pre-commit function put into req.
func txnOffsetsOf(req *kmsg.TxnOffsetCommitRequest) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]kgo.EpochOffset{}
			}
			out[t.Topic][p.Partition] = kgo.EpochOffset{Epoch: p.LeaderEpoch, Offset: p.Offset}
		}
	}
	return out
}

// abortableCommitErr reports whether a refused TxnOffsetCommit only means that the
// transaction must abort (the member's epoch moved on, it was fenced, the coordinator moved),
// after which processing goes on from the committed offsets: the errors kgo's session
// aborts on.
func abortableCommitErr(err error) bool {
	for _, e := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.StaleMemberEpoch, kerr.FencedMemberEpoch,
		kerr.GroupIDNotFound, kerr.RebalanceInProgress, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress,
		kerr.NotCoordinator, kerr.ConcurrentTransactions, kerr.UnknownServerError, kerr.TransactionAbortable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// commitTxnOffsets adds the group to cl's open transaction (before transaction version 2)
// and commits offsets in it as this member at epoch.
func (m *streamsMembership) commitTxnOffsets(ctx context.Context, cl *kgo.Client, epoch int32, offsets map[string]map[int32]kgo.EpochOffset) error {
	r := m.r
	id, pepoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("reading the producer id: %w", err)
	}
	if !m.txnV2 {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = r.txnID, id, pepoch, r.cfg.ApplicationID
		resp, err := add.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("AddOffsetsToTxn (transactional id %s, group %q): %w", r.txnID, r.cfg.ApplicationID, err)
		}
	}
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	ids, err := m.ids(ctx, topics)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.txnID, r.cfg.ApplicationID, id, pepoch
	req.MemberID, req.Generation = m.memberID, epoch
	if r.cfg.InstanceID != "" {
		req.InstanceID = kmsg.StringPtr(r.cfg.InstanceID)
	}
	byID := map[[16]byte]string{}
	for _, topic := range topics {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, ids[topic]
		byID[t.TopicID] = topic
		for p, eo := range offsets[topic] {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, eo.Offset, eo.Epoch
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit (member %s, epoch %d): %w", m.memberID, epoch, err)
	}
	var errs []error
	for _, t := range resp.Topics {
		topic := t.Topic
		if topic == "" {
			topic = byID[t.TopicID]
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("topic %q partition %d: %w", topic, p.Partition, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("TxnOffsetCommit (member %s, epoch %d): %w", m.memberID, epoch, errors.Join(errs...))
	}
	return nil
}

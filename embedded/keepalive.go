package embedded

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Keeping members alive while they wait in a rebalance. Apache Kafka never expires a
// classic group member whose JoinGroup or SyncGroup is waiting for the rebalance to move
// on: such a member "satisfies its heartbeats" (ClassicGroupMember.hasSatisfiedHeartbeat),
// and the session timeout starts again when the request is answered. The Java and franz-go
// consumers do not heartbeat while their JoinGroup is outstanding. kfake lets the session
// timer that the member's last heartbeat started run on: when a rebalance waits longer than
// a session timeout for some member (one slow to revoke its partitions, one that died and is
// waited for until the rebalance timeout), kfake removes the members already waiting and
// drops their JoinGroup without an answer; each then waits for its request to time out
// (franz-go: the rebalance timeout and more) and joins again as a new member, and the group
// rebalances once more. So while an existing member's JoinGroup or SyncGroup waits, the
// broker heartbeats for it, as often as the member's session timeout requires; it stops
// when the request is answered (the member's own heartbeats take over, or its session
// timeout runs from there, as on Kafka), when the request no longer waits (the member left
// or was removed, or the rebalance it waited in completed: kfake then answered it or
// dropped it), or when the connection or the broker closes. So a member of a dead client is
// kept alive no longer than Kafka would: until the rebalance it waits in completes, at its
// rebalance timeout at the latest. A member not in the group yet (its JoinGroup has
// no member id, or kfake has not added it yet: the heartbeat is refused) is not kept alive;
// kfake starts no session timer for a new member waiting in its join anyway, where Kafka
// expires it after five minutes.

// keepAliveInterval is how often a waiting member is heartbeaten for: a third of its
// session timeout, as Kafka clients heartbeat, and at least keepAliveMinInterval.
func keepAliveInterval(session time.Duration) time.Duration {
	return max(session/3, keepAliveMinInterval)
}

// keepAliveMinInterval bounds the keepalive's rate; a member's session timeout is at least
// the broker's group.min.session.timeout.ms (100ms by default here).
const keepAliveMinInterval = 30 * time.Millisecond

// parkedMember is what the keepalive and the read hold need of a waiting JoinGroup or
// SyncGroup.
type parkedMember struct {
	group, member string
	instance      *string
	join          bool          // a JoinGroup
	generation    int32         // a SyncGroup's generation; a JoinGroup's: the group's when it was read
	session       time.Duration // zero if not known
}

// parseParked decodes a JoinGroup or SyncGroup request body (the frame after its size).
func parseParked(body []byte) (parkedMember, bool) {
	r := kbin.Reader{Src: body}
	key, version := r.Int16(), r.Int16()
	r.Int32()          // correlation id
	r.NullableString() // client id
	if r.Complete() != nil {
		return parkedMember{}, false
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return parkedMember{}, false
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return parkedMember{}, false
	}
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		return parkedMember{group: req.Group, member: req.MemberID, instance: req.InstanceID, join: true,
			session: time.Duration(req.SessionTimeoutMillis) * time.Millisecond}, true
	case *kmsg.SyncGroupRequest:
		return parkedMember{group: req.Group, member: req.MemberID, instance: req.InstanceID, generation: req.Generation}, true
	}
	return parkedMember{}, false
}

// parked parses a JoinGroup or SyncGroup request body read from a client, before kfake
// handles it, and notes what the request waits for: a JoinGroup the completion of the
// group's current rebalance (the generation after the current one). ok is false if the
// body does not parse.
func (fx *fixer) parked(body []byte) (parkedMember, bool) {
	p, ok := parseParked(body)
	if !ok {
		return p, false
	}
	if p.join {
		if gi, ok := fx.groupInfo(p.group); ok {
			p.generation = gi.Epoch
		}
	}
	return p, true
}

// waiting reports whether kfake may still answer p's request: the member is in the group
// (for a JoinGroup without member id, which kfake parks only for old versions, the group's
// rebalance is enough) and the rebalance it waits in has not completed. A JoinGroup waits
// while the group's generation is the one it was read at (kfake increments it when the
// rebalance completes); a SyncGroup while the group completes the rebalance of its
// generation. Once the rebalance moved on, kfake has answered the request (the answer is
// on its way to the client) or dropped it (the member was removed, or rejoined on another
// connection). False too if the broker is closed or closing.
func (fx *fixer) waiting(p parkedMember) bool {
	gi, ok := fx.groupInfo(p.group)
	if !ok || gi.Epoch != p.generation {
		return false
	}
	if !p.join && gi.State != "CompletingRebalance" {
		return false
	}
	if p.member == "" {
		return p.join
	}
	for _, m := range gi.Members {
		if m.MemberID == p.member {
			return true
		}
	}
	return false
}

// keepAlive starts heartbeating for the member of the JoinGroup or SyncGroup p, and
// returns the function that stops it (nil if there is nothing to keep alive).
func (fx *fixer) keepAlive(p parkedMember) func() {
	if p.member == "" {
		return nil
	}
	key := p.group + "\x00" + p.member
	fx.mu.Lock()
	if fx.closed || fx.info == nil {
		fx.mu.Unlock()
		return nil
	}
	if fx.sessions == nil {
		fx.sessions = make(map[string]time.Duration)
	}
	if p.join {
		fx.sessions[key] = p.session // for the SyncGroup that follows, which does not carry it
	} else {
		p.session = fx.sessions[key]
		delete(fx.sessions, key) // the member's next JoinGroup notes it again
	}
	fx.mu.Unlock()

	done := make(chan struct{})
	go func() {
		cl, release := fx.acquireClient()
		defer release()
		if cl == nil {
			return
		}
		tick := time.NewTicker(keepAliveInterval(p.session))
		defer tick.Stop()
		for fx.heartbeatFor(cl, done, p) {
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// heartbeatFor sends one heartbeat for p, if its request still waits, and reports whether
// to go on.
func (fx *fixer) heartbeatFor(cl *kgo.Client, done <-chan struct{}, p parkedMember) bool {
	select {
	case <-done:
		return false
	default:
	}
	if !fx.waiting(p) {
		return false // answered, dropped, or the broker is closing: nothing to keep alive
	}
	ctx, cancel := context.WithTimeout(context.Background(), fixerTimeout)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = p.group, p.member, p.instance, p.generation
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return !errors.Is(err, context.Canceled) // a failed request is tried again
	}
	switch kerr.ErrorForCode(resp.ErrorCode) {
	case kerr.UnknownMemberID, kerr.FencedInstanceID, kerr.GroupIDNotFound:
		fx.mu.Lock()
		delete(fx.sessions, p.group+"\x00"+p.member)
		fx.mu.Unlock()
		return false // no longer in the group: nothing to keep alive
	}
	// Accepted (the group is rebalancing), or a generation that moved meanwhile
	// (IllegalGeneration): the next tick checks whether the request still waits.
	return true
}

// groupInfo returns a snapshot of the group from the broker; false if there is none.
func (fx *fixer) groupInfo(group string) (*kfake.GroupInfo, bool) {
	fx.mu.Lock()
	fn := fx.info
	fx.mu.Unlock()
	if fn == nil {
		return nil, false
	}
	return fn(group)
}

// setGroupInfo sets how the fixer reads a group's state from the broker.
func (fx *fixer) setGroupInfo(fn func(group string) (*kfake.GroupInfo, bool)) {
	fx.mu.Lock()
	fx.info = fn
	fx.mu.Unlock()
}

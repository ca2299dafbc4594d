package embedded

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
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
// timeout runs from there, as on Kafka), when the member is no longer in the group, or when
// the connection or the broker closes. A member not in the group yet (its JoinGroup has
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

// parkedMember is what the keepalive needs of a waiting JoinGroup or SyncGroup.
type parkedMember struct {
	group, member string
	instance      *string
	join          bool          // a JoinGroup: the generation is the group's current one
	generation    int32         // a SyncGroup's generation
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

// keepAlive starts heartbeating for the member whose JoinGroup or SyncGroup request body
// is body, and returns the function that stops it (nil if there is nothing to keep alive).
func (fx *fixer) keepAlive(body []byte) func() {
	p, ok := parseParked(body)
	if !ok || p.member == "" {
		return nil
	}
	key := p.group + "\x00" + p.member
	fx.mu.Lock()
	if fx.closed || fx.generation == nil {
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
		tick := time.NewTicker(keepAliveInterval(p.session))
		defer tick.Stop()
		for fx.heartbeatFor(done, p) {
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// heartbeatFor sends one heartbeat for p and reports whether to go on.
func (fx *fixer) heartbeatFor(done <-chan struct{}, p parkedMember) bool {
	gen := p.generation
	if p.join {
		g, ok := fx.groupGeneration(p.group)
		if !ok {
			return false // the group is gone, or the broker is closing
		}
		gen = g
	}
	cl := fx.client()
	if cl == nil {
		return false
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
	req.Group, req.MemberID, req.InstanceID, req.Generation = p.group, p.member, p.instance, gen
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
	// Accepted (the group is rebalancing, or already past it), or a generation that
	// moved meanwhile (IllegalGeneration): the next tick tries again.
	return true
}

// groupGeneration returns the group's current generation from the broker.
func (fx *fixer) groupGeneration(group string) (int32, bool) {
	fx.mu.Lock()
	fn := fx.generation
	fx.mu.Unlock()
	if fn == nil {
		return 0, false
	}
	return fn(group)
}

// setGeneration sets how the fixer reads a group's generation from the broker.
func (fx *fixer) setGeneration(fn func(group string) (int32, bool)) {
	fx.mu.Lock()
	fx.generation = fn
	fx.mu.Unlock()
}

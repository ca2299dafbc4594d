package embedded

import (
	"context"
	"encoding/binary"
	"net"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker's compatibility layer: kfake answers every request Kafka's Java
// tools (kafka-topics, kafka-consumer-groups, kafka-get-offsets, the console
// producer and consumer, kafka-streams-application-reset) send, but a few of
// its responses leave out fields the Java client does not expect to be
// missing: a nullable array sent as null where Apache Kafka always sends a
// (maybe empty) list, which the Java admin client dereferences. kfake's
// control hooks can only replace a response, not amend the one kfake builds,
// so the fixes are applied on the wire: every accepted connection is wrapped
// in a compatConn, which notes the key and version of each request it reads
// and, for the keys in responseFixes, decodes the response kfake writes,
// amends it and encodes it again. docs/dev-broker.md lists what is amended
// and what still differs from Apache Kafka.

// installRequestFixes adds the control hooks that amend requests before
// kfake handles them: a control function that returns "not handled" lets
// kfake go on with the request it was given, changed or not.
func installRequestFixes(c *kfake.Cluster) {
	// ListGroups v5: the Java admin client filters by group type with
	// GroupType's display names ("Classic", "Consumer"); Apache Kafka
	// matches them case-insensitively, kfake exactly against "classic"
	// and "consumer", so kafka-consumer-groups --list listed nothing.
	c.ControlKey(int16(kmsg.ListGroups), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ListGroupsRequest)
		for i, typ := range r.TypesFilter {
			r.TypesFilter[i] = strings.ToLower(typ)
		}
		return nil, nil, false
	})
}

// responseFix amends a response kfake built before it is written.
type responseFix func(fx *fixer, resp kmsg.Response)

// responseFixes holds the amendments by request key.
var responseFixes = map[int16]responseFix{
	// CreateTopics v5+: Apache Kafka returns each created topic's configs;
	// kfake sends null, and the admin client's createTopics streams over
	// the list (NullPointerException in kafka-topics --create).
	// Its configs' sources are left at -1, which the admin client
	// rejects (IllegalArgumentException in kafka-topics --create
	// --config); the configs kfake lists are the topic's own, the
	// DYNAMIC_TOPIC_CONFIG source.
	int16(kmsg.CreateTopics): fixCreateTopics,
	// DescribeTopicPartitions: EligibleLeaderReplicas and LastKnownELR
	// are nullable, Apache Kafka sends empty lists when ELR is off; the
	// admin client's describeTopics streams over them
	// (kafka-topics --describe, kafka-get-offsets).
	int16(kmsg.DescribeTopicPartitions): fixNullArrays,
	// ConsumerGroupDescribe (KIP-848 groups): kfake names the topics of
	// members' assignments by topic id only; Apache Kafka sends the name
	// too, and kafka-consumer-groups --describe asks for the partitions
	// of the topic named "" (InvalidTopicException).
	//
	// Both describe responses also give a member's host as Apache Kafka
	// does, "/127.0.0.1" (Java's InetAddress.toString), not kfake's
	// "127.0.0.1:port" (the HOST column of kafka-consumer-groups).
	int16(kmsg.ConsumerGroupDescribe): fixConsumerGroupDescribe,
	int16(kmsg.DescribeGroups):        fixDescribeGroups,
}

// fixNullArrays replaces every nil slice in the response by an empty one,
// so that a nullable array is encoded as an empty list, not as null.
func fixNullArrays(_ *fixer, resp kmsg.Response) {
	fillNilSlices(reflect.ValueOf(resp))
}

// configSourceDynamicTopic is DescribeConfigsResponse.ConfigSource
// DYNAMIC_TOPIC_CONFIG.
const configSourceDynamicTopic = 1

func fixCreateTopics(fx *fixer, resp kmsg.Response) {
	fixNullArrays(fx, resp)
	r := resp.(*kmsg.CreateTopicsResponse)
	for i := range r.Topics {
		for j := range r.Topics[i].Configs {
			if c := &r.Topics[i].Configs[j]; c.Source < 0 {
				c.Source = configSourceDynamicTopic
			}
		}
	}
}

// javaHost turns kfake's "host:port" client address into Apache Kafka's "/host".
func javaHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return "/" + host
	}
	return h
}

func fixDescribeGroups(_ *fixer, resp kmsg.Response) {
	r := resp.(*kmsg.DescribeGroupsResponse)
	for i := range r.Groups {
		for j := range r.Groups[i].Members {
			m := &r.Groups[i].Members[j]
			m.ClientHost = javaHost(m.ClientHost)
		}
	}
}

func fixConsumerGroupDescribe(fx *fixer, resp kmsg.Response) {
	r := resp.(*kmsg.ConsumerGroupDescribeResponse)
	var names map[[16]byte]string
	name := func(tp *kmsg.AssignmentTopicPartition) {
		if tp.Topic != "" {
			return
		}
		if names == nil {
			names = fx.topicNames()
		}
		tp.Topic = names[tp.TopicID]
	}
	for i := range r.Groups {
		for j := range r.Groups[i].Members {
			m := &r.Groups[i].Members[j]
			m.ClientHost = javaHost(m.ClientHost)
			for k := range m.Assignment.TopicPartitions {
				name(&m.Assignment.TopicPartitions[k])
			}
			for k := range m.TargetAssignment.TopicPartitions {
				name(&m.TargetAssignment.TopicPartitions[k])
			}
		}
	}
}

// fixer holds what the fixes need from the broker: a client of its own, to look
// up topic names and to heartbeat for members waiting in a rebalance
// (keepalive.go), and a way to read a group's state. The client lives only
// while a fix or a keepalive uses it: an idle broker keeps no connection to
// itself (nor its goroutines).
type fixer struct {
	addr string

	mu       sync.Mutex
	cl       *kgo.Client
	clRefs   int // users of cl
	closed   bool
	info     func(group string) (*kfake.GroupInfo, bool)
	sessions map[string]time.Duration // session timeouts by group and member, from their JoinGroups
}

// fixerTimeout bounds a fix's own request to the broker.
const fixerTimeout = 5 * time.Second

// topicNames returns the broker's topic names by topic id; empty if the
// broker cannot be asked.
func (fx *fixer) topicNames() map[[16]byte]string {
	names := make(map[[16]byte]string)
	cl, release := fx.acquireClient()
	defer release()
	if cl == nil {
		return names
	}
	ctx, cancel := context.WithTimeout(context.Background(), fixerTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // nil Topics: all topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return names
	}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			names[t.TopicID] = *t.Topic
		}
	}
	return names
}

// acquireClient returns the fixer's client, created if no one uses it, and the function
// to call when done with it, which closes the client once its last user is done. cl is
// nil if the broker is closed; release must be called all the same.
func (fx *fixer) acquireClient() (cl *kgo.Client, release func()) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if fx.closed || fx.addr == "" {
		return nil, func() {}
	}
	if fx.cl == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(fx.addr), kgo.ClientID("kstream-dev-broker"))
		if err != nil {
			return nil, func() {}
		}
		fx.cl = cl
	}
	fx.clRefs++
	return fx.cl, sync.OnceFunc(fx.releaseClient)
}

func (fx *fixer) releaseClient() {
	fx.mu.Lock()
	fx.clRefs--
	var idle *kgo.Client
	if fx.clRefs == 0 {
		idle, fx.cl = fx.cl, nil
	}
	fx.mu.Unlock()
	if idle != nil {
		idle.Close()
	}
}

// setAddr sets the broker address the fixer's client connects to.
func (fx *fixer) setAddr(addr string) {
	fx.mu.Lock()
	fx.addr = addr
	fx.mu.Unlock()
}

// close closes the fixer's client; later fixes do without it.
func (fx *fixer) close() {
	fx.mu.Lock()
	cl := fx.cl
	fx.cl, fx.closed = nil, true
	fx.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

func fillNilSlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fillNilSlices(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				fillNilSlices(f)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes fields: null and empty differ on purpose
		}
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			fillNilSlices(v.Index(i))
		}
	}
}

// pendingReq is a request read from a connection whose response has not
// been written yet.
type pendingReq struct {
	corr    int32
	key     int16
	version int16

	park          *parkedMember // a JoinGroup or SyncGroup that holds the read; nil if not one
	stopKeepAlive func()        // ends the member's keepalive while the request is parked; may be nil
}

// compatConn follows the Kafka protocol frames on one client connection: it
// parses the request headers it reads and rewrites the responses kfake
// writes for the keys in responseFixes. kfake reads a request with two
// ReadFulls (size, then body) and writes each response frame with a single
// Write; compatConn does not rely on the reads' sizes, and leaves a response
// frame written in several parts as it is.
type compatConn struct {
	net.Conn
	fx *fixer

	// Read side, used only by the reading goroutine.
	sizeBuf [4]byte
	sizeN   int    // bytes of sizeBuf filled
	left    int    // bytes of the current request body still to read
	head    []byte // the body's first bytes, up to requestHeadLen
	full    []byte // the whole body of a request in holdsRead (see keepAlive)

	// readErr is an error of the client's end held back until the group requests parked
	// on the connection are answered (see holdsRead).
	readErr error

	// Write side, used only by the writing goroutine: bytes of a frame written in parts
	// still to come.
	wleft int

	mu      sync.Mutex
	pending []pendingReq
	parked  int           // JoinGroup and SyncGroup requests read and not answered yet
	changed chan struct{} // closed and replaced when parked goes down or the conn closes
	closed  bool
}

func newCompatConn(c net.Conn, fx *fixer) *compatConn {
	return &compatConn{Conn: c, fx: fx, changed: make(chan struct{})}
}

// requestHeadLen is what the read side keeps of a request body to know its
// key, version and correlation id.
const requestHeadLen = 8

// holdsRead lists the requests that kfake's group coordinator parks (answers when the
// rebalance moves on, not at once) and whose answer it starts the member's session timer
// on. Apache Kafka mutes a connection while such a request waits: it does not notice the
// client going away, completes the request when its time comes, and schedules the member's
// heartbeat expiration then (GroupMetadataManager.completeClassicGroupJoin, and the
// assignment's propagation for SyncGroup), so a member that died during a rebalance is
// expired by its session timeout. kfake instead gives up on the reply when the
// connection's reader has ended, at random (a select between its response channel, which
// has room, and the closed connection), and then never starts the member's session timer:
// a new member that died in its first JoinGroup had one chance in two of staying in the
// group for good, holding the partitions the leader assigned it. So the connection hides
// the client's end from kfake until the parked requests are answered: kfake's reply then
// always goes through (into the closed socket) and arms the session timer, as Kafka's does.
var holdsRead = map[int16]bool{
	int16(kmsg.JoinGroup): true,
	int16(kmsg.SyncGroup): true,
}

// maxReadHold bounds how long a dead client's end is hidden, for a parked request kfake
// never answers (it drops the JoinGroup of a member it removes meanwhile): Kafka's default
// connections.max.idle.ms.
const maxReadHold = 10 * time.Minute

func (c *compatConn) Read(p []byte) (int, error) {
	if err := c.readErr; err != nil {
		c.awaitParked()
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.track(p[:n])
	if err != nil && c.parkedRequests() > 0 {
		if n > 0 {
			c.readErr = err // the bytes first: they may end a request kfake must handle
			return n, nil
		}
		c.awaitParked()
	}
	return n, err
}

func (c *compatConn) parkedRequests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

// awaitParked waits until no parked request is left that kfake may still answer (each is
// answered, or no longer waits: see fixer.waiting), the connection is closed (by kfake:
// its writer ended, or the broker stopped), or maxReadHold passed. So the hold never
// outlives the member's request: a request kfake dropped (the member left, was removed, or
// rejoined on another connection) does not hold the dead client's connection open.
func (c *compatConn) awaitParked() {
	timer := time.NewTimer(maxReadHold)
	defer timer.Stop()
	check := time.NewTicker(awaitCheckInterval)
	defer check.Stop()
	for {
		c.mu.Lock()
		done, ch := c.parked == 0 || c.closed, c.changed
		var parked []parkedMember
		for _, pr := range c.pending {
			if holdsRead[pr.key] && pr.park != nil {
				parked = append(parked, *pr.park)
			}
		}
		unknown := c.parked - len(parked) // requests that did not parse: held until answered
		c.mu.Unlock()
		if done {
			return
		}
		if unknown == 0 && !c.fx.anyWaiting(parked) {
			return
		}
		select {
		case <-ch:
		case <-check.C:
		case <-timer.C:
			return
		}
	}
}

// awaitCheckInterval is how often a held read checks whether its parked requests still
// wait.
const awaitCheckInterval = 50 * time.Millisecond

// anyWaiting reports whether kfake may still answer one of the parked requests.
func (fx *fixer) anyWaiting(parked []parkedMember) bool {
	for _, p := range parked {
		if fx.waiting(p) {
			return true
		}
	}
	return false
}

// notifyLocked wakes awaitParked; c.mu must be held.
func (c *compatConn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Close closes the connection, ends a held read and the keepalives of its parked requests
// (kfake answers none of them once the connection is closed).
func (c *compatConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.notifyLocked()
		for _, pr := range c.pending {
			if pr.stopKeepAlive != nil {
				pr.stopKeepAlive()
			}
		}
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// track consumes bytes read from the client.
func (c *compatConn) track(b []byte) {
	for len(b) > 0 {
		if c.left == 0 {
			k := copy(c.sizeBuf[c.sizeN:], b)
			c.sizeN += k
			b = b[k:]
			if c.sizeN < 4 {
				return
			}
			c.sizeN = 0
			c.left = int(binary.BigEndian.Uint32(c.sizeBuf[:]))
			c.head, c.full = c.head[:0], c.full[:0]
			continue
		}
		k := min(len(b), c.left)
		// A request's whole body is kept while its key is unknown or in holdsRead.
		if len(c.head) < 2 || holdsRead[int16(binary.BigEndian.Uint16(c.head))] {
			c.full = append(c.full, b[:k]...)
		}
		if w := min(requestHeadLen-len(c.head), k); w > 0 {
			c.head = append(c.head, b[:w]...)
		}
		c.left -= k
		b = b[k:]
		if c.left == 0 && len(c.head) >= requestHeadLen {
			pr := pendingReq{
				key:     int16(binary.BigEndian.Uint16(c.head[0:])),
				version: int16(binary.BigEndian.Uint16(c.head[2:])),
				corr:    int32(binary.BigEndian.Uint32(c.head[4:])),
			}
			// Only requests whose response is amended or that hold the read are
			// noted: every one of them gets a response (an acks=0 produce, for one,
			// does not).
			if responseFixes[pr.key] != nil || holdsRead[pr.key] {
				if holdsRead[pr.key] {
					if p, ok := c.fx.parked(c.full); ok {
						pr.park = &p
						pr.stopKeepAlive = c.fx.keepAlive(p)
					}
				}
				c.mu.Lock()
				if c.closed && pr.stopKeepAlive != nil {
					pr.stopKeepAlive()
				}
				c.pending = append(c.pending, pr)
				if holdsRead[pr.key] {
					c.parked++
				}
				c.mu.Unlock()
			}
		}
	}
}

// popPending removes and returns the pending request with correlation id
// corr.
func (c *compatConn) popPending(corr int32) (pendingReq, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return pendingReq{}, false
	}
	for i, pr := range c.pending {
		if pr.corr == corr {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			if holdsRead[pr.key] {
				c.parked--
				c.notifyLocked()
			}
			if pr.stopKeepAlive != nil {
				pr.stopKeepAlive()
			}
			return pr, true
		}
	}
	return pendingReq{}, false
}

func (c *compatConn) Write(b []byte) (int, error) {
	if c.wleft > 0 || len(b) < 8 {
		// The rest of a frame written in parts, or a write too short to be a frame's
		// start: neither happens with kfake, and neither is rewritten.
		c.wleft = max(c.wleft-len(b), 0)
		return c.Conn.Write(b)
	}
	pr, ok := c.popPending(int32(binary.BigEndian.Uint32(b[4:8])))
	if size := 4 + int(binary.BigEndian.Uint32(b[:4])); size != len(b) {
		c.wleft = max(size-len(b), 0)
		return c.Conn.Write(b)
	}
	if !ok {
		return c.Conn.Write(b)
	}
	fix := responseFixes[pr.key]
	if fix == nil {
		return c.Conn.Write(b)
	}
	out, ok := rewriteResponse(c.fx, pr, b, fix)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// rewriteResponse decodes the response frame b to the request pr, applies
// fix and encodes the frame again. It reports false, leaving the frame as it
// is, if the frame cannot be decoded.
func rewriteResponse(fx *fixer, pr pendingReq, b []byte, fix responseFix) ([]byte, bool) {
	resp := kmsg.ResponseForKey(pr.key)
	if resp == nil {
		return nil, false
	}
	resp.SetVersion(pr.version)
	body := b[8:]
	flexHeader := resp.IsFlexible() && pr.key != int16(kmsg.ApiVersions)
	if flexHeader {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if r.Complete() != nil {
			return nil, false
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, false
	}
	fix(fx, resp)
	out := make([]byte, 8, len(b)+64)
	copy(out, b[:8])
	if flexHeader {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[:4], uint32(len(out)-4))
	return out, true
}

package embedded_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kstream-go/kstream/embedded"
)

// A dead client's parked JoinGroup holds its connection only while kfake may still answer
// it: once the member left (from another connection) and kfake dropped the join, the
// broker closes the connection at once, not after maxReadHold. And once no member waits,
// the broker keeps no connection of its own (the keepalive's client is closed): the only
// connections left are the live clients'.
func TestHoldEndsWhenMemberLeaves(t *testing.T) {
	verifyNoLeaks(t)
	const group, topic = "g", "t"
	b, err := embedded.Start(embedded.Topics(1, topic))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer b.Close()
	a, aj := twoMembersALeading(t, b, group, topic)

	// a rejoins and waits for c; a's process dies: its join holds the connection.
	a.send(joinReq(group, aj.MemberID, 10*time.Second, topic))
	waitGroup(t, b, group, func(gi groupView) bool { return gi.state == "PreparingRebalance" })
	a.c.Close()
	other := dialRaw(t, b.Addr(), "admin")
	// A round trip on other: the broker has accepted it (a dial returns before the broker's
	// accept loop counts the connection; CI once saw 2 here without it).
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	if r := other.do(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions on other: error %d", r.ErrorCode)
	}
	// Connections: c, other, a's (held), and the keepalive's for a's join (one or two, dialed
	// by the broker's own goroutine): counted until 3 show up. A broken hold would close a's
	// for good, so waiting does not hide it.
	deadline := time.Now().Add(time.Second)
	for n := embedded.OpenConns(b); n < 3; n = embedded.OpenConns(b) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open while a's join waits, want a's held one among them", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// a leaves from another connection: kfake drops a's join.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(3)
	leave.Group = group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = aj.MemberID
	leave.Members = append(leave.Members, lm)
	if r := other.do(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || len(r.Members) != 1 || r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave of a: %+v", r)
	}
	waitGroup(t, b, group, func(gi groupView) bool { return !slices.Contains(gi.members, aj.MemberID) })

	// Only c's and other's connections are left, well within a's session timeout.
	deadline = time.Now().Add(5 * time.Second)
	for embedded.OpenConns(b) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open 5s after a left, want 2 (c and other)", embedded.OpenConns(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package ops_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/ops"
	"github.com/kstream-go/kstream/query"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fleetToken is the bearer token the query servers of the fleet tests require.
const fleetToken = "Bearer s3cret"

// fleetMember is one instance of a fleet test: an App whose ApplicationServer is a test
// server with the query server at / (its Auth hook requires fleetToken), the ops handler
// configured with the token at /ops/, and the ops handler with the default Config (which
// forwards the page's Authorization header, here none) at /ops-open/.
type fleetMember struct {
	app  *kstream.App
	srv  *httptest.Server
	addr string
	stop func() // stops Run (a static member: it stays in the group) and the server
}

func startFleetMember(t *testing.T, appID, instanceID string, b *kstream.Builder, tweak func(*kstream.Config)) *fleetMember {
	t.Helper()
	lh := &lazyHandler{}
	srv := httptest.NewServer(lh)
	u, _ := url.Parse(srv.URL)
	cfg := kstream.Config{
		ApplicationID:     appID,
		Brokers:           kafkatest.Brokers(t),
		StateDir:          t.TempDir(),
		ApplicationServer: u.Host,
		InstanceID:        instanceID,
		CommitInterval:    200 * time.Millisecond,
		// Long enough that a stopped static member stays in the assignment while the test
		// looks at it.
		SessionTimeout:    45 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	app, err := kstream.New(b, cfg)
	if err != nil {
		t.Fatalf("kstream.New: %v", err)
	}
	qs := query.NewServer(query.Config{App: app, Auth: func(r *http.Request) error {
		if r.Header.Get("Authorization") != fleetToken {
			return errors.New("a bearer token is required")
		}
		return nil
	}})
	mux := http.NewServeMux()
	mux.Handle("/", qs)
	mux.Handle("/ops/", http.StripPrefix("/ops", ops.NewHandler(app, ops.Config{
		ForwardHeader: func(_, out *http.Request) { out.Header.Set("Authorization", fleetToken) },
	})))
	mux.Handle("/ops-open/", http.StripPrefix("/ops-open", ops.Handler(app)))
	var h http.Handler = mux
	lh.h.Store(&h)
	m := &fleetMember{app: app, srv: srv, addr: u.Host}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("instance %s: Run: %v", m.addr, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("instance %s did not stop within 30s", m.addr)
			}
			srv.Close()
			qs.CloseIdleConnections()
		})
	}
	t.Cleanup(m.stop)
	return m
}

// fleet is three instances of one application over 6 partitions with a standby of each
// task, each having written one dead letter (a record its source could not decode) and
// processed every record.
type fleet struct {
	members []*fleetMember
	active  map[string][]string // endpoint -> active task ids of the assignment, sorted
	standby map[string][]string // endpoint -> standby task ids
	dlq     string
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	in := kafkatest.CreateTopic(t, "numbers", 6, nil)
	out := kafkatest.CreateTopic(t, "counts", 6, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	appID := kafkatest.Name(t, "app")
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%11), Value: binary.BigEndian.AppendUint64(nil, uint64(i))})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	tweak := func(c *kstream.Config) {
		c.NumStandbys = 1
		c.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	}
	f := &fleet{active: map[string][]string{}, standby: map[string][]string{}, dlq: dlq}
	for i := range 3 {
		f.members = append(f.members, startFleetMember(t, appID, fmt.Sprintf("member-%d", i), testTopology(in, out), tweak))
	}
	kafkatest.Eventually(t, 120*time.Second, "three running instances with two tasks and two standbys each", f.collect)
	// One record that cannot be decoded on a partition of each instance.
	var bad []*kgo.Record
	for _, m := range f.members {
		ids := f.active[m.addr]
		if len(ids) == 0 {
			t.Fatalf("instance %s is not in the assignment %v", m.addr, f.active)
		}
		var p int32
		fmt.Sscanf(ids[0], "0_%d", &p)
		bad = append(bad, &kgo.Record{Topic: in, Partition: p, Key: []byte("bad"), Value: []byte("xyz")})
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), bad...)
	kafkatest.Eventually(t, 60*time.Second, "a dead letter written by each instance, and every record processed", func() bool {
		for _, m := range f.members {
			st := m.app.Status()
			if st.DeadLettersTotal != 1 {
				return false
			}
			for _, task := range st.Active {
				for _, p := range task.Partitions {
					if p.Lag != 0 {
						return false
					}
				}
			}
		}
		return true
	})
	// The assignment again: a rebalance since the first look (a probing rebalance, a
	// member slow to heartbeat on a loaded machine) may have moved standbys, and the tests
	// compare the fleet view with the assignment as it is now.
	kafkatest.Eventually(t, 60*time.Second, "the assignment, still two tasks and two standbys each", f.collect)
	return f
}

// collect reads the group's assignment into f.active and f.standby; it reports whether
// all three instances run, with two tasks and two standbys each.
func (f *fleet) collect() bool {
	for _, m := range f.members {
		if m.app.State().String() != "RUNNING" {
			return false
		}
	}
	md := f.members[0].app.Metadata()
	if len(md) != 3 {
		return false
	}
	clear(f.active)
	clear(f.standby)
	var all []string
	for _, m := range md {
		if len(m.Active) != 2 || len(m.Standby) != 2 {
			return false
		}
		for _, id := range m.Active {
			f.active[m.Host] = append(f.active[m.Host], id.String())
			all = append(all, id.String())
		}
		for _, id := range m.Standby {
			f.standby[m.Host] = append(f.standby[m.Host], id.String())
		}
	}
	slices.Sort(all)
	return slices.Equal(all, []string{"0_0", "0_1", "0_2", "0_3", "0_4", "0_5"}) && len(f.active) == 3
}

// fleetOf gets the fleet view of u.
func fleetOf(t *testing.T, u string) ops.Fleet {
	t.Helper()
	var f ops.Fleet
	if code := getJSON(t, u, &f); code != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", u, code)
	}
	return f
}

func byEndpoint(f ops.Fleet) map[string]ops.FleetInstance {
	out := map[string]ops.FleetInstance{}
	for _, fi := range f.Instances {
		out[fi.Endpoint] = fi
	}
	return out
}

// Three instances, each with its query server (behind an Auth hook) and ops handler on its
// ApplicationServer: /api/fleet of the first lists all three from the group assignment,
// each with the status it serves at /v1/status (its own active and standby tasks with lag,
// its dead letter, its skipped record by operator and reason), the first marked as self.
// Through the handler that does not send the token, the other two are unreachable with
// the 401 of their Auth hook. Once the third instance stopped (a static member: still in
// the assignment), it is listed as unreachable, and the view is still served.
func TestFleetStatus(t *testing.T) {
	t.Parallel()
	f := startFleet(t)
	one, three := f.members[0], f.members[2]

	// The status endpoint of the query server, behind its Auth hook.
	req, _ := http.NewRequest(http.MethodGet, three.srv.URL+"/v1/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/status without a token: HTTP %d, want 401", resp.StatusCode)
	}

	view := fleetOf(t, one.srv.URL+"/ops/api/fleet")
	if len(view.Instances) != 3 || view.ApplicationID != one.app.Status().ApplicationID {
		t.Fatalf("fleet %+v: want 3 instances of %s", view, one.app.Status().ApplicationID)
	}
	got := byEndpoint(view)
	wantLoss := ops.Loss{Operator: "numbers", Kind: "dropped_records", Reason: "skipped_deserialization_error", Count: 1}
	for _, m := range f.members {
		fi, ok := got[m.addr]
		if !ok {
			t.Errorf("instance %s missing from %+v", m.addr, view.Instances)
			continue
		}
		if !fi.Reachable || fi.Status == nil || fi.Error != "" {
			t.Errorf("instance %s: reachable %v error %q, want its status", m.addr, fi.Reachable, fi.Error)
			continue
		}
		if fi.Self != (m == one) || fi.MemberID == "" || fi.Status.Endpoint != m.addr || fi.Status.MemberID != fi.MemberID {
			t.Errorf("instance %s: self %v member %q, status of %s member %q", m.addr, fi.Self, fi.MemberID, fi.Status.Endpoint, fi.Status.MemberID)
		}
		if !slices.Equal(fi.Active, f.active[m.addr]) || !slices.Equal(fi.Standby, f.standby[m.addr]) {
			t.Errorf("instance %s: assignment active %v standby %v, want %v %v", m.addr, fi.Active, fi.Standby, f.active[m.addr], f.standby[m.addr])
		}
		var active, standby []string
		for _, task := range fi.Status.Active {
			active = append(active, task.ID)
			if len(task.Partitions) != 1 || task.Partitions[0].Lag != 0 || task.Partitions[0].EndOffset <= 0 {
				t.Errorf("instance %s task %s: partitions %+v, want one, processed to its end (lag 0)", m.addr, task.ID, task.Partitions)
			}
		}
		for _, task := range fi.Status.Standby {
			standby = append(standby, task.ID)
		}
		if !slices.Equal(active, f.active[m.addr]) || !slices.Equal(standby, f.standby[m.addr]) {
			t.Errorf("instance %s: status active %v standby %v, want %v %v", m.addr, active, standby, f.active[m.addr], f.standby[m.addr])
		}
		if fi.Status.DeadLettersTotal != 1 || len(fi.Status.DeadLetters) != 1 || fi.Status.DeadLetters[0].DeadLetterTopic != f.dlq {
			t.Errorf("instance %s: dead letters %d %+v, want one in %s", m.addr, fi.Status.DeadLettersTotal, fi.Status.DeadLetters, f.dlq)
		}
		if !slices.Equal(fi.Status.Losses, []ops.Loss{wantLoss}) {
			t.Errorf("instance %s: losses %+v, want %+v", m.addr, fi.Status.Losses, wantLoss)
		}
	}

	// Without the token the others refuse: unreachable, with their 401.
	open := byEndpoint(fleetOf(t, one.srv.URL+"/ops-open/api/fleet"))
	for _, m := range f.members {
		fi := open[m.addr]
		if m == one {
			if !fi.Reachable || !fi.Self {
				t.Errorf("self without a token: %+v, want reachable (read in process)", fi)
			}
			continue
		}
		if fi.Reachable || fi.Status != nil || !strings.Contains(fi.Error, "401") {
			t.Errorf("instance %s without a token: reachable %v error %q, want unreachable with a 401", m.addr, fi.Reachable, fi.Error)
		}
	}

	three.stop()
	view = fleetOf(t, one.srv.URL+"/ops/api/fleet")
	got = byEndpoint(view)
	if len(view.Instances) != 3 {
		t.Fatalf("after the third stopped: %d instances, want 3 (a static member stays in the assignment): %+v", len(view.Instances), view.Instances)
	}
	for _, m := range f.members {
		fi := got[m.addr]
		if m == three {
			if fi.Reachable || fi.Status != nil || fi.Error == "" || !slices.Equal(fi.Active, f.active[m.addr]) {
				t.Errorf("the stopped instance: %+v, want unreachable with an error, and its assigned tasks %v", fi, f.active[m.addr])
			}
			continue
		}
		if !fi.Reachable || fi.Status == nil {
			t.Errorf("instance %s after the third stopped: reachable %v error %q", m.addr, fi.Reachable, fi.Error)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/ops"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// With nothing set, the example runs against the dev broker and serves on :8080.
func TestConfigFromEnvDefaults(t *testing.T) {
	s, err := configFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	if len(c.Brokers) != 1 || c.Brokers[0] != "127.0.0.1:9092" || c.ApplicationID != "fleet" ||
		c.ApplicationServer != "127.0.0.1:8080" || c.InstanceID != "" || c.StateDir != "" ||
		c.CommitInterval != time.Second || c.CloseTimeout != 0 || c.SessionTimeout != 0 {
		t.Errorf("defaults: %+v", c)
	}
	if s.HTTPAddr != ":8080" || s.InputTopic != "fleet-positions" || s.InputPartitions != 6 || s.DemoRate != 0 || s.LogLevel != slog.LevelInfo {
		t.Errorf("defaults: %+v", s)
	}
}

func TestConfigFromEnv(t *testing.T) {
	s, err := configFromEnv(envOf(map[string]string{
		"KSTREAM_BROKERS":              " k-0:9092, k-1:9092 ,",
		"KSTREAM_APPLICATION_ID":       "shop",
		"KSTREAM_INSTANCE_ID":          "shop-2",
		"KSTREAM_LEAVE_GROUP_ON_CLOSE": "true",
		"KSTREAM_HTTP_ADDR":            "0.0.0.0:9000",
		"KSTREAM_STATE_DIR":            "/data",
		"KSTREAM_NUM_STANDBYS":         "2",
		"KSTREAM_REPLICATION_FACTOR":   "3",
		"KSTREAM_COMMIT_INTERVAL":      "250ms",
		"KSTREAM_CLOSE_TIMEOUT":        "20s",
		"KSTREAM_SESSION_TIMEOUT":      "2m",
		"KSTREAM_BLOCK_CACHE_BYTES":    "128Mi",
		"KSTREAM_MEMTABLE_BYTES":       "16MiB",
		"KSTREAM_STORE_CACHE_BYTES":    "-1",
		"KSTREAM_LOG_LEVEL":            "warn",
		"FLEET_INPUT_TOPIC":            "positions",
		"FLEET_INPUT_PARTITIONS":       "0",
		"FLEET_DEMO_RATE":              "10",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	if strings.Join(c.Brokers, ",") != "k-0:9092,k-1:9092" || c.ApplicationID != "shop" || c.InstanceID != "shop-2" ||
		!c.LeaveGroupOnClose || c.StateDir != "/data" || c.NumStandbys != 2 || c.ReplicationFactor != 3 ||
		c.CommitInterval != 250*time.Millisecond || c.CloseTimeout != 20*time.Second || c.SessionTimeout != 2*time.Minute ||
		c.BlockCacheBytes != 128<<20 || c.MemTableBytes != 16<<20 || c.StoreCacheBytes != -1 {
		t.Errorf("config: %+v", c)
	}
	// Listening on every address, the instance announces 127.0.0.1 unless told otherwise.
	if c.ApplicationServer != "127.0.0.1:9000" {
		t.Errorf("ApplicationServer %q", c.ApplicationServer)
	}
	if s.HTTPAddr != "0.0.0.0:9000" || s.InputTopic != "positions" || s.InputPartitions != 0 || s.DemoRate != 10 || s.LogLevel != slog.LevelWarn {
		t.Errorf("settings: %+v", s)
	}
}

// Every malformed variable is reported, by name, in one error.
func TestConfigFromEnvErrors(t *testing.T) {
	bad := map[string]string{
		"KSTREAM_NUM_STANDBYS":         "-1",
		"KSTREAM_CLOSE_TIMEOUT":        "30",
		"KSTREAM_SESSION_TIMEOUT":      "-5s",
		"KSTREAM_BLOCK_CACHE_BYTES":    "-64Mi",
		"KSTREAM_MEMTABLE_BYTES":       "lots",
		"KSTREAM_APPLICATION_SERVER":   "fleet-0.fleet:http",
		"KSTREAM_LEAVE_GROUP_ON_CLOSE": "yes please",
		"KSTREAM_LOG_LEVEL":            "loud",
		"FLEET_INPUT_PARTITIONS":       "six",
	}
	_, err := configFromEnv(envOf(bad))
	if err == nil {
		t.Fatal("no error")
	}
	for name := range bad {
		if !strings.Contains(err.Error(), name+"=") {
			t.Errorf("the error does not name %s:\n%v", name, err)
		}
	}
	for env, what := range map[string]map[string]string{
		"port 0 without an ApplicationServer": {"KSTREAM_HTTP_ADDR": "127.0.0.1:0"},
		"leaving without an instance id":      {"KSTREAM_LEAVE_GROUP_ON_CLOSE": "true"},
		"an HTTP address without a port":      {"KSTREAM_HTTP_ADDR": "localhost"},
	} {
		if _, err := configFromEnv(envOf(what)); err == nil {
			t.Errorf("%s: no error", env)
		}
	}
}

// The example, configured by the StatefulSet's own environment (with only the broker, the
// addresses, the state directory and unique names replaced), runs on the test broker: the
// manifest's probe paths answer on its HTTP port as the ops handler does (live at once,
// ready once running), the query server on the same port answers the counts, and a
// cancelled context (SIGTERM in main) stops it gracefully.
func TestRunWithManifestEnv(t *testing.T) {
	t.Parallel()
	k := loadKit(t)
	env := k.resolvedEnv(t)
	c := k.container(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env["KSTREAM_BROKERS"] = strings.Join(kafkatest.Brokers(t), ",")
	env["KSTREAM_HTTP_ADDR"] = "127.0.0.1:0" // listened on above
	env["KSTREAM_APPLICATION_SERVER"] = ln.Addr().String()
	env["KSTREAM_STATE_DIR"] = t.TempDir()
	env["KSTREAM_REPLICATION_FACTOR"] = "1"
	env["KSTREAM_APPLICATION_ID"] = kafkatest.Name(t, "fleet")
	env["FLEET_INPUT_TOPIC"] = kafkatest.Name(t, "positions")
	s, err := configFromEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.InstanceID != k.podName() || s.InputPartitions <= 0 {
		t.Fatalf("instance id %q, input partitions %d: want the manifest's", s.Config.InstanceID, s.InputPartitions)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() { done <- run(ctx, s, ln, logger) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})

	base := "http://" + ln.Addr().String()
	get := func(path string) (int, []byte, error) {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	// probeOK reports whether path answers 200 with the ops handler's JSON health, and
	// checks that any answer is one the ops handler gives (200 or 503, a Health body).
	probeOK := func(path string, ok func(ops.Health) bool) bool {
		code, body, err := get(path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		var h ops.Health
		if err := json.Unmarshal(body, &h); err != nil || h.State == "" {
			t.Fatalf("GET %s: %d %s: not the ops handler's health (%v)", path, code, body, err)
		}
		switch code {
		case http.StatusOK:
			if !ok(h) {
				t.Fatalf("GET %s: 200 with %s", path, body)
			}
			return true
		case http.StatusServiceUnavailable:
			if ok(h) {
				t.Fatalf("GET %s: 503 with %s", path, body)
			}
			return false
		}
		t.Fatalf("GET %s: status %d %s", path, code, body)
		return false
	}
	live, ready := c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path
	// Live from the start: restoring or joining is no reason to restart.
	if !probeOK(live, func(h ops.Health) bool { return h.Live }) {
		t.Fatalf("%s: not live at start", live)
	}
	kafkatest.Eventually(t, 30*time.Second, "the readiness probe answering 200", func() bool {
		return probeOK(ready, func(h ops.Health) bool { return h.Ready })
	})

	// Count some reports and read them back through the query server on the same port.
	const vehicles, perVehicle = 5, 3
	var recs []*kgo.Record
	for i := range vehicles * perVehicle {
		recs = append(recs, &kgo.Record{Topic: s.InputTopic, Key: fmt.Appendf(nil, "vehicle-%03d", i%vehicles), Value: []byte("48.85,2.35")})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	for v := range vehicles {
		path := fmt.Sprintf("/v1/stores/%s/keys?key=vehicle-%03d", storeName, v)
		kafkatest.Eventually(t, 30*time.Second, path+" answering "+fmt.Sprint(perVehicle), func() bool {
			code, body, err := get(path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			var r struct {
				Value int64 `json:"value"`
			}
			return code == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Value == perVehicle
		})
	}
	if code, body, err := get(opsPrefix + "/api/status"); err != nil || code != http.StatusOK {
		t.Errorf("GET %s/api/status: %d %s %v", opsPrefix, code, body, err)
	}

	// Graceful stop, well within the close timeout.
	cancel()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(s.Config.CloseTimeout + httpShutdownTimeout):
		t.Fatal("run did not return within the close timeout and the HTTP shutdown")
	}
	if code, _, err := get(live); err == nil {
		t.Errorf("GET %s after the stop: %d, want no server", live, code)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

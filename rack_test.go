package kstream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
)

// Four instances in two racks with one standby each: every stateful task's standby is on the
// other rack than its active, so that losing a rack leaves a copy of every task; and the
// standbys are balanced (two per instance).
func TestStandbysOnOtherRacks(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 8, nil)
	out := kafkatest.CreateTopic(t, "out", 8, nil)
	base := testConfig(t)
	base.NumStandbys = 1
	rackOf := map[string]string{}
	var apps []*kstream.App
	for i := range 4 {
		cfg := base
		cfg.StateDir = t.TempDir()
		cfg.Rack = fmt.Sprintf("zone-%c", 'a'+i%2)
		cfg.ApplicationServer = fmt.Sprintf("instance-%d:8080", i) // only a name here: nothing queries it
		rackOf[cfg.ApplicationServer] = cfg.Rack
		app := newApp(t, countTopology(in, out), cfg)
		start(t, app)
		apps = append(apps, app)
	}
	var md []kstream.InstanceMetadata
	kafkatest.Eventually(t, 60*time.Second, "4 instances with 2 active and 2 standby tasks each", func() bool {
		md = apps[0].Metadata()
		if len(md) != 4 {
			return false
		}
		for _, m := range md {
			if len(m.Active) != 2 || len(m.Standby) != 2 {
				return false
			}
		}
		return true
	})
	activeOn := map[kstream.TaskID]string{}
	for _, m := range md {
		for _, id := range m.Active {
			activeOn[id] = m.Host
		}
	}
	for _, m := range md {
		for _, id := range m.Standby {
			if rackOf[m.Host] == rackOf[activeOn[id]] {
				t.Errorf("task %v: active on %s, standby on %s, both in %s", id, activeOn[id], m.Host, rackOf[m.Host])
			}
		}
	}
}

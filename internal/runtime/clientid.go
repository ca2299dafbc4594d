package runtime

import (
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Client ids, as Kafka Streams forms them (KafkaStreams, StreamThread, StreamsConfig):
// the instance's client id is Config.ClientID (Java's client.id) or, by default,
// <application.id>-<process id>; each client adds its role. This runtime has one
// processing loop, Kafka Streams' StreamThread-1, and so:
//
//	<client id>-StreamThread-1-consumer          the group member (under exactly-once also the transactional producer)
//	<client id>-StreamThread-1-producer          the producer, also used as the admin client
//	<client id>-StreamThread-1-restore-consumer  the consumers restoring stores and feeding standbys
//	<client id>-global-consumer                  the consumer of the global stores
//
// so that broker logs, quotas and kafka-consumer-groups --describe tell the instances
// and their clients apart. The process id is a UUID: kept in the state directory when
// the instance uses one (persistent stores or exactly-once, whose transactional id it
// also names), as Kafka Streams keeps its process id, else new for each Run.
const (
	roleConsumer        = "StreamThread-1-consumer"
	roleProducer        = "StreamThread-1-producer"
	roleRestoreConsumer = "StreamThread-1-restore-consumer"
	roleGlobalConsumer  = "global-consumer"
)

// initClientID sets the client id prefix r.clientID; Run calls it after claiming the
// state directory and before opening any client.
func (r *Runtime) initClientID() error {
	if r.cfg.ClientID != "" {
		r.clientID = r.cfg.ClientID
		return nil
	}
	var pid string
	var err error
	if r.usesStateDir() {
		pid, err = processID(r.cfg.StateDir)
	} else {
		pid, err = newProcessUUID()
	}
	if err != nil {
		return err
	}
	r.clientID = r.cfg.ApplicationID + "-" + pid
	return nil
}

// clientIDOpt is the kgo.ClientID option of the client with the given role.
func (r *Runtime) clientIDOpt(role string) kgo.Opt {
	return kgo.ClientID(r.clientID + "-" + role)
}

// newProcessUUID returns a random (version 4) UUID in its text form, as Java's
// UUID.randomUUID().toString().
func newProcessUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kstream: making a process id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

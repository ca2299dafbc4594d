package serde_test

import (
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// topicEcho is a serde that writes the topic and role it was bound to.
type topicEcho struct{ bound string }

func (e topicEcho) Serialize(string) ([]byte, error)     { return []byte(e.bound), nil }
func (e topicEcho) Deserialize(b []byte) (string, error) { return string(b), nil }
func (e topicEcho) ForTopic(topic string, isKey bool) serde.Serde[string] {
	role := "value"
	if isKey {
		role = "key"
	}
	return topicEcho{bound: topic + "/" + role}
}

func TestForTopic(t *testing.T) {
	// A serde that is not TopicBound is returned as it is.
	s := serde.String()
	if got := serde.ForTopic(s, "orders", true); got != s {
		t.Errorf("ForTopic(String) = %v, want the serde itself", got)
	}

	b, _ := serde.ForTopic[string](topicEcho{}, "orders", true).Serialize("x")
	if string(b) != "orders/key" {
		t.Errorf("bound serde wrote %q, want orders/key", b)
	}

	// The wrappers bind what they wrap.
	v := "x"
	nb, _ := serde.ForTopic(serde.Nullable[string](topicEcho{}), "t", false).Serialize(&v)
	if string(nb) != "t/value" {
		t.Errorf("Nullable: %q, want t/value", nb)
	}
	w := serde.WindowedMs("k", 0, 10)
	tb, _ := serde.ForTopic(serde.TimeWindowed[string](topicEcho{}, 10*time.Millisecond), "tw", true).Serialize(w)
	if string(tb[:len(tb)-8]) != "tw/key" {
		t.Errorf("TimeWindowed: %q, want tw/key then the start", tb)
	}
	sb, _ := serde.ForTopic(serde.SessionWindowed[string](topicEcho{}), "sw", true).Serialize(w)
	if string(sb[:len(sb)-16]) != "sw/key" {
		t.Errorf("SessionWindowed: %q, want sw/key then end and start", sb)
	}
}

package kstream

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TableJoinOn joins each row of left with the row of right whose key is the row's foreign
// key fk(key, value), as Kafka Streams' KTable.join(other, foreignKeyExtractor, joiner)
// does (with the KIP-1104 key-and-value extractor). The result is keyed like left and has a
// row for each left row whose foreign key has a row in right, with value
// joiner(leftValue, rightValue). It is updated when either side changes: a right update
// reaches every left row that refers to it.
//
// It runs Kafka Streams' subscription/response protocol, with the same internal topics,
// store and wire formats, so a Go and a Java application with this topology can share them
// (see docs/fkjoin.md): each left update is sent as a subscription to the partition of its
// foreign key through "<application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic"
// (co-partitioned with right), kept in the subscription store
// "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>" next to right, and answered through
// "<application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic" (co-partitioned with
// left). A response carries the murmur3 hash of the left value that asked for it, and is
// dropped if left's row has changed since: a row whose foreign key changes twice in a row
// never shows a result for its first new key. Beyond Java, a stale response of this inner
// join brings the row up to date (a delete for a deleted row or a null foreign key, else a
// new PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE subscription for the current value), because
// the current value's subscription may get no response and Java would keep a stale result
// (see docs/fkjoin.md, "Stale responses").
//
// A foreign key that is nil (for a pointer, map, slice or interface KO), or that right's
// key serde turns into nil bytes, is null: the row has no match (its previous result, if
// any, is deleted) and the record is counted in [Stats].DroppedRecords. Both tables must
// carry key and value serdes: right's key serde serializes foreign keys, and left's value
// serde gives the bytes that are hashed. A nil result of joiner is a delete.
//
// Options: [Named] (the operators, store and topics are then named after it, as in Java's
// TableJoined.as: the processor "<name>-subscription-registration-processor", the store
// "<name>-subscription-store", the topics
// "<application.id>-<name>-subscription-registration-topic" and
// "<application.id>-<name>-subscription-response-topic", ..., the result "<name>-result"),
// [Materialized] (the result's store), [WithPartitioner] and [WithOtherPartitioner] (the
// partitioners of the left and right tables' topics, Java's TableJoined.withPartitioner
// and withOtherPartitioner). Without Materialized the result has no store; give it one to
// join it with another table or to query it.
func TableJoinOn[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(key K, v V) KO, joiner func(v V, vo VO) VR, opts ...Option) KTable[K, VR] {
	return fkJoin(left, right, fk, func(v V, vo VO, _ bool) VR { return joiner(v, vo) }, false, "TableJoinOn", opts)
}

// TableLeftJoinOn is [TableJoinOn] that keeps every row of left, as Kafka Streams'
// KTable.leftJoin(other, foreignKeyExtractor, joiner) does: when right has no row for the
// foreign key, or the foreign key is null, joiner gets found false and the zero VO. Every
// left update (a null foreign key included) is answered, so the result always follows
// left; a delete of a left row deletes its result.
func TableLeftJoinOn[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(key K, v V) KO, joiner func(v V, vo VO, found bool) VR, opts ...Option) KTable[K, VR] {
	return fkJoin(left, right, fk, joiner, true, "TableLeftJoinOn", opts)
}

// fkSubRecord is what the subscription receiver passes to the subscription joiner: a
// subscription with its foreign key (still serialized, nil when null).
type fkSubRecord struct {
	fk  []byte
	sub fkSubscription
}

// fkAnswersDue is, for one task of the left side of an inner foreign-key join, the hash
// of each primary key's (serialized) current value whose subscription is sure to be
// answered (PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, sent by the subscription sender or again
// by the resolver) while that answer is outstanding: a stale response for such a value
// needs no new subscription. It is only an economy: a new task instance starts empty and
// subscribes again when in doubt. It is a txnHook: when a transaction aborts, the
// subscriptions it sent are gone, and so is the record.
type fkAnswersDue struct {
	mu sync.Mutex // a task runs on one goroutine at a time, not always the same one
	m  map[string]fkHash
}

func (*fkAnswersDue) cut() func() { return nil }

func (d *fkAnswersDue) aborted() {
	d.mu.Lock()
	clear(d.m)
	d.mu.Unlock()
}

// set records that h's answer is due for pk.
func (d *fkAnswersDue) set(pk []byte, h fkHash) {
	d.mu.Lock()
	d.m[string(pk)] = h
	d.mu.Unlock()
}

// clear records that no answer is due for pk.
func (d *fkAnswersDue) clear(pk []byte) {
	d.mu.Lock()
	delete(d.m, string(pk))
	d.mu.Unlock()
}

// due reports whether h's answer is due for pk.
func (d *fkAnswersDue) due(pk []byte, h fkHash) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.m[string(pk)]
	return ok && g == h
}

// answered forgets pk's due answer if it is h's.
func (d *fkAnswersDue) answered(pk []byte, h fkHash) {
	d.mu.Lock()
	if g, ok := d.m[string(pk)]; ok && g == h {
		delete(d.m, string(pk))
	}
	d.mu.Unlock()
}

// fkCloser is a function as a closer.
type fkCloser func() error

func (f fkCloser) Close() error { return f() }

// fkJoin builds Kafka Streams' foreign-key join (KTableImpl.doJoinOnForeignKey).
func fkJoin[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(K, V) KO, joiner func(V, VO, bool) VR, leftJoin bool, op string, opts []Option) KTable[K, VR] {
	b := left.b
	c := b.options(op, opts, "Materialized", "WithPartitioner", "WithOtherPartitioner")
	leftPart := partitionerOf[K, V](b, op+": WithPartitioner (of the left table)", c.partitioner)
	rightPart := partitionerOf[KO, VO](b, op+": WithOtherPartitioner (of the right table)", c.otherPartitioner)
	if right.b != b {
		b.errorf("%s: the tables come from different builders", op)
		return KTable[K, VR]{b: b, n: left.n, info: storedInfo()}
	}
	if left.ks == nil || left.vs == nil || right.ks == nil || right.vs == nil {
		b.errorf("%s: both tables must carry key and value serdes (the left values are hashed, the foreign keys and right values are sent through internal topics): %w", op, ErrNoSerde)
	}
	// Right's old values let Java skip needless scans; left's are needed to unsubscribe
	// from an old foreign key.
	right.info.enable(true)
	left.info.enable(true)

	// Every name takes a number from the counter, named or not (NamedInternal.suffixWithOrElseGet).
	name := func(suffix, prefix string) string {
		if gen := b.newName(prefix); c.name == "" {
			return gen
		}
		return c.name + suffix
	}
	regTopic := name("-subscription-registration", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION") + "-topic"
	sendName := name("-subscription-registration-processor", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION")
	regSinkName := name("-subscription-registration-sink", "KTABLE-SINK")
	regSourceName := name("-subscription-registration-source", "KTABLE-SOURCE")
	storeName := name("-subscription-store", "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE")
	recvName := name("-subscription-receive", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
	subJoinName := name("-subscription-join-foreign", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
	foreignJoinName := name("-foreign-join-subscription", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR")
	respTopic := name("-subscription-response", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE") + "-topic"
	respSinkName := name("-subscription-response-sink", "KTABLE-SINK")
	respSourceName := name("-subscription-response-source", "KTABLE-SOURCE")
	resolverName := name("-subscription-response-resolver", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR")
	resultName := name("-result", "KTABLE-FK-JOIN-OUTPUT")
	// MaterializedInternal names an unnamed result store (used only if something forces
	// the result's materialization).
	genStore := ""
	if c.mat == nil {
		genStore = b.newName("KTABLE-FK-JOIN-OUTPUT-STATE-STORE")
	}

	topicConfigs := func() map[string]*string {
		return map[string]*string{"cleanup.policy": ptr("delete"), "retention.ms": ptr("-1")}
	}
	b.internal = append(b.internal,
		runtime.InternalTopic{Name: regTopic, Configs: topicConfigs()},
		runtime.InternalTopic{Name: respTopic, Configs: topicConfigs(), KeepPartition: true})

	sendN := b.tableNode(sendName, left.n)
	regSink := &node{kind: kindSink, sinkTopic: regTopic, internal: true}
	b.addNode(regSink, "", regSinkName, sendN)
	regSource := &node{kind: kindSource, topics: []string{regTopic}, internal: true}
	b.addNode(regSource, "", regSourceName)
	subStore := tableStoreDef(storeName, serde.Bytes(), serde.Bytes(), nil)
	recvN := b.tableNode(recvName, regSource)
	b.addStore(subStore, recvN)
	subJoinN := b.tableNode(subJoinName, recvN)
	for _, d := range right.getterStores {
		b.addStore(d, subJoinN)
	}
	foreignJoinN := b.tableNode(foreignJoinName, right.n)
	b.addStore(subStore, foreignJoinN)
	respSink := &node{kind: kindSink, sinkTopic: respTopic, internal: true}
	b.addNode(respSink, "", respSinkName, subJoinN, foreignJoinN)
	respSource := &node{kind: kindSource, topics: []string{respTopic}, internal: true}
	b.addNode(respSource, "", respSourceName)
	resolverN := b.tableNode(resolverName, respSource)
	for _, d := range left.getterStores {
		b.addStore(d, resolverN)
	}
	resultN := b.tableNode(resultName, resolverN)

	// The registration topic is co-partitioned with right, the response topic with left,
	// and each takes its partition count from them.
	b.copart = append(b.copart, []*node{right.n, regSource}, []*node{left.n, respSource})
	if b.internalLike == nil {
		b.internalLike = map[string]*node{}
	}
	b.internalLike[regTopic], b.internalLike[respTopic] = right.n, left.n

	// answersDue gives the sender and the resolver of a task the same fkAnswersDue; a
	// task's is forgotten when the task closes.
	var duesMu sync.Mutex
	dues := map[*task]*fkAnswersDue{}
	answersDue := func(t *task, n *node) *fkAnswersDue {
		duesMu.Lock()
		defer duesMu.Unlock()
		d, ok := dues[t]
		if !ok {
			d = &fkAnswersDue{m: map[string]fkHash{}}
			dues[t] = d
			t.txnHooks = append(t.txnHooks, d)
			t.closers = append(t.closers, namedCloser{n.name, fkCloser(func() error {
				duesMu.Lock()
				delete(dues, t)
				duesMu.Unlock()
				return nil
			})})
		}
		return d
	}

	// Kafka Streams' Confluent serdes name their subjects after the topics the FK join's
	// serdes are given: the foreign key after the registration topic (its record key), the
	// primary key and the hashed left value after pseudo topics "<registration topic>-pk"
	// and "-vh", right's value after the response topic. bindFK binds them for task t.
	type fkSerdes struct {
		fk   serde.Serde[KO]
		pk   serde.Serde[K]
		vh   serde.Serde[V]
		resp serde.Serde[VO]
	}
	bindFK := func(t *task) fkSerdes {
		return fkSerdes{
			fk:   taskBound(t, right.ks, regTopic, true),
			pk:   taskBound(t, left.ks, regTopic+"-pk", true),
			vh:   taskBound(t, left.vs, regTopic+"-vh", false),
			resp: taskBound(t, right.vs, respTopic, false),
		}
	}

	// serFK is the foreign key of a left value, serialized with fks; nil when null.
	serFK := func(fks serde.Serde[KO], k K, v V) ([]byte, error) {
		ko := fk(k, v)
		if isNil(ko) {
			return nil, nil
		}
		kb, err := serialize(fks, ko)
		if err != nil {
			return nil, fmt.Errorf("serializing the foreign key: %w", err)
		}
		return kb, nil
	}

	// SubscriptionSendProcessorSupplier: a left update becomes subscriptions.
	sendN.instantiate = func(t *task) (any, error) {
		due := answersDue(t, sendN)
		sd := bindFK(t)
		// The key is serialized into a reused buffer when its serde appends: the
		// subscription's encoding and the answers due copy it.
		pks := newKeyScratch(sd.pk)
		return processorInstance(t, sendN, ProcessorFunc[K, change[V], []byte, []byte](func(ctx ProcessorContext[[]byte, []byte], rec Record[K, change[V]]) error {
			in := rec.Value
			if in.stale && left.info.versioned {
				// Versioned semantics (KIP-914): an out-of-order update of a versioned
				// table is not the key's latest and changes nothing; Java drops it.
				t.env.RecordDropped()
				t.droppedFor(dropOutOfOrder)
				t.lossFor(sendN, false, dropOutOfOrder).n.Add(1)
				return nil
			}
			var hash fkHash // of the new value (if any); computed once
			if in.hasNew {
				vb, err := serialize(sd.vh, in.new)
				if err != nil {
					return fmt.Errorf("serializing the left value: %w", err)
				}
				hash = murmur3Hash128(vb)
			}
			pk, err := pks.bytes(rec.Key)
			if err != nil {
				return err
			}
			send := func(fkb []byte, null bool, instr fkInstruction) error {
				wire, err := encodeFKSubscription(fkSubscription{version: fkSubscriptionVersion, hash: hash, hasHash: in.hasNew, instruction: instr, pk: pk, partition: t.id.Partition})
				if err != nil {
					return err
				}
				r := Record[[]byte, []byte]{Key: fkb, Value: wire, Timestamp: rec.Timestamp, Headers: rec.Headers, nullKey: null}
				if null {
					r.Key = nil
				}
				ctx.Forward(r)
				return nil
			}
			var oldFK, newFK []byte
			if in.hasOld {
				if oldFK, err = serFK(sd.fk, rec.Key, in.old); err != nil {
					return err
				}
			}
			if in.hasNew {
				if newFK, err = serFK(sd.fk, rec.Key, in.new); err != nil {
					return err
				}
			}
			changed := (oldFK == nil) != (newFK == nil) || !bytes.Equal(oldFK, newFK)
			if leftJoin {
				if !in.hasOld && !in.hasNew {
					return nil // an idempotent delete
				}
				if oldFK != nil && changed {
					if err := send(oldFK, false, fkDeleteNoPropagate); err != nil {
						return err
					}
				}
				// Every case gets a response, so that the result follows left; a delete
				// or a null foreign key subscribes to null, which answers null.
				return send(newFK, newFK == nil, fkPropagateNullIfNoFK)
			}
			// The inner join's resolver needs to know whether the new value's answer is
			// sure to come (PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE).
			if in.hasNew && newFK != nil && oldFK != nil && changed {
				due.set(pk, hash)
			} else {
				due.clear(pk)
			}
			switch {
			case in.hasNew && newFK == nil:
				t.dropRecord(sendN, "foreign key")
				if oldFK != nil {
					return send(oldFK, false, fkDeleteAndPropagate)
				}
			case in.hasNew && oldFK != nil && changed:
				if err := send(oldFK, false, fkDeleteNoPropagate); err != nil {
					return err
				}
				return send(newFK, false, fkPropagateNullIfNoFK)
			case in.hasNew:
				return send(newFK, false, fkPropagateOnlyIfFK)
			case oldFK != nil: // the left row is deleted
				return send(oldFK, false, fkDeleteAndPropagate)
			}
			return nil
		}))
	}
	var produceSubscription func(t *task, o *runtime.OutRecord)
	// The registration sink writes the subscriptions as they are (bytes), partitioned by
	// foreign key.
	regSink.instantiate = func(t *task) (any, error) {
		topic := internalTopic(t.appID, regTopic)
		return func(r Record[[]byte, []byte]) {
			defer t.recoverIn(regSink)
			key := r.Key
			if r.HasNullKey() {
				key = nil
			}
			produceSubscription(t, &runtime.OutRecord{
				Record:   kgo.Record{Topic: topic, Key: key, Value: r.Value, Timestamp: r.Timestamp, Headers: toKgoHeaders(r.Headers)},
				Operator: regSink.name,
				Source:   t.cur,
			})
		}, nil
	}
	regSource.instantiate = func(t *task) (any, error) { return fkRawSource(t, regSource) }

	// SubscriptionReceiveProcessorSupplier: keeps the subscriptions by (foreign key, key).
	recvN.instantiate = func(t *task) (any, error) {
		st, err := taskTableStore[[]byte, []byte](t, storeName)
		if err != nil {
			return nil, err
		}
		// The store is written as bytes (a table store of bytes: the 8-byte timestamp,
		// then the subscription), from scratch buffers: a backend copies what it keeps.
		be := st.Backend()
		var ckBuf, valBuf []byte
		return processorInstance(t, recvN, ProcessorFunc[[]byte, []byte, []byte, fkSubRecord](func(ctx ProcessorContext[[]byte, fkSubRecord], rec Record[[]byte, []byte]) error {
			sub, err := decodeFKSubscription(rec.Value)
			if err != nil {
				return err
			}
			nullFK := rec.Key == nil
			if nullFK && sub.instruction != fkPropagateNullIfNoFK {
				t.dropRecord(recvN, "foreign key")
				return nil
			}
			if sub.version > fkSubscriptionVersion {
				return fmt.Errorf("kstream: SubscriptionWrapper of version %d, newer than this library's %d", sub.version, fkSubscriptionVersion)
			}
			if !nullFK {
				ckBuf = appendFKCombinedKey(ckBuf[:0], rec.Key, sub.pk)
				if sub.instruction == fkDeleteAndPropagate || sub.instruction == fkDeleteNoPropagate {
					err = be.Delete(ckBuf)
				} else {
					valBuf = binary.BigEndian.AppendUint64(valBuf[:0], uint64(unixMs(rec.Timestamp)))
					valBuf = append(valBuf, rec.Value...)
					err = be.Set(ckBuf, valBuf)
				}
				if err != nil {
					return fmt.Errorf("store %s: %w", storeName, err)
				}
			}
			// Java forwards the combined key; the subscription joiner only needs the
			// foreign key, in the value.
			ctx.Forward(Record[[]byte, fkSubRecord]{Key: rec.Key, Value: fkSubRecord{fk: rec.Key, sub: sub}, Timestamp: rec.Timestamp, Headers: rec.Headers})
			return nil
		}))
	}

	// SubscriptionJoinProcessorSupplier: answers a subscription with right's current value.
	subJoinN.instantiate = func(t *task) (any, error) {
		get, err := right.getter(t)
		if err != nil {
			return nil, err
		}
		getBytes := fkBytesGetter(right, t) // nil: through get and the serdes
		sd := bindFK(t)
		return processorInstance(t, subJoinN, ProcessorFunc[[]byte, fkSubRecord, []byte, fkResponse](func(ctx ProcessorContext[[]byte, fkResponse], rec Record[[]byte, fkSubRecord]) error {
			sub := rec.Value.sub
			switch sub.instruction {
			case fkDeleteAndPropagate, fkPropagateNullIfNoFK, fkPropagateOnlyIfFK:
			default:
				return nil // DELETE_KEY_NO_PROPAGATE: no answer
			}
			var vb []byte // right's serialized value
			var tsR int64
			found := false
			// The lookup is made for DELETE_KEY_AND_PROPAGATE too: its answer, null,
			// takes the later of the two timestamps as well.
			if fk := rec.Value.fk; fk != nil {
				if getBytes != nil {
					stored, ok, err := getBytes(fk)
					if err != nil {
						return fmt.Errorf("store %s: %w", right.store, err)
					}
					if ok {
						if tsR, vb, err = fkSplitStored(stored); err != nil {
							return fmt.Errorf("store %s: %w", right.store, err)
						}
						found = true
					}
				} else {
					ko, err := deserialize(right.ks, fk)
					if err != nil {
						return fmt.Errorf("deserializing the foreign key: %w", err)
					}
					var vo VO
					if vo, tsR, found, err = get(ko); err != nil {
						return err
					}
					if found && sub.instruction != fkDeleteAndPropagate {
						if vb, err = serialize(sd.resp, vo); err != nil {
							return fmt.Errorf("serializing the right value: %w", err)
						}
					}
				}
			}
			ts := unixMs(rec.Timestamp)
			if found {
				ts = max(ts, tsR)
			}
			if sub.instruction == fkPropagateOnlyIfFK && !found {
				return nil
			}
			if sub.instruction == fkDeleteAndPropagate {
				vb = nil
			}
			// DELETE_KEY_AND_PROPAGATE answers null; the others right's value, if any.
			ctx.Forward(Record[[]byte, fkResponse]{Key: sub.pk,
				Value:     fkResponse{version: fkResponseVersion, hash: sub.hash, hasHash: sub.hasHash, value: vb, partition: sub.partition},
				Timestamp: msTime(ts), Headers: rec.Headers})
			return nil
		}))
	}

	// ForeignTableJoinProcessorSupplier: a right update answers every subscriber.
	foreignJoinN.instantiate = func(t *task) (any, error) {
		sd := bindFK(t)
		st, err := taskTableStore[[]byte, []byte](t, storeName)
		if err != nil {
			return nil, err
		}
		be := st.Backend()
		var prefix []byte
		type answer struct {
			pk  []byte
			sub fkSubscription
		}
		var answers []answer // reused: a right update answers every subscriber
		return processorInstance(t, foreignJoinN, ProcessorFunc[KO, change[VO], []byte, fkResponse](func(ctx ProcessorContext[[]byte, fkResponse], rec Record[KO, change[VO]]) error {
			if rec.HasNullKey() {
				t.dropRecord(foreignJoinN, "key")
				return nil
			}
			if rec.Value.stale && right.info.versioned {
				t.env.RecordDropped() // versioned semantics, as in the sender
				t.droppedFor(dropOutOfOrder)
				t.lossFor(foreignJoinN, false, dropOutOfOrder).n.Add(1)
				return nil
			}
			kb, err := serialize(sd.fk, rec.Key)
			if err != nil {
				return fmt.Errorf("serializing the key: %w", err)
			}
			if kb == nil {
				t.dropRecord(foreignJoinN, "key")
				return nil
			}
			var vb []byte
			if rec.Value.hasNew {
				if vb, err = serialize(sd.resp, rec.Value.new); err != nil {
					return fmt.Errorf("serializing the value: %w", err)
				}
			}
			prefix = appendFKCombinedKey(prefix[:0], kb, nil)
			it, err := be.PrefixScan(prefix)
			if err != nil {
				return fmt.Errorf("store %s: %w", storeName, err)
			}
			answers = answers[:0]
			for it.Next() {
				// The iterator's key and value are valid until the next Next: the
				// primary key is copied.
				_, pk, err := splitFKCombinedKey(it.Key())
				if err != nil {
					it.Close()
					return err
				}
				v := it.Value()
				if len(v) < 8 {
					it.Close()
					return fmt.Errorf("store %s: a value of %d bytes, fewer than its 8-byte timestamp", storeName, len(v))
				}
				sub, err := decodeFKSubscription(v[8:])
				if err != nil {
					it.Close()
					return err
				}
				sub.pk = nil // a slice of the iterator's value, not needed
				// Copied into a non-nil slice: the empty primary key is the response's
				// key, an empty key and not a null one.
				answers = append(answers, answer{append([]byte{}, pk...), sub})
			}
			if err := it.Err(); err != nil {
				it.Close()
				return err
			}
			if err := it.Close(); err != nil {
				return err
			}
			for _, a := range answers {
				ctx.Forward(Record[[]byte, fkResponse]{Key: a.pk,
					Value:     fkResponse{version: fkResponseVersion, hash: a.sub.hash, hasHash: a.sub.hasHash, value: vb, partition: a.sub.partition},
					Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
			return nil
		}))
	}

	// produceSubscription produces o, a subscription keyed by its serialized foreign key,
	// to the partition that right's partitioner (WithOtherPartitioner) chooses for it, or
	// else by the default partitioner, as Java's subscription sink does.
	produceSubscription = func(t *task, o *runtime.OutRecord) {
		if rightPart == nil {
			t.env.Produce(o)
			return
		}
		var ko KO
		if o.Record.Key != nil {
			var err error
			if ko, err = deserialize(right.ks, o.Record.Key); err != nil {
				t.processingError(regSink, fmt.Errorf("deserializing the foreign key for WithOtherPartitioner: %w", err))
				return
			}
		}
		var zero VO
		p, ok := fkPartition(t, regSink, o.Record.Topic, func(n int32) Partitions { return rightPart(o.Record.Topic, ko, zero, n) })
		if !ok {
			return
		}
		if p >= 0 {
			o.Record.Partition, o.Partitioned = p, true
		}
		t.env.Produce(o)
	}

	// The response sink writes each response to the partition of the left record that
	// subscribed (the primary partition), as Java's response partitioner does; with
	// WithPartitioner, to the partition it chooses for the primary key, as Java's does then.
	respSink.instantiate = func(t *task) (any, error) {
		topic := internalTopic(t.appID, respTopic)
		return func(r Record[[]byte, fkResponse]) {
			defer t.recoverIn(respSink)
			if r.Value.partition < 0 && leftPart == nil {
				t.processingError(respSink, fmt.Errorf("a response to a subscription of version 0 (no primary partition) cannot be routed; upgrade the applications that wrote it"))
				return
			}
			part := r.Value.partition
			if leftPart != nil {
				k, err := deserialize(left.ks, r.Key)
				if err != nil {
					t.processingError(respSink, fmt.Errorf("deserializing the key for WithPartitioner: %w", err))
					return
				}
				var zero V
				p, ok := fkPartition(t, respSink, topic, func(n int32) Partitions { return leftPart(topic, k, zero, n) })
				if !ok {
					return
				}
				if part = p; p < 0 {
					// The default partitioner's choice, made here: the topic's records
					// carry their partition (InternalTopic.KeepPartition).
					n, _ := t.env.PartitionCount(t.env.Context(), topic)
					part = partition.ForKey(r.Key, n)
				}
			}
			t.env.Produce(&runtime.OutRecord{
				Record:   kgo.Record{Topic: topic, Partition: part, Key: r.Key, Value: encodeFKResponse(r.Value), Timestamp: r.Timestamp, Headers: toKgoHeaders(r.Headers)},
				Operator: respSink.name,
				Source:   t.cur,
			})
		}, nil
	}
	respSource.instantiate = func(t *task) (any, error) { return fkResponseSource(t, respSource, left.ks) }

	// resubscribe sends, from the left side's task, the subscription of the current left
	// value of rec's key (serialized pk, hash cur, foreign key fkb) with PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
	// through the registration topic as the subscription sender would.
	resubscribe := func(t *task, rec Record[K, fkRespRecord], pk, fkb []byte, cur fkHash) error {
		wire, err := encodeFKSubscription(fkSubscription{version: fkSubscriptionVersion, hash: cur, hasHash: true, instruction: fkPropagateNullIfNoFK, pk: pk, partition: t.id.Partition})
		if err != nil {
			return err
		}
		produceSubscription(t, &runtime.OutRecord{
			Record:   kgo.Record{Topic: internalTopic(t.appID, regTopic), Key: fkb, Value: wire, Timestamp: rec.Timestamp, Headers: toKgoHeaders(rec.Headers)},
			Operator: regSink.name,
			Source:   t.cur,
		})
		return nil
	}

	// ResponseJoinProcessorSupplier: joins a response with left's current value, unless
	// that value is not the one that asked (its hash differs).
	resolverN.instantiate = func(t *task) (any, error) {
		get, err := left.getter(t)
		if err != nil {
			return nil, err
		}
		getBytes := fkBytesGetter(left, t) // nil: through get and the serdes
		due := answersDue(t, resolverN)
		sd := bindFK(t)
		return processorInstance(t, resolverN, ProcessorFunc[K, fkRespRecord, K, VR](func(ctx ProcessorContext[K, VR], rec Record[K, fkRespRecord]) error {
			resp, err := decodeFKResponse(rec.Value.wire)
			if err != nil {
				return err
			}
			if resp.version != fkResponseVersion {
				return fmt.Errorf("kstream: SubscriptionResponseWrapper of version %d; this library reads version %d", resp.version, fkResponseVersion)
			}
			// pk is the serialized primary key, as the sender serialized it.
			pk := rec.Value.pk
			// The left row's current value: v, or its bytes vb when read as bytes (then
			// v is deserialized only when needed, by value()).
			var v V
			var vb []byte
			var ok, haveV bool
			if getBytes != nil {
				stored, found, err := getBytes(pk)
				if err != nil {
					return fmt.Errorf("store %s: %w", left.store, err)
				}
				if found {
					if _, vb, err = fkSplitStored(stored); err != nil {
						return fmt.Errorf("store %s: %w", left.store, err)
					}
					ok = true
				}
			} else {
				if v, _, ok, err = get(rec.Key); err != nil {
					return err
				}
				if ok {
					if vb, err = serialize(sd.vh, v); err != nil {
						return fmt.Errorf("serializing the left value: %w", err)
					}
				}
				haveV = true
			}
			value := func() (V, error) {
				if !haveV {
					var err error
					if v, err = deserialize(left.vs, vb); err != nil {
						return v, fmt.Errorf("deserializing the left value: %w", err)
					}
					haveV = true
				}
				return v, nil
			}
			var cur fkHash
			if ok {
				cur = murmur3Hash128(vb)
			}
			out := Record[K, VR]{Key: rec.Key, Timestamp: rec.Timestamp, Headers: rec.Headers, nullKey: rec.nullKey}
			if ok != resp.hasHash || (ok && cur != resp.hash) {
				// A stale response: the left row changed after it subscribed.
				t.env.RecordDropped()
				t.droppedFor(dropStaleResponse)
				t.lossFor(resolverN, false, dropStaleResponse).n.Add(1)
				if t.log.Enabled(context.Background(), slog.LevelDebug) {
					t.log.Debug("kstream: dropping a foreign-key join response for a left value that has changed since", "operator", resolverName, "task", t.id.String(), "key", fmt.Sprint(rec.Key), "found", ok)
				}
				if leftJoin {
					// Every left update of the left join is answered: the current
					// value's response is on its way.
					return nil
				}
				if ok && resp.value != nil {
					// A stale answer with a value needs nothing (see docs/fkjoin.md,
					// "Stale responses"): had it not been stale it would have set a
					// result, and when the current value's subscription goes
					// unanswered (its foreign key has no row) whatever left that
					// foreign key without a row also sends a null answer, which comes
					// after the result it must undo and is handled below.
					return nil
				}
				// Beyond Java (see docs/fkjoin.md, "Stale responses"): the current
				// value's subscription may get no response (PROPAGATE_ONLY_IF_FK_VAL_
				// AVAILABLE for a key without a row, or none at all for a null key),
				// while the result still shows what this stale response was meant to
				// replace. Bring the row up to date: a deleted left row or a null
				// foreign key has no result; any other value subscribes again with
				// PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, which is always answered.
				var fkb []byte
				if ok {
					v, err := value()
					if err != nil {
						return err
					}
					if fkb, err = serFK(sd.fk, rec.Key, v); err != nil {
						return err
					}
				}
				if fkb == nil {
					due.clear(pk)
					out.null = true
					ctx.Forward(out)
					return nil
				}
				if due.due(pk, cur) {
					return nil // the current value's answer is sure to come
				}
				due.set(pk, cur)
				return resubscribe(t, rec, pk, fkb, cur)
			}
			if !leftJoin && ok {
				due.answered(pk, cur)
			}
			if !ok || (resp.value == nil && !leftJoin) {
				out.null = true
			} else {
				v, err := value()
				if err != nil {
					return err
				}
				var vo VO
				if resp.value != nil {
					if vo, err = deserialize(right.vs, resp.value); err != nil {
						return fmt.Errorf("deserializing the right value: %w", err)
					}
				}
				out.Value = joiner(v, vo, resp.value != nil)
				out.null = isNil(out.Value)
			}
			ctx.Forward(out)
			return nil
		}))
	}

	// The result is a table source (KTableSource), materialized if asked.
	vs := carry[V, VR](left.vs)
	if vs == nil {
		vs = carry[VO, VR](right.vs)
	}
	d, vs := materialize(b, op, c, resultN, left.ks, vs)
	info := &tableInfo{}
	info.enable = func(force bool) bool {
		if d == nil {
			if !force {
				return false
			}
			// KTableSource.materialize, under the name MaterializedInternal gave it.
			if vs == nil {
				b.errorf("%s: the result must be materialized (an operator downstream needs its old values), but has no value serde; use Materialized: %w", op, ErrNoSerde)
				return false
			}
			d = tableStoreDef(genStore, left.ks, vs, nil)
			b.addStore(d, resultN)
		}
		info.sendOld = true
		return true
	}
	resultN.instantiate = func(t *task) (any, error) {
		var st *tableKV[K, VR]
		var cache *emitCache[K, VR]
		var cacheKs serde.Serde[K]
		if d != nil {
			var err error
			if st, err = taskTableStore[K, VR](t, d.name); err != nil {
				return nil, err
			}
			if cache = openEmitCache[K, VR](t, d); cache != nil {
				cacheKs = storeKeySerde[K](d, nil)
			}
		}
		return processorInstance(t, resultN, ProcessorFunc[K, VR, K, change[VR]](func(ctx ProcessorContext[K, change[VR]], r Record[K, VR]) error {
			res := change[VR]{new: r.Value, hasNew: !r.null}
			if r.null {
				var zero VR
				res.new = zero
			}
			if st != nil {
				old, _, had, err := getTS(st, r.Key)
				if err != nil {
					return err
				}
				if err := putTS(st, r.Key, res.new, res.hasNew, unixMs(r.Timestamp)); err != nil {
					return err
				}
				if info.sendOld {
					res.old, res.hasOld = old, had
				}
				if cache != nil {
					kb, err := cacheKs.Serialize(r.Key)
					if err != nil {
						return fmt.Errorf("serializing the key: %w", err)
					}
					cache.put(ctx, kb, r.Key, res, had, unixMs(r.Timestamp), r.Headers)
					return nil
				}
			}
			ctx.Forward(Record[K, change[VR]]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		}))
	}
	out := KTable[K, VR]{b: b, n: resultN, ks: left.ks, vs: vs, info: info}
	out.getter = func(t *task) (valueGetter[K, VR], error) {
		if d == nil {
			return nil, fmt.Errorf("kstream: %s: the result of foreign-key join %s has no store; give it one with Materialized to join or query it", op, resultName)
		}
		return storeGetter[K, VR](d.name)(t)
	}
	if d != nil {
		out.store, out.getterStores = d.name, []*storeDef{d}
	}
	return out
}

// fkPartition asks a foreign-key join's partitioner (through choose, given the partition
// count of topic) for the partition of a subscription or a response, in sink n of task t:
// -1 for the default partitioner. A partitioner must choose one partition, as Java's
// requires ("should be a singleton set"); anything else is a processing error, and ok is
// false.
func fkPartition(t *task, n *node, topic string, choose func(n int32) Partitions) (p int32, ok bool) {
	count, err := t.env.PartitionCount(t.env.Context(), topic)
	if err != nil {
		t.partitionError(n, topic, err)
		return 0, false
	}
	ps := choose(count)
	if ps.IsDefault() {
		return -1, true
	}
	l := ps.List()
	if len(l) != 1 || l[0] < 0 || l[0] >= count {
		t.processingError(n, fmt.Errorf("the partitioner of a foreign-key join must choose one partition in [0, %d), but chose %v", count, l))
		return 0, false
	}
	return l[0], true
}

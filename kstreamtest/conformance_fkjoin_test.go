package kstreamtest_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// The foreign-key join scenarios of the conformance test (issue 12 item 2), mirrored one for
// one, in the same order and with the same names, in
// testing/conformance/src/main/java/conformance/FkJoinScenarios.java. They read topics
// orders (key: order id; value "customer|item", an empty customer being a null foreign key)
// and customers (key: customer id; value: a name).

// confFKRecords are the records of orders and customers, as FkJoinScenarios.RECORDS:
// topic, key ("" for a Kafka null), value ("" for a Kafka null), seconds after T0, header.
var confFKRecords = []struct {
	topic, key, value string
	sec               int
	header            string
}{
	{"customers", "c1", "Ann", 1, ""},
	{"customers", "c2", "Bob", 2, ""},
	{"orders", "o1", "c1|apple", 3, "h3"},
	{"orders", "o2", "c2|pear", 4, ""},
	{"orders", "o3", "c3|fig", 5, ""},
	{"customers", "c3", "Cid", 6, ""},
	{"orders", "o1", "c2|apple", 7, ""},
	{"customers", "c2", "Bobby", 8, "h8"},
	{"orders", "o4", "|kiwi", 9, ""},
	{"orders", "o2", "", 10, ""},
	{"customers", "c1", "", 11, ""},
	{"customers", "c3", "", 12, ""},
	{"orders", "o4", "c1|kiwi", 13, ""},
	{"customers", "c1", "Ann2", 14, ""},
	{"orders", "o5", "c4|plum", 15, ""},
	{"orders", "o5", "c2|plum", 16, ""},
	{"orders", "o6", "c2|lime", 8, ""},
	{"orders", "o1", "c2|apple2", 17, ""},
	{"orders", "o3", "|fig", 18, ""},
	{"orders", "", "c1|x", 19, ""},
	{"customers", "", "Zed", 20, ""},
	{"orders", "o7", "c9|melon", 21, ""},
	{"orders", "o7", "", 22, ""},
	{"orders", "o8", "", 23, ""},
	{"customers", "c2", "Bo", 24, "h24"},
	{"orders", "o5", "c2|plum", 25, ""},
	{"customers", "c3", "Cy", 5, ""},
	{"customers", "c2", "", 26, ""},
	{"orders", "o9", "c1|date", 27, ""},
	{"orders", "o6", "c3|lime", 28, ""},
	{"orders", "o1", "c1|apple3", 29, ""},
}

// confFKKey is the key serde of customers, and so of the foreign keys: a string, with ""
// written as a Kafka null, so that an order with an empty customer has a null foreign key
// (Java's extractor returns null for it).
var confFKKey = serde.Funcs(func(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return []byte(s), nil
}, func(b []byte) (string, error) { return string(b), nil })

func confOrders(b *kstream.Builder) kstream.KTable[string, string] {
	return kstream.Table(b, "orders", serde.String(), serde.String(), "orders-store")
}

func confCustomers(b *kstream.Builder) kstream.KTable[string, string] {
	return kstream.Table(b, "customers", confFKKey, serde.String(), "customers-store")
}

// confCustomer is FkJoinScenarios.customer: the customer of an order ("" is null).
func confCustomer(_ string, order string) string {
	c, _, _ := strings.Cut(order, "|")
	return c
}

var confFKScenarios = []struct {
	name  string
	build func(b *kstream.Builder)
}{
	{"fk-join-inner", func(b *kstream.Builder) {
		confOut(kstream.TableJoinOn(confOrders(b), confCustomers(b), confCustomer, func(o, c string) string { return o + "/" + c }).ToStream())
	}},
	{"fk-join-left", func(b *kstream.Builder) {
		confOut(kstream.TableLeftJoinOn(confOrders(b), confCustomers(b), confCustomer,
			func(o, c string, ok bool) string { return o + "/" + confOrDash(c, ok) }).ToStream())
	}},
	{"fk-join-named-materialized", func(b *kstream.Builder) {
		confOut(kstream.TableJoinOn(confOrders(b), confCustomers(b), confCustomer, func(o, c string) string { return o + "/" + c },
			kstream.Named("fkj"), kstream.Materialized[string]("fkj-store", serde.String())).ToStream())
	}},
	{"fk-join-left-named", func(b *kstream.Builder) {
		confOut(kstream.TableLeftJoinOn(confOrders(b), confCustomers(b), confCustomer,
			func(o, c string, ok bool) string { return o + "/" + confOrDash(c, ok) }, kstream.Named("fkl")).ToStream())
	}},
	{"fk-join-key-extractor", func(b *kstream.Builder) {
		j := kstream.TableJoinOn(confOrders(b), confCustomers(b), func(k, v string) string {
			if k == "o6" {
				return "c1"
			}
			return confCustomer(k, v)
		}, func(o, c string) string { return o + "/" + c })
		confOut(kstream.TableMapValues(j, strings.ToUpper).ToStream())
	}},
	{"fk-join-groupby-count", func(b *kstream.Builder) {
		j := kstream.TableJoinOn(confOrders(b), confCustomers(b), confCustomer, func(_, c string) string { return c })
		g := kstream.TableGroupBy(j, func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(v, k) }, serde.String(), serde.String())
		confOut(kstream.TableMapValues(kstream.TableCount(g, "fk-counts"), func(n int64) string { return strconv.FormatInt(n, 10) }).ToStream())
	}},
	{"fk-join-then-left", func(b *kstream.Builder) {
		cust := confCustomers(b)
		j := kstream.TableJoinOn(confOrders(b), cust, confCustomer, func(o, c string) string { return o + "/" + c },
			kstream.Materialized[string]("fk-first", serde.String()))
		confOut(kstream.TableLeftJoinOn(j, cust, func(k, _ string) string {
			if k == "o1" {
				return "c1"
			}
			return "c3"
		}, func(v, c string, ok bool) string { return v + "+" + confOrDash(c, ok) }).ToStream())
	}},
}

func init() {
	confSetFamilyInput("fkjoin", func() []confRecord {
		var out []confRecord
		for _, r := range confFKRecords {
			rec := confRecord{topic: r.topic, ts: time.UnixMilli(confT0 + int64(r.sec)*1000)}
			if r.key != "" {
				rec.key = confPtr(r.key)
			}
			if r.value != "" {
				rec.value = confPtr(r.value)
			}
			if r.header != "" {
				rec.headers = []kstream.Header{{Key: "i", Value: []byte(r.header)}}
			}
			out = append(out, rec)
		}
		return out
	})
	confScenarios = append(confScenarios, confFKScenarios...)
}

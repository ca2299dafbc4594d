package query

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kstream-go/kstream"
)

var (
	base64Std = base64.RawStdEncoding
	base64URL = base64.RawURLEncoding
)

// pageOverhead is what a page's envelope takes beyond its entries and its cursor.
const pageOverhead = 64

// pager collects the entries of one page within a count and a byte budget.
type pager struct {
	limit, budget int
	windowed      bool
	page          Page
	size          int
	more          bool
}

func (s *Server) newPager(limit int, windowed bool) *pager {
	return &pager{limit: limit, budget: max(s.cfg.MaxResponseBytes-pageOverhead, 1), windowed: windowed, page: Page{Entries: []Entry{}}}
}

// add adds e unless the page is full, which it then marks as having more.
func (p *pager) add(e Entry) bool {
	if p.limit > 0 && len(p.page.Entries) >= p.limit {
		p.more = true
		return false
	}
	b, _ := json.Marshal(e)
	cursor := base64.RawURLEncoding.EncodedLen(len(e.RawKey)+16) + 16 // if e is the last
	if len(p.page.Entries) > 0 && p.size+len(b)+1+cursor > p.budget {
		p.more = true
		return false
	}
	p.size += len(b) + 1
	p.page.Entries = append(p.page.Entries, e)
	return true
}

// finish returns the page, with a cursor after its last entry if it has more.
func (p *pager) finish() Page {
	if p.more && len(p.page.Entries) > 0 {
		p.page.Cursor = encodeCursor(posOf(p.page.Entries[len(p.page.Entries)-1]), p.windowed)
	}
	return p.page
}

// scanKind is what a key-value scan endpoint reads.
type scanKind int

const (
	scanRange scanKind = iota
	scanPrefix
	scanAll
)

// scanQuery is a key-value scan: keys in [from, to) (nil unbounded), in descending order
// if reverse, at most limit (0: no limit), after cursor.
type scanQuery struct {
	from, to []byte
	reverse  bool
	limit    int
	cursor   *entryPos
}

// parseLimit reads the limit parameter (0 when absent).
func parseLimit(r *http.Request) (int, error) {
	l := r.URL.Query().Get("limit")
	if l == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 0 {
		return 0, badRequest("parameter limit=%q is not a non-negative integer", l)
	}
	return n, nil
}

func parseBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("parameter %s=%q is not a boolean", name, v)
	}
	return b, nil
}

// scan serves /range, /prefix and /all: a scan of every partition, each instance reading
// its own, merged here in key order.
func (s *Server) scan(kind scanKind) handlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		rq, err := s.parse(r, kstream.KeyValueKind)
		if err != nil {
			return err
		}
		var sq scanQuery
		switch kind {
		case scanRange:
			if sq.from, err = parseKey(r, rq.rs, "from", false); err != nil {
				return err
			}
			to, err := parseKey(r, rq.rs, "to", false)
			if err != nil {
				return err
			}
			if to != nil {
				sq.to = next(to) // inclusive, as Kafka Streams' range
			}
		case scanPrefix:
			q := r.URL.Query()
			prefix := []byte(q.Get("prefix"))
			if b := q.Get("prefix_b64"); b != "" {
				if prefix, err = decodeB64(b); err != nil {
					return badRequest("parameter prefix_b64: %v", err)
				}
			}
			if len(prefix) > 0 {
				sq.from, sq.to = prefix, successor(prefix)
			}
		}
		if sq.reverse, err = parseBool(r, "reverse"); err != nil {
			return err
		}
		if sq.limit, err = parseLimit(r); err != nil {
			return err
		}
		if sq.cursor, err = decodeCursor(r.URL.Query().Get("cursor"), false); err != nil {
			return err
		}
		pages, hosts, err := fanOut(s, ctx, r, rq, func(rs *kstream.RawStore) (Page, error) {
			return s.localScan(ctx, rs, sq, rq.raw)
		})
		if err != nil {
			return err
		}
		out := pages[0]
		if !forwarded(r) {
			cmp := comparePos
			if sq.reverse {
				cmp = func(a, b entryPos) int { return comparePos(b, a) }
			}
			out = s.merge(pages, sq.limit, false, cmp)
		}
		servedBy(w, hopsOf(r, hosts, rq.host), hosts...)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// localScan scans the partitions of rs.
func (s *Server) localScan(ctx context.Context, rs *kstream.RawStore, sq scanQuery, raw bool) (Page, error) {
	from, to := sq.from, sq.to
	if c := sq.cursor; c != nil {
		if !sq.reverse {
			if n := next(c.key); from == nil || bytes.Compare(n, from) > 0 {
				from = n
			}
		} else if to == nil || bytes.Compare(c.key, to) < 0 {
			to = c.key
		}
	}
	p := s.newPager(sq.limit, false)
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return p.finish(), nil
	}
	var ierr error
	err := rs.Scan(from, to, sq.reverse, func(e kstream.RawEntry) bool {
		if ierr = ctx.Err(); ierr != nil {
			return false
		}
		var en Entry
		if en, ierr = entryOf(rs, e.Key, e.RawValue, raw, true); ierr != nil {
			return false
		}
		return p.add(en)
	})
	if err = errors.Join(err, ierr); err != nil {
		return Page{}, err
	}
	return p.finish(), nil
}

// merge merges the pages of several instances, each in the order of cmp, into one of at
// most limit entries within the byte budget. A page that has more (a cursor) bounds the
// merge: past its last entry, its next ones are unknown.
func (s *Server) merge(pages []Page, limit int, windowed bool, cmp func(a, b entryPos) int) Page {
	heads := make([]int, len(pages))
	p := s.newPager(limit, windowed)
	for {
		best, blocked := -1, false
		for i, pg := range pages {
			if heads[i] >= len(pg.Entries) {
				blocked = blocked || pg.Cursor != ""
				continue
			}
			if best < 0 || cmp(posOf(pg.Entries[heads[i]]), posOf(pages[best].Entries[heads[best]])) < 0 {
				best = i
			}
		}
		if blocked {
			p.more = true
			break
		}
		if best < 0 {
			break
		}
		if !p.add(pages[best].Entries[heads[best]]) {
			break
		}
		heads[best]++
	}
	if p.more {
		// More only if some entry is left or some instance has more.
		left := false
		for i, pg := range pages {
			left = left || heads[i] < len(pg.Entries) || pg.Cursor != ""
		}
		p.more = left
	}
	out := p.finish()
	for i := range out.Entries {
		out.Entries[i].RawKey = nil
	}
	return out
}

func (s *Server) count(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r)
	if err != nil {
		return err
	}
	counts, hosts, err := fanOut(s, ctx, r, rq, func(rs *kstream.RawStore) (CountResponse, error) {
		n, err := rs.ApproximateCount()
		return CountResponse{Count: n}, err
	})
	if err != nil {
		return err
	}
	var total CountResponse
	for _, c := range counts {
		total.Count += c.Count
	}
	servedBy(w, hopsOf(r, hosts, rq.host), hosts...)
	writeJSON(w, http.StatusOK, total)
	return nil
}

// timeRange reads the from and to parameters of window queries.
func timeRange(r *http.Request) (from, to time.Time, err error) {
	q := r.URL.Query()
	if from, err = parseTime("from", q.Get("from"), minTime); err != nil {
		return
	}
	to, err = parseTime("to", q.Get("to"), maxTime)
	return
}

// windows serves the windows of one key that start in [from, to], by start time.
func (s *Server) windows(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r, kstream.WindowKind)
	if err != nil {
		return err
	}
	kb, err := parseKey(r, rq.rs, "key", true)
	if err != nil {
		return err
	}
	from, to, err := timeRange(r)
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	cursor, err := decodeCursor(r.URL.Query().Get("cursor"), true)
	if err != nil {
		return err
	}
	return s.routeKey(ctx, w, r, rq, kb, func(rs *kstream.RawStore) (any, error) {
		p := s.newPager(limit, true)
		var ierr error
		err := rs.WindowFetch(kb, from, to, func(e kstream.RawWindowEntry) bool {
			return s.addWindow(ctx, p, rs, e, rq.raw, cursor, comparePos, &ierr)
		})
		if err = errors.Join(err, ierr); err != nil {
			return nil, err
		}
		return s.stripped(p.finish()), nil
	})
}

// addWindow adds a window to p unless it is at or before cursor in the order of cmp; it
// returns whether to go on.
func (s *Server) addWindow(ctx context.Context, p *pager, rs *kstream.RawStore, e kstream.RawWindowEntry, raw bool, cursor *entryPos, cmp func(a, b entryPos) int, ierr *error) bool {
	if *ierr = ctx.Err(); *ierr != nil {
		return false
	}
	en, err := windowEntryOf(rs, e, raw, true)
	if err != nil {
		*ierr = err
		return false
	}
	if cursor != nil && cmp(posOf(en), *cursor) <= 0 {
		return true
	}
	return p.add(en)
}

// stripped drops the serialized keys of a page's entries.
func (s *Server) stripped(p Page) Page {
	for i := range p.Entries {
		p.Entries[i].RawKey = nil
	}
	return p
}

// sessionOrder orders sessions as a session store returns one key's: by end, then start.
func sessionOrder(a, b entryPos) int {
	if c := a.end - b.end; c != 0 {
		if c < 0 {
			return -1
		}
		return 1
	}
	if a.start != b.start {
		if a.start < b.start {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.key, b.key)
}

// sessions serves the sessions of one key, by end then start time.
func (s *Server) sessions(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r, kstream.SessionKind)
	if err != nil {
		return err
	}
	kb, err := parseKey(r, rq.rs, "key", true)
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	cursor, err := decodeCursor(r.URL.Query().Get("cursor"), true)
	if err != nil {
		return err
	}
	return s.routeKey(ctx, w, r, rq, kb, func(rs *kstream.RawStore) (any, error) {
		p := s.newPager(limit, true)
		var ierr error
		err := rs.SessionFetch(kb, func(e kstream.RawWindowEntry) bool {
			return s.addWindow(ctx, p, rs, e, rq.raw, cursor, sessionOrder, &ierr)
		})
		if err = errors.Join(err, ierr); err != nil {
			return nil, err
		}
		return s.stripped(p.finish()), nil
	})
}

// windowsAll serves every window that starts in [from, to], of every key, merged by key
// then window from every instance. Each instance sorts its windows in memory.
func (s *Server) windowsAll(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r, kstream.WindowKind)
	if err != nil {
		return err
	}
	from, to, err := timeRange(r)
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	cursor, err := decodeCursor(r.URL.Query().Get("cursor"), true)
	if err != nil {
		return err
	}
	pages, hosts, err := fanOut(s, ctx, r, rq, func(rs *kstream.RawStore) (Page, error) {
		var all []Entry
		var ierr error
		err := rs.WindowFetchAll(from, to, func(e kstream.RawWindowEntry) bool {
			if ierr = ctx.Err(); ierr != nil {
				return false
			}
			var en Entry
			if en, ierr = windowEntryOf(rs, e, rq.raw, true); ierr != nil {
				return false
			}
			if cursor == nil || comparePos(posOf(en), *cursor) > 0 {
				all = append(all, en)
			}
			return true
		})
		if err = errors.Join(err, ierr); err != nil {
			return Page{}, err
		}
		slices.SortFunc(all, func(a, b Entry) int { return comparePos(posOf(a), posOf(b)) })
		p := s.newPager(limit, true)
		for _, e := range all {
			if !p.add(e) {
				break
			}
		}
		return p.finish(), nil
	})
	if err != nil {
		return err
	}
	out := pages[0]
	if !forwarded(r) {
		out = s.merge(pages, limit, true, comparePos)
	}
	servedBy(w, hopsOf(r, hosts, rq.host), hosts...)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batch serves a multi-get: the keys are grouped by the instance running their
// partitions, read here for this instance's, and asked of each other instance in one
// forwarded request.
func (s *Server) batch(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	rq, err := s.parse(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return badRequest("reading the body: %v", err)
	}
	var req BatchRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("the body is not {\"keys\": [...]}: %v", err)
	}
	if len(req.Keys) > maxBatchKeys {
		return badRequest("%d keys: at most %d per request", len(req.Keys), maxBatchKeys)
	}
	kbs := make([][]byte, len(req.Keys))
	for i, k := range req.Keys {
		if kbs[i], err = keyFromJSON(rq.rs, k, false); err != nil {
			return err
		}
	}
	self := rq.host
	results := make([]BatchResult, len(kbs))
	readLocal := func(idx []int) error {
		for _, i := range idx {
			v, ok, err := rq.rs.Get(kbs[i])
			if err != nil {
				return err
			}
			if !ok {
				k, err := render(kbs[i], rq.raw, rq.rs.KeyToJSON)
				if err != nil {
					return err
				}
				results[i] = BatchResult{Entry: Entry{Key: k, Value: json.RawMessage("null"), Timestamp: -1, Partition: -1, Position: -1}, ServedBy: self}
				continue
			}
			e, err := entryOf(rq.rs, kbs[i], v, rq.raw, false)
			if err != nil {
				return err
			}
			results[i] = BatchResult{Entry: e, Found: true, ServedBy: self}
		}
		return nil
	}
	all := make([]int, len(kbs))
	for i := range all {
		all[i] = i
	}
	if forwarded(r) {
		if err := readLocal(all); err != nil {
			return err
		}
		servedBy(w, 0, self)
		writeJSON(w, http.StatusOK, BatchResponse{Results: results})
		return nil
	}
	me := rq.me.MemberID
	var local []int
	remote := map[string][]int{}
	var hosts []string
	for i, kb := range kbs {
		km, err := s.keyMetadata(rq.name, kb)
		if err != nil {
			return err
		}
		switch {
		case km.ActiveMember != "" && km.ActiveMember == me:
			local = append(local, i)
		case km.ActiveMember == "":
			return errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d has no active instance now (rebalancing)", rq.name, km.Partition)
		case km.Active == "":
			return errorf(http.StatusServiceUnavailable, ReasonNotHosted, "store %q partition %d: its instance %s has no ApplicationServer", rq.name, km.Partition, km.ActiveMember)
		default:
			if _, ok := remote[km.Active]; !ok {
				hosts = append(hosts, km.Active)
			}
			remote[km.Active] = append(remote[km.Active], i)
		}
	}
	errs := make([]error, len(hosts)+1)
	done := make(chan int, len(hosts))
	for h, host := range hosts {
		go func() {
			defer func() { done <- h }()
			idx := remote[host]
			sub := BatchRequest{Keys: make([]json.RawMessage, len(idx))}
			for j, i := range idx {
				sub.Keys[j] = req.Keys[i]
			}
			b, err := json.Marshal(sub)
			if err != nil {
				errs[h] = err
				return
			}
			var resp BatchResponse
			if errs[h] = s.callPeer(ctx, r, rq, http.MethodPost, host, r.URL.Path, r.URL.RawQuery, b, &resp); errs[h] != nil {
				return
			}
			if len(resp.Results) != len(idx) {
				errs[h] = errorf(http.StatusBadGateway, ReasonInternal, "%s answered %d results for %d keys", host, len(resp.Results), len(idx))
				return
			}
			for j, i := range idx {
				results[i] = resp.Results[j]
			}
		}()
	}
	errs[len(hosts)] = readLocal(local)
	for range hosts {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	hops := 0
	if len(hosts) > 0 {
		hops = 1
	}
	if len(local) > 0 {
		hosts = append([]string{self}, hosts...)
	}
	servedBy(w, hops, hosts...)
	writeJSON(w, http.StatusOK, BatchResponse{Results: results})
	return nil
}

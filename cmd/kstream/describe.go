package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

const describeUsage = `Usage: kstream describe -url http://host:port/<ops prefix> [-json]

Prints the topology and the live assignment of a running kstream application: it fetches
GET <url>/api/describe from the application's ops handler and prints the topology (as
Topology.Describe writes it, Kafka Streams' TopologyDescription) and, for every instance
of the application (from the group's assignment, not only the instance asked), its
endpoint and its active and standby tasks and stores. -json prints the answer as it came.

Flags:
`

// describeAnswer is the part of the ops handler's /api/describe answer that kstream
// describe prints. Unknown fields are ignored, and the instance fields accept the names
// of several versions (see describeInstance).
type describeAnswer struct {
	ApplicationID string             `json:"application_id"`
	State         string             `json:"state"`
	Topology      describeTopology   `json:"topology"`
	Instances     []describeInstance `json:"instances"`
}

// describeTopology is the topology's text: the answer's topology.text, or topology itself
// when it is a string.
type describeTopology struct{ Text string }

// UnmarshalJSON reads {"text": "..."} or "...".
func (d *describeTopology) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &d.Text) == nil {
		return nil
	}
	var o struct {
		Text        string `json:"text"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	d.Text = cmp.Or(o.Text, o.Description)
	return nil
}

// describeInstance is one instance of the application.
type describeInstance struct {
	Endpoint string
	Member   string
	Active   []string
	Standby  []string
	Stores   []string
}

// UnmarshalJSON reads an instance, whose tasks are under "active_tasks" (or "active"),
// "standby_tasks" (or "standby", "standbys"), as ids ("0_1") or objects with an "id".
func (d *describeInstance) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			var s string
			if json.Unmarshal(m[k], &s) == nil && s != "" {
				return s
			}
		}
		return ""
	}
	list := func(keys ...string) []string {
		for _, k := range keys {
			raw, ok := m[k]
			if !ok {
				continue
			}
			var ss []string
			if json.Unmarshal(raw, &ss) == nil {
				return ss
			}
			var objs []map[string]any
			if json.Unmarshal(raw, &objs) == nil {
				out := make([]string, 0, len(objs))
				for _, o := range objs {
					for _, f := range []string{"id", "task", "name", "store"} {
						if v, ok := o[f]; ok {
							out = append(out, fmt.Sprint(v))
							break
						}
					}
				}
				return out
			}
		}
		return nil
	}
	d.Endpoint = str("endpoint", "host", "application_server")
	d.Member = str("member_id", "member", "client_id")
	d.Active = list("active_tasks", "active", "tasks")
	d.Standby = list("standby_tasks", "standby", "standbys")
	d.Stores = list("stores", "store_names")
	return nil
}

// runDescribe implements "kstream describe".
func runDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("describe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "`URL` of the application's ops handler (the prefix it is mounted at)")
	asJSON := fs.Bool("json", false, "print the answer's JSON as it came")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the request")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), describeUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stderr); help || err != nil {
		return err
	}
	if *url == "" {
		return usageError(fs, "-url is required")
	}
	body, err := fetchDescribe(ctx, strings.TrimRight(*url, "/")+"/api/describe", *timeout)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	var a describeAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("describe: decoding the answer of %s: %w", *url, err)
	}
	printDescribe(stdout, &a)
	return nil
}

// fetchDescribe GETs url and returns the body of a 200 answer.
func fetchDescribe(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body[:min(len(body), 512)])))
	}
	return body, nil
}

// printDescribe writes a as text: a header, the topology, a table of instances.
func printDescribe(w io.Writer, a *describeAnswer) {
	fmt.Fprintf(w, "Application %s: %s\n\n", cmp.Or(a.ApplicationID, "?"), cmp.Or(a.State, "?"))
	if t := strings.TrimRight(a.Topology.Text, "\n"); t != "" {
		fmt.Fprintln(w, t)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Instances (%d):\n", len(a.Instances))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tACTIVE TASKS\tSTANDBY TASKS\tSTORES")
	join := func(ss []string) string {
		if len(ss) == 0 {
			return "-"
		}
		return strings.Join(ss, ",")
	}
	for _, in := range a.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cmp.Or(in.Endpoint, in.Member, "-"), join(in.Active), join(in.Standby), join(in.Stores))
	}
	tw.Flush()
}

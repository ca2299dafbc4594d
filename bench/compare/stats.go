package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// run is the measurement of one contestant's run of a scenario.
type run struct {
	round      int
	contestant string
	wall       float64       // seconds from the process's start to its RESULT line
	running    float64       // seconds from the process's start to its first RUNNING state (<0: none)
	cpu        float64       // user + system seconds of the process (rusage)
	rssKiB     int64         // peak resident set (VmHWM)
	out        int64         // output records (verified), -1 if not read
	err        error         // the run failed or its output was wrong
	lat        *latencyStats // a latency scenario's latencies (nil otherwise)
}

// runningOrNaN is r.running, NaN when the contestant has no RUNNING state (raw).
func (r run) runningOrNaN() float64 {
	if r.running < 0 {
		return math.NaN()
	}
	return r.running
}

// recordsPerSec is the input records over the wall time.
func (r run) recordsPerSec(records int) float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(records) / r.wall
}

// median is the median of the numbers of xs (the mean of the middle two for an even
// count; NaNs are left out), NaN if there is none.
func median(xs []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// metric is one measured figure of a run.
type metric struct {
	name string
	of   func(run) float64
}

// okRuns are the successful runs of contestant.
func okRuns(runs []run, contestant string) []run {
	var out []run
	for _, r := range runs {
		if r.contestant == contestant && r.err == nil {
			out = append(out, r)
		}
	}
	return out
}

// runsOf is the number of runs of contestant, failed ones included.
func runsOf(runs []run, contestant string) int {
	n := 0
	for _, r := range runs {
		if r.contestant == contestant {
			n++
		}
	}
	return n
}

// medianOf is the median of m over the successful runs of contestant.
func medianOf(runs []run, contestant string, m metric) float64 {
	var xs []float64
	for _, r := range okRuns(runs, contestant) {
		xs = append(xs, m.of(r))
	}
	return median(xs)
}

// pairedRatio is the median over the rounds in which both a and b succeeded of m(a)/m(b).
func pairedRatio(runs []run, a, b string, m metric) float64 {
	byRound := map[int]map[string]run{}
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]run{}
		}
		byRound[r.round][r.contestant] = r
	}
	var xs []float64
	for _, rs := range byRound {
		ra, oka := rs[a]
		rb, okb := rs[b]
		if oka && okb && m.of(rb) != 0 {
			xs = append(xs, m.of(ra)/m.of(rb))
		}
	}
	return median(xs)
}

// printTable writes the table of one scenario: per contestant the median records/s, wall
// time, CPU seconds, CPU per record, peak RSS and output records of its successful runs;
// then, for kstream (and kstream-memlimit) against each other contestant, the ratio of the
// medians and the median of the per-round ratios of records/s, CPU seconds and peak RSS.
func printTable(w io.Writer, title string, records int, contestants []string, runs []run) {
	fmt.Fprintf(w, "\n%s\n", title)
	rps := metric{"records/s", func(r run) float64 { return r.recordsPerSec(records) }}
	wall := metric{"wall s", func(r run) float64 { return r.wall }}
	running := metric{"s to RUNNING", run.runningOrNaN}
	cpu := metric{"CPU s", func(r run) float64 { return r.cpu }}
	rss := metric{"peak RSS", func(r run) float64 { return float64(r.rssKiB) / 1024 }}
	outs := metric{"out", func(r run) float64 { return float64(r.out) }}

	tw := newTable(w)
	fmt.Fprintln(tw, "contestant\truns ok\tmedian records/s\tmedian wall s\tmedian s to RUNNING\tmedian CPU s\tCPU µs/record\tmedian peak RSS MiB\tmedian output records\t")
	for _, c := range contestants {
		n, ok := runsOf(runs, c), len(okRuns(runs, c))
		c64 := medianOf(runs, c, cpu)
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, ok, n,
			group(medianOf(runs, c, rps)), fixed(medianOf(runs, c, wall), 2), fixed(medianOf(runs, c, running), 2), fixed(c64, 2),
			fixed(c64/float64(records)*1e6, 2), fixed(medianOf(runs, c, rss), 0), group(medianOf(runs, c, outs)))
	}
	tw.Flush()

	printRatios(w, contestants, runs, []metric{rps, cpu, rss})
}

// newTable is the right-aligned tab writer of the tables.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// printRatios writes, for kstream (and kstream-memlimit) against each other contestant, the
// ratio of the medians and the median of the per-round ratios of each of ms.
func printRatios(w io.Writer, contestants []string, runs []run, ms []metric) {
	for _, k := range []string{"kstream", "kstream-memlimit"} {
		if !slices.Contains(contestants, k) {
			continue
		}
		for _, other := range contestants {
			if other == k || other == "kstream-memlimit" && k == "kstream" {
				continue
			}
			var parts []string
			for _, m := range ms {
				parts = append(parts, fmt.Sprintf("%s %sx (per round %sx)", m.name,
					fixed(medianOf(runs, k, m)/medianOf(runs, other, m), 2), fixed(pairedRatio(runs, k, other, m), 2)))
			}
			fmt.Fprintf(w, "%s/%s: %s\n", k, other, strings.Join(parts, ", "))
		}
	}
}

// fixed formats x with prec decimals, "-" for NaN or infinity.
func fixed(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// group formats x rounded to an integer with thousands separators, "-" for NaN.
func group(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	s := fmt.Sprintf("%d", int64(math.Round(x)))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

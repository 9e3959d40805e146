package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// Figure is one measured ratio: Value over Baseline, both in Unit, against a Goal.
type Figure struct {
	// Key is a short stable name for tools (benchstat metrics, JSON consumers).
	Key string `json:"key"`
	// Name says what is divided by what, for people.
	Name     string  `json:"name"`
	Unit     string  `json:"unit"`
	Value    float64 `json:"value"`
	Baseline float64 `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	Goal     Goal    `json:"goal"`
	Met      bool    `json:"met"`
	// CPURatio, for throughput figures, compares CPU time per request (this process and
	// Postgres, or pgbench and Postgres) the way Ratio compares rates: baseline's over
	// value's. It barely moves with other load on the machine, which rates do not.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
	// Details are further numbers of the same measurement (samples, per-round rates...).
	Details map[string]any `json:"details,omitempty"`
}

// Goal bounds a ratio from below (AtLeast) or above (AtMost). The zero Goal is none: the
// figure is reported, and met by any ratio.
type Goal struct {
	Op    string  `json:"op,omitempty"` // ">=", "<=", or "" for none
	Ratio float64 `json:"ratio,omitempty"`
}

// AtLeast is the goal ratio >= r.
func AtLeast(r float64) Goal { return Goal{Op: ">=", Ratio: r} }

// AtMost is the goal ratio <= r.
func AtMost(r float64) Goal { return Goal{Op: "<=", Ratio: r} }

// Met reports whether ratio meets the goal.
func (g Goal) Met(ratio float64) bool {
	switch g.Op {
	case "":
		return true
	case "<=":
		return ratio <= g.Ratio
	}
	return ratio >= g.Ratio
}

func (g Goal) String() string {
	if g.Op == "" {
		return "-"
	}
	return fmt.Sprintf("%s %g", g.Op, g.Ratio)
}

// newFigure computes the ratio and whether it meets the goal. A detail that could not be
// measured (NaN or infinite: a percentile of a short round in which nothing of its kind
// completed) becomes nil, JSON's null, so that it cannot make the report unwritable; the
// figure's own value and baseline are checked by the harness's test instead.
func newFigure(key, name, unit string, value, baseline float64, goal Goal, details map[string]any) Figure {
	for k, v := range details {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			details[k] = nil
		}
	}
	ratio := value / baseline
	return Figure{Key: key, Name: name, Unit: unit, Value: value, Baseline: baseline,
		Ratio: ratio, Goal: goal, Met: goal.Met(ratio), Details: details}
}

// writeTable prints the report as an aligned table with a header line about the machine.
func writeTable(w io.Writer, rep Report) error {
	fmt.Fprintf(w, "terdut-server bench, %s, %s, GOMAXPROCS=%d (%d CPUs), PostgreSQL %s, %d rounds of %s a side (API keys: %d rounds)\n",
		rep.Date.Format("2006-01-02 15:04 MST"), rep.GoVersion, rep.GOMAXPROCS, rep.NumCPU, rep.Postgres,
		rep.Rounds, rep.Round, rep.KeyRounds)
	if rep.LoadStart > 0 || rep.LoadEnd > 0 {
		fmt.Fprintf(w, "1-minute load average %.1f at the start, %.1f at the end", rep.LoadStart, rep.LoadEnd)
		if max(rep.LoadStart, rep.LoadEnd) > float64(rep.NumCPU) {
			fmt.Fprintf(w, ": more than %d CPUs' worth, so other work shared the machine and the ratios are noisy", rep.NumCPU)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure (value / baseline)\tvalue\tbaseline\tratio\tgoal\tmet\tcpu ratio\t")
	for _, f := range rep.Figures {
		met := "no"
		switch {
		case f.Goal.Op == "":
			met = "-"
		case f.Met:
			met = "yes"
		}
		cpu := "-"
		if f.CPURatio > 0 {
			cpu = fmt.Sprintf("%.3f", f.CPURatio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t\n", f.Name, formatValue(f.Value, f.Unit),
			formatValue(f.Baseline, f.Unit), f.Ratio, f.Goal, met, cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\ncpu ratio: CPU time per request, baseline's over value's: a cross-check of the ratio that other\n"+
		"load on the machine barely moves. It counts the process that serves and Postgres (gate figures: the\n"+
		"bench's own process, clients included; pgbench rows: pgbench, Postgres, and wrk on the server's side).")
	return err
}

func formatValue(v float64, unit string) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// writeJSON writes rep to path, creating its directory.
func writeJSON(path string, rep Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

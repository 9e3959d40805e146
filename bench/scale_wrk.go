package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The scale side's rates, measured with wrk from a Lua script that draws each request at random
// from a set: the people's (scale.go) and the incident half's (scale_incidents.go).

// scaleRequest is one request wrk may send: it picks one at random for each.
type scaleRequest struct {
	method, path, bearer, body string
}

// scaleServed is a side of the scale side: a database and the server process over it.
type scaleServed interface{ server() *process }

// scaleEndpoint is one rate of the scale side measured with wrk: its figure's key and name, wrk's
// connections, and the requests wrk draws from on a side S.
type scaleEndpoint[S scaleServed] struct {
	key, name string
	clients   int
	requests  func(s S) []scaleRequest
}

// scaleRates measures each endpoint on both sides (small, then large) with wrk: a warm-up round
// a side, then as many alternating rounds as the API-key figures' (their goals too are within
// 10%). Each figure is the large side's median rate over the small side's.
func scaleRates[S scaleServed](e *env, tb testing.TB, ctx context.Context, endpoints []scaleEndpoint[S], sides [2]S, sizes string,
	details func(map[string]any) map[string]any) ([]Figure, error) {
	tb.Helper()
	var figures []Figure
	for _, ep := range endpoints {
		e.cfg.progressf("scale: %s", ep.name)
		var scripts [2]string
		for i, s := range sides {
			path, err := writeScaleScript(tb, ep.requests(s))
			if err != nil {
				return nil, err
			}
			scripts[i] = path
		}
		rates := [2]*side{{}, {}}
		run := func(i int, into *side) func() error {
			return func() error {
				r, err := e.wrkScript(ctx, sides[i].server(), scripts[i], ep.clients)
				if err == nil && into != nil {
					into.add(r)
				}
				return err
			}
		}
		if err := e.warmUp(run(0, nil), run(1, nil)); err != nil {
			return nil, fmt.Errorf("scale: %s: %w", ep.name, err)
		}
		if err := alternate(e.cfg.KeyRounds, run(0, rates[0]), run(1, rates[1])); err != nil {
			return nil, fmt.Errorf("scale: %s: %w", ep.name, err)
		}
		figures = append(figures, newFigure(ep.key, ep.name+", "+sizes, "/s", median(rates[1].rates),
			median(rates[0].rates), scaleRateGoal, details(map[string]any{"rounds_small": rates[0].rates,
				"rounds_large": rates[1].rates, "wrk": fmt.Sprintf("-t 2 -c %d, %d-second rounds", ep.clients, e.roundSeconds())})))
	}
	return figures, nil
}

// writeScaleScript writes wrk's Lua script that sends reqs, one drawn at random per request.
func writeScaleScript(tb testing.TB, reqs []scaleRequest) (string, error) {
	var b strings.Builder
	b.WriteString("local reqs = {}\nfunction init(args)\n  math.randomseed(os.time() * 1000 + math.floor(os.clock() * 1000))\n")
	for i, r := range reqs {
		headers := `{["Content-Type"] = "application/json"`
		if r.bearer != "" {
			headers += `, ["Authorization"] = ` + strconv.Quote("Bearer "+r.bearer)
		}
		headers += "}"
		body := "nil"
		if r.body != "" {
			body = strconv.Quote(r.body)
		}
		fmt.Fprintf(&b, "  reqs[%d] = wrk.format(%q, %q, %s, %s)\n", i+1, r.method, r.path, headers, body)
	}
	b.WriteString("end\nfunction request()\n  return reqs[math.random(#reqs)]\nend\n")
	path := filepath.Join(tb.TempDir(), "scale.lua")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// wrkScript runs wrk with a script against p for one round and returns its rate.
func (e *env) wrkScript(ctx context.Context, p *process, script string, clients int) (result, error) {
	d := time.Duration(e.roundSeconds()) * time.Second
	out, _, err := e.runWrk(ctx, p.URL+"/", clients, d, "-s", script)
	if err != nil {
		return result{}, err
	}
	r, err := parseWrk(out)
	if err != nil {
		return result{}, fmt.Errorf("wrk against %s: %w\n%s", p.name, err, out)
	}
	return r, nil
}

package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/agentgate/agentgate/internal/runs"
)

// The files under deploy/ that query these metrics. They are read from the
// repository, so that neither they nor the collectors can change without
// the other.
var (
	dashboardFile  = filepath.Join("..", "..", "deploy", "grafana", "agentgate.json")
	alertsFile     = filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml")
	alertTestsFile = filepath.Join("..", "..", "deploy", "prometheus", "alerts_test.yml")
)

// exported is what the gateway's registry serves: each metric family by
// name, with its type and label names.
type exported map[string]family

type family struct {
	typ    dto.MetricType
	labels []string
}

// capture records the collectors registered through it, so that the test
// can count what New describes.
type capture struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (c *capture) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return c.Registerer.Register(col)
}

// gatewayMetrics builds the registry as cmd/gateway does, gives every
// collector of New a series, and returns what it exports. It fails when New
// describes a metric that it did not get a series of: a new metric must be
// exercised here, or the files could name it unchecked.
func gatewayMetrics(t *testing.T) exported {
	t.Helper()
	reg := NewRegistry()
	c := &capture{Registerer: reg}
	r, err := New(c, Options{Agents: testAgents})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cost := 0.25
	negative := -1.0
	r.RunQueued("claude")
	r.RunStarted("claude", 0.5)
	r.FirstEvent("claude", 1)
	r.Event("claude", runs.EventTypes[0])
	r.QueueDepth(2, 1)
	r.RunFinished("claude", "sonnet", runs.Failed, runs.StoreFailed, 3,
		runs.Usage{InputTokens: 10, OutputTokens: 5}, &cost)
	// A negative cost is counted as inconsistent usage.
	r.RunFinished("claude", "sonnet", runs.Succeeded, "", 3, runs.Usage{}, &negative)
	r.ApprovalRequested("claude")
	r.ApprovalResolved("claude", runs.Allow, runs.ResolvedByClient, 2)
	r.TurnStarted("claude")
	r.TurnFinished("claude", runs.Succeeded, 4)
	r.WorkspacePrepared(runs.SourceGit, 1.5, true)
	r.SnapshotKept(runs.SnapshotWorkspace, 1024)
	r.SnapshotRestored(runs.SnapshotSession)
	r.NetworkDenied("claude", "acme")
	r.RunHibernated("claude")
	r.RunWoken("claude")
	r.WokenFirstEvent("claude", 2)
	r.ObserveActivities(func() map[runs.Activity]int { return map[runs.Activity]int{runs.Idle: 1, runs.Hibernated: 2} })
	r.ScheduleFire("started", 2*time.Second)
	r.TriggerDelivery("duplicate")
	r.HTTPRequest("/v1/runs", "POST", 201, 0.01)
	r.SSEClientsAdd(1)
	r.SetAgents([]runs.AgentInfo{{Name: "claude", Version: "2.1.3", Compatibility: runs.CompatVerified}})
	r.ObserveFanout(fixedFanout{Feeds: 1, RingReaders: 1})
	r.ObservePacks(fixedPacks{Sent: 1, Read: 1})

	descs := make(chan *prometheus.Desc, 256)
	for _, col := range c.collectors {
		col.Describe(descs)
	}
	close(descs)
	described := len(descs)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := exported{}
	own := 0
	for _, mf := range mfs {
		f := family{typ: mf.GetType()}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(f.labels, lp.GetName()) {
					f.labels = append(f.labels, lp.GetName())
				}
			}
		}
		out[mf.GetName()] = f
		if strings.HasPrefix(mf.GetName(), namespace+"_") {
			own++
		}
	}
	if own != described {
		t.Fatalf("New describes %d metrics but %d have a series: give every new metric a series in gatewayMetrics", described, own)
	}
	return out
}

// lookup returns the family a sample name belongs to: the name itself, or a
// histogram's or summary's _bucket, _sum or _count. Prometheus adds up for
// each target, with job and instance, which every series also gets.
func (e exported) lookup(name string) (family, bool) {
	if name == "up" {
		return family{typ: dto.MetricType_GAUGE}, true
	}
	if f, ok := e[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := e[base]
		if !ok {
			continue
		}
		switch {
		case f.typ == dto.MetricType_HISTOGRAM && suffix == "_bucket":
			return family{typ: f.typ, labels: append(slices.Clone(f.labels), "le")}, true
		case f.typ == dto.MetricType_HISTOGRAM, f.typ == dto.MetricType_SUMMARY && suffix != "_bucket":
			return f, true
		}
	}
	return family{}, false
}

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// selector is one `name{label op "value", ...}` of an expression.
type selector struct {
	metric string
	// equal holds the values of the label = "value" matchers; matched
	// lists every label a matcher names.
	equal   map[string][]string
	matched []string
}

// refs is what an expression refers to.
type refs struct {
	selectors []selector
	grouping  []string // labels of by, without, on, ignoring, group_left, group_right
}

type token struct {
	kind byte // 'i' identifier, 's' string, 'n' number, 'o' operator or punctuation
	text string
}

// scanPromQL splits a PromQL expression into tokens. Grafana's variables
// ($agent, ${datasource}, $__rate_interval) and the contents of [...]
// (ranges and subquery steps) are dropped: they name no metric or label.
func scanPromQL(expr string) ([]token, error) {
	var toks []token
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d", i)
				}
				i += end + 1
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i += end + 1
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			var b strings.Builder
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
				}
				b.WriteByte(expr[j])
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unclosed string at %d", i)
			}
			toks = append(toks, token{'s', b.String()})
			i = j + 1
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			toks = append(toks, token{'i', expr[i:j]})
			i = j
		case '0' <= c && c <= '9' || c == '.':
			j := i
			for j < len(expr) && (isIdent(expr[j], false) || expr[j] == '.') {
				j++
			}
			toks = append(toks, token{'n', expr[i:j]})
			i = j
		default:
			if i+1 < len(expr) {
				if two := expr[i : i+2]; slices.Contains([]string{"=~", "!~", "!=", "==", ">=", "<="}, two) {
					toks = append(toks, token{'o', two})
					i += 2
					continue
				}
			}
			toks = append(toks, token{'o', string(c)})
			i++
		}
	}
	return toks, nil
}

var (
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
	groupingKeys = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	// Aggregations may take their grouping before the parenthesis:
	// sum by (job) (...).
	aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
		"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// parsePromQL finds the selectors and grouping labels of expr. It is not a
// full parser: it knows enough of PromQL's shape (a name before "(" is a
// function, before "{" or alone a metric) for the expressions of these
// files, and fails on what it does not follow.
func parsePromQL(expr string) (refs, error) {
	toks, err := scanPromQL(expr)
	if err != nil {
		return refs{}, err
	}
	var out refs
	next := func(i int) token {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return token{}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == 'o' && t.text == "{":
			return refs{}, fmt.Errorf("a selector without a metric name in %q", expr)
		case t.kind != 'i':
		case slices.Contains(groupingKeys, t.text):
			if next(i).text != "(" {
				continue
			}
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == 'i' {
					out.grouping = append(out.grouping, toks[i].text)
				}
			}
		case next(i).text == "(", slices.Contains(promKeywords, t.text), slices.Contains(aggregations, t.text):
			// A function or an aggregation, or an operator keyword.
		default:
			s := selector{metric: t.text, equal: map[string][]string{}}
			if next(i).text == "{" {
				i += 2
				for i < len(toks) && toks[i].text != "}" {
					if i+2 >= len(toks) || toks[i].kind != 'i' || toks[i+1].kind != 'o' || toks[i+2].kind != 's' {
						return refs{}, fmt.Errorf("cannot read the matchers of %s in %q", s.metric, expr)
					}
					label, op, value := toks[i].text, toks[i+1].text, toks[i+2].text
					s.matched = append(s.matched, label)
					if op == "=" {
						s.equal[label] = append(s.equal[label], value)
					}
					i += 3
					if i < len(toks) && toks[i].text == "," {
						i++
					}
				}
				if i >= len(toks) {
					return refs{}, fmt.Errorf("unclosed { in %q", expr)
				}
			}
			out.selectors = append(out.selectors, s)
		}
	}
	return out, nil
}

// closedValues are the labels whose values come from closed sets, with
// those sets: a matcher on another value would match nothing, ever.
func closedValues() map[string][]string {
	classes := make([]string, 0, len(runs.Classes))
	for _, c := range runs.Classes {
		classes = append(classes, string(c))
	}
	var terminal []string
	for _, s := range []runs.State{runs.Queued, runs.Running, runs.Succeeded, runs.Failed, runs.Cancelled, runs.TimedOut} {
		if s.Terminal() {
			terminal = append(terminal, string(s))
		}
	}
	return map[string][]string{
		"class":  append(classes, other),
		"status": append(terminal, other),
		"compatibility": {runs.CompatVerified, runs.CompatNewer, runs.CompatOlder,
			runs.CompatUnrecognized, runs.CompatMissing, other},
		"cache": {"none", "read", "write"},
		"activity": {string(runs.InTurn), string(runs.AwaitingApproval), string(runs.Idle), string(runs.Stopping),
			string(runs.Hibernated)},
		"kind": {"text", "reasoning"},
	}
}

// checkExpr fails t for each metric, label or label value of expr that the
// gateway does not export.
func checkExpr(t *testing.T, where, expr string, have exported) {
	t.Helper()
	r, err := parsePromQL(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(r.selectors) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	closed := closedValues()
	labels := slices.Clone(targetLabels)
	for _, s := range r.selectors {
		f, ok := have.lookup(s.metric)
		if !ok {
			t.Errorf("%s: metric %s is not exported by the gateway", where, s.metric)
			continue
		}
		labels = append(labels, f.labels...)
		for _, l := range s.matched {
			if !slices.Contains(f.labels, l) && !slices.Contains(targetLabels, l) {
				t.Errorf("%s: %s has no label %q", where, s.metric, l)
			}
		}
		for l, values := range s.equal {
			set, ok := closed[l]
			if !ok {
				continue
			}
			for _, v := range values {
				if !slices.Contains(set, v) {
					t.Errorf("%s: %s{%s=%q} matches nothing: %s is one of %v", where, s.metric, l, v, l, set)
				}
			}
		}
	}
	for _, l := range r.grouping {
		if !slices.Contains(labels, l) {
			t.Errorf("%s: grouping by %q, a label none of its metrics has", where, l)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// labelValues is Grafana's variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// TestDeployDashboardQueriesExportedMetrics: every query of the Grafana
// dashboard, panels and variables, names metrics, labels and label values
// the gateway exports.
func TestDeployDashboardQueriesExportedMetrics(t *testing.T) {
	have := gatewayMetrics(t)
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readFile(t, dashboardFile), &dash); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	var panels []dashPanel
	for _, p := range dash.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the dashboard", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			checkExpr(t, fmt.Sprintf("panel %q", p.Title), tg.Expr, have)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			// Older dashboards spell the query as a plain string.
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Errorf("variable %s: query: %v", v.Name, err)
				continue
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		where := "variable " + v.Name
		checkExpr(t, where, m[1], have)
		// The label asked for must be one of the selector's.
		checkExpr(t, where, fmt.Sprintf("sum by (%s) (%s)", m[2], m[1]), have)
		queries++
	}
	if queries < 20 {
		t.Errorf("only %d queries found in %s: is it still a dashboard?", queries, dashboardFile)
	}
}

type dashPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		X, W int
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDeployAlertsQueryExportedMetrics: every alert rule names metrics,
// labels and label values the gateway exports, and alerts_test.yml proves
// each alert fires.
func TestDeployAlertsQueryExportedMetrics(t *testing.T) {
	have := gatewayMetrics(t)
	var rules ruleGroups
	if err := yaml.Unmarshal(readFile(t, alertsFile), &rules); err != nil {
		t.Fatalf("parse %s: %v", alertsFile, err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			checkExpr(t, "rule "+name, r.Expr, have)
		}
	}
	if len(alerts) == 0 {
		t.Fatalf("no alert in %s", alertsFile)
	}

	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(readFile(t, alertTestsFile), &tests); err != nil {
		t.Fatalf("parse %s: %v", alertTestsFile, err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if !slices.Contains(alerts, at.Alertname) {
				t.Errorf("%s tests %s, which alerts.yml does not have", alertTestsFile, at.Alertname)
			}
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("no case of %s proves that %s fires", alertTestsFile, a)
		}
	}
}

// TestDeployParsePromQL pins what the checks above rely on: the metrics,
// matchers and grouping labels read from an expression, Grafana's
// variables and ranges left out.
func TestDeployParsePromQL(t *testing.T) {
	r, err := parsePromQL(`histogram_quantile(0.95, sum by (le, route) (rate(agentgate_http_request_duration_seconds_bucket{job="agentgate", instance=~"$instance", route!="/v1/runs/{id}/events"}[$__rate_interval])))
	  / on (job) group_left (x) up{code='5\'x'} > bool 0 and ignoring(a) absent(m)`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range r.selectors {
		got = append(got, fmt.Sprintf("%s%v%v", s.metric, s.matched, s.equal))
	}
	want := []string{
		`agentgate_http_request_duration_seconds_bucket[job instance route]map[job:[agentgate]]`,
		`up[code]map[code:[5'x]]`,
		`m[]map[]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("selectors:\n got %q\nwant %q", got, want)
	}
	if want := []string{"le", "route", "job", "x", "a"}; !slices.Equal(r.grouping, want) {
		t.Errorf("grouping %q, want %q", r.grouping, want)
	}
	for _, bad := range []string{`{__name__="x"}`, `m{a="b"`, `m{a=}`, `rate(m[5m)`, `m{a="b}`} {
		if _, err := parsePromQL(bad); err == nil {
			t.Errorf("parsePromQL(%q) did not fail", bad)
		}
	}
}

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// grafanaVars are the dashboard's variables and Grafana's own, with values
// that make each query plain PromQL.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__range", "6h",
	"$instance", ".*",
	"$agent", ".*",
)

// TestDeployDashboardPromQL: every panel query of the Grafana dashboard is
// PromQL that Prometheus accepts, checked by promtool as recording rules.
// (internal/metrics checks that the metrics it names exist.)
func TestDeployDashboardPromQL(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (apt-get install prometheus)")
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(read(t, "grafana/agentgate.json"), &dash); err != nil {
		t.Fatalf("parse grafana/agentgate.json: %v", err)
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, p := range dash.Panels {
		for j, tg := range p.Targets {
			if strings.Contains(grafanaVars.Replace(tg.Expr), "$") {
				t.Errorf("panel %q: a variable the check does not know in %q", p.Title, tg.Expr)
			}
			rules = append(rules, rule{fmt.Sprintf("panel_%d_%d", i, j), grafanaVars.Replace(tg.Expr)})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d rules found", len(rules))) {
		t.Errorf("promtool did not read the %d queries:\n%s", len(rules), out)
	}
}

// Package deploy_test checks the deployment files against what they
// promise and against the code: the NATS version of go.mod, health checks
// and restart policies, grace periods longer than the gateway's drain,
// workspaces apart from data, and the nginx config's routing of a draining
// replica's 503s, proven with the real nginx.
package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
)

// The gateway's drain on SIGTERM: SHUTDOWN_GRACE for running runs, then
// KILL_GRACE twice to stop them (interrupt, SIGTERM, SIGKILL), then up to
// 5 s to close HTTP (cmd/gateway). A container's or pod's SIGKILL must come
// after all of it.
const (
	killGrace     = 5 * time.Second
	httpShutdown  = 5 * time.Second
	drainHeadroom = 5 * time.Second
)

func drainTime(shutdownGrace time.Duration) time.Duration {
	return shutdownGrace + 2*killGrace + httpShutdown + drainHeadroom
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// natsVersion is the nats-server version go.mod requires, without its v.
func natsVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(read(t, "../go.mod"))
	if m == nil {
		t.Fatal("go.mod requires no github.com/nats-io/nats-server/v2")
	}
	return string(m[1])
}

// validNATS fails t when nats-server would refuse opts (as nats-server -t
// does): NewServer checks them all, lame_duck_duration's minimum among
// them. The server is never started.
func validNATS(t *testing.T, what string, opts *server.Options) {
	t.Helper()
	s, err := server.NewServer(opts.Clone())
	if err != nil {
		t.Errorf("%s: nats-server refuses it: %v", what, err)
		return
	}
	s.Shutdown()
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return d
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	Init            bool              `yaml:"init"`
	Restart         string            `yaml:"restart"`
	StopSignal      string            `yaml:"stop_signal"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Command         []string          `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	Volumes         []string          `yaml:"volumes"`
	Profiles        []string          `yaml:"profiles"`
	SecurityOpt     []string          `yaml:"security_opt"`
	Secrets         []string          `yaml:"secrets"`
	Healthcheck     struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// mountOf returns the volume mounted at path in s, or "".
func (s composeService) mountOf(path string) string {
	for _, v := range s.Volumes {
		if src, dst, ok := strings.Cut(v, ":"); ok && strings.TrimSuffix(strings.SplitN(dst, ":", 2)[0], "/") == path {
			return src
		}
	}
	return ""
}

func services(c composeFile, prefix string) []string {
	var names []string
	for n := range c.Services {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// upstreamServers returns the host:port of each server line of the nginx
// config's upstream agentgate block, the lines the fault rig templates.
func upstreamServers(t *testing.T) []string {
	t.Helper()
	conf := string(read(t, "nginx/agentgate.conf"))
	block := regexp.MustCompile(`(?s)\nupstream agentgate \{\n(.*?)\n\}`).FindStringSubmatch(conf)
	if block == nil {
		t.Fatal("nginx/agentgate.conf has no `upstream agentgate {` block")
	}
	var out []string
	for _, line := range strings.Split(block[1], "\n") {
		if m := regexp.MustCompile(`^\s*server\s+(\S+:\d+)\s[^;]*;\s*$`).FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		} else if strings.Contains(line, "server ") {
			t.Errorf("nginx upstream line %q is not one `server <host>:<port> ...;`", line)
		}
	}
	return out
}

// TestDeployCompose: docker-compose.yml runs three NATS nodes of the tested
// version and three replicas that drain, restart, die whole and keep their
// workspaces apart, behind the shipped nginx config.
func TestDeployCompose(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(read(t, "../docker-compose.yml"), &c); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	version := natsVersion(t)
	natsOpts, err := server.ProcessConfigFile("nats/cluster.conf")
	if err != nil {
		t.Fatalf("nats/cluster.conf: %v", err)
	}
	// Each service names its server on the command line.
	named := natsOpts.Clone()
	named.ServerName = "nats-1"
	validNATS(t, "nats/cluster.conf", named)
	if !natsOpts.JetStream || natsOpts.StoreDir != "/data" {
		t.Errorf("nats/cluster.conf: JetStream %v in %q, want it on in /data", natsOpts.JetStream, natsOpts.StoreDir)
	}

	nats := services(c, "nats-")
	if len(nats) != 3 || len(natsOpts.Routes) != 3 {
		t.Errorf("NATS services %v and routes %v: want three of each", nats, natsOpts.Routes)
	}
	var natsURLs []string
	for _, n := range nats {
		s := c.Services[n]
		if want := "nats:" + version; s.Image != want && s.Image != want+"-alpine" {
			t.Errorf("%s: image %q, want %s (go.mod's nats-server)", n, s.Image, want)
		}
		if hc := strings.Join(s.Healthcheck.Test, " "); !strings.Contains(hc, ":8222/healthz?js-enabled-only=true") {
			t.Errorf("%s: health check %q does not ask /healthz?js-enabled-only=true on the monitoring port", n, hc)
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q", n, s.Restart)
		}
		if s.StopSignal != "SIGUSR2" {
			t.Errorf("%s: stop_signal %q, want SIGUSR2 (lame duck mode)", n, s.StopSignal)
		}
		if g := duration(t, n+" stop_grace_period", s.StopGracePeriod); g <= natsOpts.LameDuckDuration {
			t.Errorf("%s: stop_grace_period %v is not above lame_duck_duration %v", n, g, natsOpts.LameDuckDuration)
		}
		if !slices.Contains(s.Command, "--server_name") || !slices.Contains(s.Command, n) {
			t.Errorf("%s: command %q does not name the server %s", n, s.Command, n)
		}
		if !slices.Contains(s.Volumes, "./deploy/nats/cluster.conf:/etc/nats/cluster.conf:ro") || s.mountOf("/data") == "" {
			t.Errorf("%s: volumes %q: want the cluster config and a volume at /data", n, s.Volumes)
		}
		found := false
		for _, r := range natsOpts.Routes {
			found = found || r.Host == n+":6222"
		}
		if !found {
			t.Errorf("nats/cluster.conf has no route to %s", n)
		}
		natsURLs = append(natsURLs, "nats://"+n+":4222")
	}

	gateways := services(c, "gateway-")
	upstream := upstreamServers(t)
	if len(gateways) != 3 {
		t.Errorf("gateway services %v, want three", gateways)
	}
	ids := map[string]bool{}
	for _, n := range gateways {
		s := c.Services[n]
		env := s.Environment
		if !s.Init {
			t.Errorf("%s: no init: true", n)
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q", n, s.Restart)
		}
		if s.StopSignal != "" && s.StopSignal != "SIGTERM" {
			t.Errorf("%s: stop_signal %q, want SIGTERM (the drain)", n, s.StopSignal)
		}
		grace := duration(t, n+" AGENTGATE_SHUTDOWN_GRACE", env["AGENTGATE_SHUTDOWN_GRACE"])
		if g := duration(t, n+" stop_grace_period", s.StopGracePeriod); g < drainTime(grace) {
			t.Errorf("%s: stop_grace_period %v is shorter than the drain (%v)", n, g, drainTime(grace))
		}
		if hc := strings.Join(s.Healthcheck.Test, " "); !strings.Contains(hc, "/readyz") {
			t.Errorf("%s: health check %q does not ask /readyz", n, hc)
		}
		for _, dep := range nats {
			if s.DependsOn[dep].Condition != "service_healthy" {
				t.Errorf("%s: does not wait for %s to be healthy", n, dep)
			}
		}
		if env["AGENTGATE_NATS_REPLICAS"] != "3" {
			t.Errorf("%s: AGENTGATE_NATS_REPLICAS %q", n, env["AGENTGATE_NATS_REPLICAS"])
		}
		if got := strings.Split(env["AGENTGATE_NATS_URL"], ","); !slices.Equal(got, natsURLs) {
			t.Errorf("%s: AGENTGATE_NATS_URL %q, want %q", n, got, natsURLs)
		}
		id := env["AGENTGATE_REPLICA_ID"]
		if id == "" || ids[id] {
			t.Errorf("%s: replica id %q is empty or not unique", n, id)
		}
		ids[id] = true
		data, ws := s.mountOf(env["AGENTGATE_DATA_DIR"]), s.mountOf(env["AGENTGATE_WORKSPACE_ROOT"])
		if data == "" || ws == "" || data == ws || strings.HasPrefix(env["AGENTGATE_WORKSPACE_ROOT"], env["AGENTGATE_DATA_DIR"]+"/") {
			t.Errorf("%s: data dir %q on %q, workspaces %q on %q: want two volumes, neither inside the other",
				n, env["AGENTGATE_DATA_DIR"], data, env["AGENTGATE_WORKSPACE_ROOT"], ws)
		}
		for _, v := range []string{data, ws} {
			if _, ok := c.Volumes[v]; v != "" && !ok {
				t.Errorf("%s: volume %q is not declared", n, v)
			}
		}
		// Replicas listen on the network, so they authenticate: a keys
		// file from a declared secret, at the path the secret is mounted.
		if kf := env["AGENTGATE_API_KEYS_FILE"]; len(s.Secrets) != 1 || kf != "/run/secrets/"+s.Secrets[0] || c.Secrets[s.Secrets[0]].File == "" {
			t.Errorf("%s: AGENTGATE_API_KEYS_FILE %q with secrets %q: want the file of a declared secret", n, kf, s.Secrets)
		}
		// The sandbox needs namespaces and a /proc of its own, which
		// Docker's default profiles forbid; cli-only would not.
		for _, opt := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} {
			if !slices.Contains(s.SecurityOpt, opt) && env["AGENTGATE_SANDBOX"] != "cli-only" {
				t.Errorf("%s: security_opt %q lacks %s, which the sandbox needs", n, s.SecurityOpt, opt)
			}
		}
		if !slices.Contains(upstream, n+":8080") {
			t.Errorf("nginx/agentgate.conf does not balance to %s:8080 (servers %q)", n, upstream)
		}
	}
	if len(upstream) != len(gateways) {
		t.Errorf("nginx balances to %q, compose runs %q", upstream, gateways)
	}

	lb := c.Services["lb"]
	if !regexp.MustCompile(`^nginx:[0-9.]+$`).MatchString(lb.Image) {
		t.Errorf("lb: image %q, want a Debian-based nginx:<version> (not alpine)", lb.Image)
	}
	if lb.mountOf("/etc/nginx/conf.d/default.conf") != "./deploy/nginx/agentgate.conf" {
		t.Errorf("lb: volumes %q do not mount deploy/nginx/agentgate.conf", lb.Volumes)
	}
	for _, n := range gateways {
		if lb.DependsOn[n].Condition != "service_healthy" {
			t.Errorf("lb: does not wait for %s to be ready", n)
		}
	}
	if lb.Restart != "unless-stopped" {
		t.Errorf("lb: restart %q", lb.Restart)
	}

	// Prometheus scrapes every replica.
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(read(t, "prometheus/prometheus.yml"), &prom); err != nil {
		t.Fatalf("parse prometheus.yml: %v", err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName == "agentgate" {
			for _, st := range sc.StaticConfigs {
				targets = append(targets, st.Targets...)
			}
		}
	}
	slices.Sort(targets)
	if want := upstream; !slices.Equal(targets, want) {
		t.Errorf("prometheus.yml scrapes %q for job agentgate, want every replica %q", targets, want)
	}
}

// The parts of Kubernetes objects the checks read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas            int               `yaml:"replicas"`
		ServiceName         string            `yaml:"serviceName"`
		PodManagementPolicy string            `yaml:"podManagementPolicy"`
		MaxUnavailable      any               `yaml:"maxUnavailable"`
		ClusterIP           string            `yaml:"clusterIP"`
		PublishNotReady     bool              `yaml:"publishNotReadyAddresses"`
		Selector            map[string]any    `yaml:"selector"`
		Template            k8sPodTemplate    `yaml:"template"`
		VolumeClaimTemplate []k8sObject       `yaml:"volumeClaimTemplates"`
		Labels              map[string]string `yaml:"labels"`
	} `yaml:"spec"`
}

type k8sPodTemplate struct {
	Metadata struct {
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		TerminationGracePeriodSeconds int   `yaml:"terminationGracePeriodSeconds"`
		ShareProcessNamespace         *bool `yaml:"shareProcessNamespace"`
		Containers                    []struct {
			Name  string `yaml:"name"`
			Image string `yaml:"image"`
			Args  []string
			Env   []struct {
				Name      string         `yaml:"name"`
				Value     string         `yaml:"value"`
				ValueFrom map[string]any `yaml:"valueFrom"`
			} `yaml:"env"`
			ReadinessProbe  k8sProbe `yaml:"readinessProbe"`
			LivenessProbe   k8sProbe `yaml:"livenessProbe"`
			StartupProbe    k8sProbe `yaml:"startupProbe"`
			SecurityContext struct {
				SeccompProfile struct {
					Type string `yaml:"type"`
				} `yaml:"seccompProfile"`
				AppArmorProfile struct {
					Type string `yaml:"type"`
				} `yaml:"appArmorProfile"`
				ProcMount string `yaml:"procMount"`
			} `yaml:"securityContext"`
			VolumeMounts []struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
			} `yaml:"volumeMounts"`
		} `yaml:"containers"`
		Volumes []struct {
			Name     string `yaml:"name"`
			EmptyDir *struct {
				SizeLimit string `yaml:"sizeLimit"`
			} `yaml:"emptyDir"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// readK8s parses every document of every file under kubernetes/.
func readK8s(t *testing.T) map[string]k8sObject {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubernetes/*.yaml: %v", err)
	}
	out := map[string]k8sObject{}
	for _, f := range files {
		dec := yaml.NewDecoder(bytes.NewReader(read(t, f)))
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("parse %s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := out[key]; dup {
				t.Errorf("%s: %s twice", f, key)
			}
			out[key] = o
		}
	}
	return out
}

func env(o k8sObject, name string) string {
	for _, e := range o.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func mountOf(o k8sObject, path string) string {
	for _, m := range o.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == path {
			return m.Name
		}
	}
	return ""
}

// TestDeployKubernetes: the NATS StatefulSet runs three servers of the
// tested version with probes and a disruption budget, and the gateway's
// three replicas drain within their grace period, die whole and keep
// workspaces on a bounded volume of their own.
func TestDeployKubernetes(t *testing.T) {
	objs := readK8s(t)
	version := natsVersion(t)

	nats, ok := objs["StatefulSet/nats"]
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	if nats.Spec.Replicas != 3 || nats.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("nats: %d replicas, %q pod management; want 3, Parallel (a server is ready only with a quorum)",
			nats.Spec.Replicas, nats.Spec.PodManagementPolicy)
	}
	nc := nats.Spec.Template.Spec.Containers[0]
	if nc.Image != "nats:"+version {
		t.Errorf("nats: image %q, want nats:%s", nc.Image, version)
	}
	for what, p := range map[string]k8sProbe{"readiness": nc.ReadinessProbe, "liveness": nc.LivenessProbe} {
		if !strings.HasPrefix(p.HTTPGet.Path, "/healthz") {
			t.Errorf("nats: %s probe %q, want /healthz", what, p.HTTPGet.Path)
		}
	}
	if len(nats.Spec.VolumeClaimTemplate) == 0 || mountOf(nats, "/data") != nats.Spec.VolumeClaimTemplate[0].Metadata.Name {
		t.Error("nats: /data is not on a PersistentVolumeClaim")
	}
	svc := objs["Service/"+nats.Spec.ServiceName]
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReady {
		t.Errorf("nats: service %q is not headless with publishNotReadyAddresses", nats.Spec.ServiceName)
	}

	// The server config, as the pod nats-1 reads it.
	conf := objs["ConfigMap/nats-config"].Data["nats.conf"]
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "nats-1")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	validNATS(t, "nats.conf", opts)
	if opts.ServerName != "nats-1" || !opts.JetStream || len(opts.Routes) != 3 {
		t.Errorf("nats.conf: server_name %q, JetStream %v, %d routes; want nats-1 (the pod name), on, 3",
			opts.ServerName, opts.JetStream, len(opts.Routes))
	}
	if g := time.Duration(nats.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; g <= opts.LameDuckDuration {
		t.Errorf("nats: terminationGracePeriodSeconds %v is not above lame_duck_duration %v", g, opts.LameDuckDuration)
	}

	gw, ok := objs["StatefulSet/agentgate"]
	if !ok {
		t.Fatal("no StatefulSet agentgate")
	}
	ps := gw.Spec.Template.Spec
	c := ps.Containers[0]
	if gw.Spec.Replicas != 3 {
		t.Errorf("agentgate: %d replicas", gw.Spec.Replicas)
	}
	if ps.ShareProcessNamespace == nil || *ps.ShareProcessNamespace {
		t.Error("agentgate: shareProcessNamespace is not false: tini would not be PID 1 of the gateway's namespace")
	}
	grace := duration(t, "AGENTGATE_SHUTDOWN_GRACE", env(gw, "AGENTGATE_SHUTDOWN_GRACE"))
	// preStop runs within the grace period too.
	const preStop = 5 * time.Second
	if g := time.Duration(ps.TerminationGracePeriodSeconds) * time.Second; g < drainTime(grace)+preStop {
		t.Errorf("agentgate: terminationGracePeriodSeconds %v is shorter than preStop and the drain (%v)", g, drainTime(grace)+preStop)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("agentgate: readiness %q, liveness %q; want /readyz, /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	if env(gw, "AGENTGATE_NATS_REPLICAS") != "3" {
		t.Error("agentgate: AGENTGATE_NATS_REPLICAS is not 3")
	}
	var want []string
	for i := range nats.Spec.Replicas {
		want = append(want, fmt.Sprintf("nats://nats-%d.%s:4222", i, nats.Spec.ServiceName))
	}
	if got := strings.Split(env(gw, "AGENTGATE_NATS_URL"), ","); !slices.Equal(got, want) {
		t.Errorf("agentgate: AGENTGATE_NATS_URL %q, want %q", got, want)
	}
	data, ws := mountOf(gw, env(gw, "AGENTGATE_DATA_DIR")), mountOf(gw, env(gw, "AGENTGATE_WORKSPACE_ROOT"))
	if data == "" || ws == "" || data == ws {
		t.Errorf("agentgate: data on volume %q, workspaces on %q: want two volumes", data, ws)
	}
	bounded := false
	for _, v := range ps.Volumes {
		bounded = bounded || v.Name == ws && v.EmptyDir != nil && v.EmptyDir.SizeLimit != ""
	}
	if !bounded {
		t.Errorf("agentgate: workspaces volume %q is not an emptyDir with a sizeLimit", ws)
	}
	// Pods listen on the network, so they authenticate: the keys file
	// is a mounted Secret, which the gateway re-reads when it changes.
	keysFile := env(gw, "AGENTGATE_API_KEYS_FILE")
	keysVol := mountOf(gw, filepath.Dir(keysFile))
	fromSecret := false
	for _, v := range ps.Volumes {
		fromSecret = fromSecret || v.Name == keysVol && v.Secret != nil && v.Secret.SecretName != ""
	}
	if keysFile == "" || !fromSecret {
		t.Errorf("agentgate: AGENTGATE_API_KEYS_FILE %q on volume %q: want a file of a mounted Secret", keysFile, keysVol)
	}
	if sc := c.SecurityContext; env(gw, "AGENTGATE_SANDBOX") != "cli-only" &&
		(sc.SeccompProfile.Type != "Unconfined" || sc.AppArmorProfile.Type != "Unconfined" || sc.ProcMount != "Unmasked") {
		t.Errorf("agentgate: securityContext %+v does not let the sandbox make its namespaces and /proc", sc)
	}
	if len(gw.Spec.VolumeClaimTemplate) == 0 || gw.Spec.VolumeClaimTemplate[0].Metadata.Name != data {
		t.Errorf("agentgate: data volume %q is not a PersistentVolumeClaim", data)
	}

	for _, app := range []string{"nats", "agentgate"} {
		pdb, ok := objs["PodDisruptionBudget/"+app]
		if !ok {
			t.Errorf("no PodDisruptionBudget %s", app)
			continue
		}
		if fmt.Sprint(pdb.Spec.Selector["matchLabels"]) != fmt.Sprint(map[string]any{"app": app}) {
			t.Errorf("PodDisruptionBudget %s selects %v", app, pdb.Spec.Selector)
		}
	}
	if _, ok := objs["Service/agentgate"]; !ok {
		t.Error("no Service agentgate")
	}
}

// TestDeployDockerfile: the image keeps tini as PID 1, signals and health
// checks as the compose and Kubernetes files expect.
func TestDeployDockerfile(t *testing.T) {
	df := string(read(t, "../Dockerfile"))
	for _, want := range []string{
		`FROM ubuntu:`,
		`ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/agentgate"]`,
		`STOPSIGNAL SIGTERM`,
		`http://127.0.0.1:8080/readyz`,
		`AGENTGATE_WORKSPACE_ROOT=/var/lib/agentgate-workspaces`,
		` curl `,
		// The light reaper beside the gateway, where it looks for it.
		`-o /out/agentgate-reaper ./cmd/agentgate-reaper`,
		// Built with cgo, and statically, as the tests build it
		// (proctreetest.ReaperLDFlags): without cgo it would be the Go
		// runtime's seven threads per run again.
		`RUN CGO_ENABLED=1 go build -trimpath -ldflags='-s -w ` + proctreetest.ReaperLDFlags + `'`,
		`COPY --from=build /out/agentgate-reaper /usr/local/bin/agentgate-reaper`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The image's final stage is Ubuntu: the stage after the last FROM.
	sc := bufio.NewScanner(strings.NewReader(df))
	last := ""
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "FROM ") {
			last = sc.Text()
		}
	}
	if !strings.HasPrefix(last, "FROM ubuntu:") {
		t.Errorf("the final stage is %q, want Ubuntu", last)
	}
}

package agentsfile

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ModelEndpoint is one place the CLI calls for its model: a host:port,
// or the URL a variable of the CLI's environment holds (the entry's env
// or a passed-through variable), read at every run.
type ModelEndpoint struct {
	// HostPort is a fixed endpoint, "api.example.com:443".
	HostPort string
	// URLVar names the variable whose URL's host and port are the
	// endpoint ("OPENAI_BASE_URL" for "$OPENAI_BASE_URL").
	URLVar string
}

// modelEndpoints reads model_endpoints: each "host:port", an http(s) URL
// (its host and port, 443 or 80 by its scheme) or "$NAME".
func (p *parser) modelEndpoints(a *Agent, who, field string, v *yaml.Node) error {
	items, err := p.list(v, who, field)
	if err != nil {
		return err
	}
	a.ModelEndpoints = make([]ModelEndpoint, 0, len(items))
	for i, s := range items {
		f := fmt.Sprintf("%s[%d]", field, i+1)
		if name, ok := strings.CutPrefix(s, "$"); ok {
			if !envNamePattern.MatchString(name) {
				return p.fail(v.Content[i], who, f, fmt.Sprintf("%q is not a variable name", name))
			}
			a.ModelEndpoints = append(a.ModelEndpoints, ModelEndpoint{URLVar: name})
			continue
		}
		hp, problem := EndpointOf(s)
		if problem != "" {
			return p.fail(v.Content[i], who, f, problem)
		}
		a.ModelEndpoints = append(a.ModelEndpoints, ModelEndpoint{HostPort: hp})
	}
	return nil
}

// checkEndpointVars refuses a "$NAME" endpoint whose variable the entry
// neither sets nor passes through: the CLI would have no such URL.
func (p *parser) checkEndpointVars(n *yaml.Node, who string, a *Agent) error {
	for i, e := range a.ModelEndpoints {
		if e.URLVar == "" {
			continue
		}
		_, fixed := a.Env[e.URLVar]
		passed := false
		for _, k := range a.PassEnv {
			passed = passed || k == e.URLVar
		}
		if !fixed && !passed {
			return p.fail(n, who, fmt.Sprintf("model_endpoints[%d]", i+1),
				fmt.Sprintf("$%s is neither in env nor in pass_env", e.URLVar))
		}
	}
	return nil
}

// EndpointOf returns the host:port of s, a "host:port" or an http(s)
// URL, or why it is neither.
func EndpointOf(s string) (hostPort, problem string) {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Sprintf("%q is not an http or https URL with a host", s)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		return checkedHostPort(u.Hostname(), port, s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", fmt.Sprintf("%q is neither host:port, a URL nor $VARIABLE", s)
	}
	return checkedHostPort(host, port, s)
}

func checkedHostPort(host, port, s string) (string, string) {
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Sprintf("%q has no port between 1 and 65535", s)
	}
	if strings.ContainsAny(host, "/*?#@ ") {
		return "", fmt.Sprintf("%q has no plain host", s)
	}
	return net.JoinHostPort(host, port), ""
}

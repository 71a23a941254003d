package adapterkit

import (
	"slices"
	"testing"
)

func TestEndpoint(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{"https://api.anthropic.com", "api.anthropic.com:443", true},
		{"http://127.0.0.1:8080/v1", "127.0.0.1:8080", true},
		{"HTTP://Proxy.Example.COM/v1/", "proxy.example.com:80", true},
		{"https://[::1]:9443/api", "[::1]:9443", true},
		{"https://[fd00::1]", "[fd00::1]:443", true},
		{"wss://realtime.example.com/ws", "realtime.example.com:443", true},
		{" https://padded.example.com ", "padded.example.com:443", true},
		{"", "", false},
		{"api.openai.com", "", false},          // no scheme: a path to url.Parse
		{"ftp://files.example.com", "", false}, // not a scheme a model API speaks
		{"https://", "", false},
		{"http://%zz", "", false},
	} {
		got, ok := Endpoint(c.raw)
		if got != c.want || ok != c.ok {
			t.Errorf("Endpoint(%q) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

func TestEndpointsAddKeepsOrderWithoutRepeats(t *testing.T) {
	var e Endpoints
	e.Add("b:443", "a:443", "b:443", "")
	if !e.AddURL("https://a") || e.AddURL("not a url") {
		t.Error("AddURL reported the wrong URL as having an endpoint")
	}
	e.AddURL("http://c:81")
	if want := []string{"b:443", "a:443", "c:81"}; !slices.Equal(e, want) {
		t.Errorf("endpoints = %v, want %v", e, want)
	}
}

package runs

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckNetwork(t *testing.T) {
	long := strings.Repeat("a", MaxAllowHostBytes+1)
	many := make([]string, MaxAllowHosts+1)
	for i := range many {
		many[i] = "h.example.com"
	}
	for _, tc := range []struct {
		spec  Spec
		field string // "" for no error
	}{
		{Spec{}, ""},
		{Spec{Network: NetworkModel}, ""},
		{Spec{Network: NetworkAllow, AllowHosts: []string{"registry.npmjs.org:443"}}, ""},
		{Spec{Network: "internet"}, FieldNetwork},
		{Spec{Network: NetworkAllow}, FieldAllowHosts},
		{Spec{Network: NetworkModel, AllowHosts: []string{"a.example.com"}}, FieldAllowHosts},
		{Spec{AllowHosts: []string{"a.example.com"}}, FieldAllowHosts},
		{Spec{Network: NetworkAllow, AllowHosts: many}, FieldAllowHosts},
		{Spec{Network: NetworkAllow, AllowHosts: []string{long}}, FieldAllowHosts},
		{Spec{Network: NetworkAllow, AllowHosts: []string{""}}, FieldAllowHosts},
	} {
		err := checkNetwork(tc.spec)
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid)):
			t.Errorf("%+v: %v, want an invalid %s", tc.spec, err, tc.field)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	for _, n := range Networks {
		if got, err := ParseNetwork(string(n)); err != nil || got != n {
			t.Errorf("ParseNetwork(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := ParseNetwork("Model"); err == nil || !strings.Contains(err.Error(), "model, allow, open, none") {
		t.Errorf("ParseNetwork(Model) = %v, want an error listing the policies", err)
	}
}

package main

import (
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/mock/mockhttp"
	"github.com/agentgate/agentgate/internal/mock/openai"
)

// ledgerLimit keeps a long benchmark from growing the ledger without bound.
const ledgerLimit = 1000

// api is one mock model API mockmodel serves.
type api struct {
	// names lists the scenarios start knows, sorted.
	names func() []string
	// start serves the scenario called name on the loopback address addr,
	// with command as the tool scenarios' shell command when not empty,
	// and returns the base URL and the function that stops the server.
	start func(addr, name, command string) (url string, stop func(), err error)
}

// apis returns the APIs by their -api name.
func apis() map[string]api {
	return map[string]api{
		"anthropic": {names: anthropic.Names, start: func(addr, name, command string) (string, func(), error) {
			sc, err := anthropic.Named(name, command)
			if err != nil {
				return "", nil, err
			}
			srv, err := anthropic.Start(addr, sc, anthropic.LedgerLimit(ledgerLimit))
			if err != nil {
				return "", nil, err
			}
			return srv.URL, srv.Close, nil
		}},
		"openai": {names: responsesCatalog.Names, start: func(addr, name, command string) (string, func(), error) {
			sc, err := responsesCatalog.Named(name, command)
			if err != nil {
				return "", nil, err
			}
			srv, err := openai.Start(addr, sc, openai.LedgerLimit(ledgerLimit))
			if err != nil {
				return "", nil, err
			}
			return srv.URL, srv.Close, nil
		}},
		"googleai": {names: googleai.Names, start: func(addr, name, command string) (string, func(), error) {
			sc, err := googleai.Named(name, command)
			if err != nil {
				return "", nil, err
			}
			srv, err := googleai.Start(addr, sc, googleai.LedgerLimit(ledgerLimit))
			if err != nil {
				return "", nil, err
			}
			return srv.URL, srv.Close, nil
		}},
		"chat": {names: chat.Names, start: func(addr, name, command string) (string, func(), error) {
			sc, err := chat.Named(name, command)
			if err != nil {
				return "", nil, err
			}
			srv, err := chat.Start(addr, sc, chat.LedgerLimit(ledgerLimit))
			if err != nil {
				return "", nil, err
			}
			return srv.URL, srv.Close, nil
		}},
	}
}

// responsesCatalog is the openai package's catalog with the scenarios it
// builds but does not name: Codex's interactive ones (two-tools,
// tool-then-text, turns) and their GitHub Copilot CLI forms, which call
// its bash tool (bash-two-tools, bash-tool-then-text, bash-always-tool),
// so that each agent has the same scenario names as the other APIs'
// mocks (see agent.scenarios).
var responsesCatalog mockhttp.Catalog[openai.Scenario] = func(command string) map[string]func() openai.Scenario {
	or := func(def string) string { return mockhttp.Or(command, def) }
	m := map[string]func() openai.Scenario{}
	for _, name := range openai.Names() {
		m[name] = func() openai.Scenario {
			// Named cannot fail for a name Names listed.
			sc, _ := openai.Named(name, command)
			return sc
		}
	}
	m["two-tools"] = func() openai.Scenario { return openai.TwoTools(or("echo one"), or("echo two"), "Both commands ran.") }
	m["tool-then-text"] = func() openai.Scenario { return openai.LongThenText(or(openai.LongCommand), "Done after the tool.") }
	m["turns"] = func() openai.Scenario { return openai.Turns("Turn answered.") }
	m["bash-always-tool"] = func() openai.Scenario { return openai.BashLoop(or("echo again")) }
	m["bash-two-tools"] = func() openai.Scenario {
		return openai.BashTwoTools(or("echo one"), or("echo two"), "Both commands ran.")
	}
	m["bash-tool-then-text"] = func() openai.Scenario {
		return openai.BashLongThenText(or(openai.LongCommand), "Done after the tool.")
	}
	return m
}

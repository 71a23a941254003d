package main

import (
	"github.com/agentgate/agentgate/internal/adapters/acpagent"
	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/runs"
)

// agentsFileSetting names the operator's agents file.
const agentsFileSetting = "AGENTGATE_AGENTS_FILE"

// roster is the built-in agents (adapters) followed by those of the
// agents file the gateway's environment names, if any. A bad file is an
// error naming the file, the agent and the field: the gateway does not
// start without an agent its operator configured.
func roster(getenv func(string) string) ([]runs.Adapter, error) {
	all := adapters(getenv)
	path := getenv(agentsFileSetting)
	if path == "" {
		return all, nil
	}
	var reserved []string
	for _, a := range all {
		reserved = append(reserved, a.Name())
		reserved = append(reserved, a.Describe().Aliases...)
	}
	entries, err := agentsfile.Load(path, reserved)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		all = append(all, acpagent.ForEntry(e, getenv))
	}
	return all, nil
}

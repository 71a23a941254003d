module github.com/agentgate/agentgate

go 1.26.8

# agentgate with the pinned agent CLIs, on Ubuntu.
#
#   docker build -t agentgate .
#   docker run --rm agentgate keys new --tenant acme --role admin >> keys.txt  # then keep only the key line in api-keys
#   docker run -p 8080:8080 -e ANTHROPIC_API_KEY=... \
#     -v $PWD/api-keys:/etc/agentgate/api-keys:ro -e AGENTGATE_API_KEYS_FILE=/etc/agentgate/api-keys \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     --security-opt systempaths=unconfined \
#     -v agentgate-data:/var/lib/agentgate \
#     -v agentgate-workspaces:/var/lib/agentgate-workspaces agentgate
#
# The image listens on :8080, so it needs a keys file (or
# AGENTGATE_INSECURE_NO_AUTH=true); and the security options let the
# gateway's bubblewrap sandbox make its namespaces (or set
# AGENTGATE_SANDBOX=cli-only). See docs/security.md.
#
# Workspaces live apart from the data directory (embedded store, agent
# homes), so that an agent filling its workspace cannot fill the store's
# disk: give each its own volume, and the workspaces one its own
# filesystem for a hard bound.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/agentgate ./cmd/gateway
# Each run's reaper: a small binary beside the gateway, which finds it there.
# With cgo it reaps in C before the Go runtime starts (cmd/agentgate-reaper/
# reaper.c), linked statically: about a megabyte resident and one thread per
# run, where the Go runtime alone would take seven threads and 2.7 MiB.
RUN CGO_ENABLED=1 go build -trimpath -ldflags='-s -w -extldflags=-static' -o /out/agentgate-reaper ./cmd/agentgate-reaper

# The agent CLIs come from npm, pinned by tools/agents/package-lock.json
# (installed as scripts/install-agents.sh does: see why not npm ci there).
# Some need Node 22 (Claude Code declares node >= 22), newer than
# Ubuntu 24.04's nodejs package, so Node comes from the official image.
FROM node:22-bookworm-slim AS agents
WORKDIR /opt/agentgate/agents
COPY tools/agents/package.json tools/agents/package-lock.json ./
RUN npm install --no-audit --no-fund

FROM ubuntu:24.04
# Agent tool calls run shell commands: give them the usual tools. Node is
# kept for CLIs that are Node programs (Gemini CLI, the npm launchers).
# curl is the health check's client.
RUN apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates curl git perl tini bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 agentgate \
    && mkdir -p /var/lib/agentgate /var/lib/agentgate-workspaces \
    && chown agentgate /var/lib/agentgate /var/lib/agentgate-workspaces
COPY --from=agents /usr/local/bin/node /usr/local/bin/node
COPY --from=agents /opt/agentgate/agents /opt/agentgate/agents
COPY --from=build /out/agentgate /usr/local/bin/agentgate
COPY --from=build /out/agentgate-reaper /usr/local/bin/agentgate-reaper
ENV PATH=/opt/agentgate/agents/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    AGENTGATE_ADDR=:8080 \
    AGENTGATE_DATA_DIR=/var/lib/agentgate \
    AGENTGATE_WORKSPACE_ROOT=/var/lib/agentgate-workspaces
USER agentgate
# A new named volume takes the ownership of these directories.
VOLUME ["/var/lib/agentgate", "/var/lib/agentgate-workspaces"]
EXPOSE 8080
# SIGTERM drains (see docker-compose.yml); give the container more than
# AGENTGATE_SHUTDOWN_GRACE before SIGKILL (docker stop -t, compose
# stop_grace_period, Kubernetes terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
# /readyz: the store answers and the replica is not draining.
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/readyz"]
# tini as PID 1 reaps orphaned tool processes, which the gateway kills but,
# as PID 1 would otherwise have to, does not wait for, and passes signals
# on to the gateway. When the gateway exits, tini exits with its status,
# and the end of PID 1 makes the kernel kill every process left in the
# container's PID namespace: no agent outlives its replica. -s makes tini
# a subreaper when something else is PID 1 (docker run --init, compose
# init: true), so it still reaps and does not warn.
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/agentgate"]

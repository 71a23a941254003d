# agentgate with the pinned agent CLIs, on Ubuntu.
#
#   docker build -t agentgate .
#   docker run -p 8080:8080 -e ANTHROPIC_API_KEY=... -v agentgate-data:/var/lib/agentgate agentgate

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/agentgate ./cmd/gateway

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
RUN apt-get update && apt-get install -y --no-install-recommends \
        ca-certificates git perl tini bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 agentgate \
    && mkdir -p /var/lib/agentgate && chown agentgate /var/lib/agentgate
COPY --from=agents /usr/local/bin/node /usr/local/bin/node
COPY --from=agents /opt/agentgate/agents /opt/agentgate/agents
COPY --from=build /out/agentgate /usr/local/bin/agentgate
ENV PATH=/opt/agentgate/agents/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    AGENTGATE_ADDR=:8080 \
    AGENTGATE_DATA_DIR=/var/lib/agentgate
USER agentgate
VOLUME /var/lib/agentgate
EXPOSE 8080
# tini reaps orphaned tool processes, which the gateway kills but, as PID 1
# would otherwise have to, does not wait for.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/agentgate"]

// Command mockmodel serves a mock model API on a loopback address, for
// trying the gateway's agents without a key and for benchmarks. It prints
// the base URL the agent's CLI is pointed at and serves until interrupted.
//
// With -api it serves one API:
//
//	anthropic  the Anthropic Messages API (the default), for Claude Code:
//	           the URL is ANTHROPIC_BASE_URL
//	openai     the OpenAI Responses API, for Codex (a model provider's
//	           base_url) and GitHub Copilot CLI (COPILOT_PROVIDER_BASE_URL
//	           with COPILOT_PROVIDER_WIRE_API=responses); the URL ends in /v1
//	googleai   the Gemini API, for Gemini CLI: GOOGLE_GEMINI_BASE_URL
//	chat       the OpenAI Chat Completions API, for OpenCode's
//	           @ai-sdk/openai-compatible provider (its baseURL); the URL
//	           ends in /v1
//
// With -agent it picks the API that agent's tests use, maps the scenario
// names onto that agent's tools (Copilot's shell tool is bash, not
// Codex's exec_command), writes the environment the gateway needs for the
// agent as `export NAME=VALUE` lines to -env-file, and for Codex, whose
// model provider lives in config.toml, writes that file into -codex-home.
// scripts/try.sh starts the gateway this way.
//
//	mockmodel -scenario tool -command 'touch made-by-tool'
//	mockmodel -addr 127.0.0.1:8089 -scenario error-429
//	mockmodel -api openai -scenario helper
//	mockmodel -agent gemini -scenario tool -env-file mock.env
//	mockmodel -agent codex -env-file mock.env -codex-home agentgate-data/agents/codex
package main

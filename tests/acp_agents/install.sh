#!/usr/bin/env bash
# Installs the third-party ACP agents that tests/acp_agents drives (`make acp-agents`),
# each pinned, each in its own folder under .acp-agents/ (git-ignored):
#
#   .acp-agents/python-sdk/  the official ACP Python SDK (PyPI agent-client-protocol) in
#                            its own virtual environment: it installs a top-level package
#                            named `acp`, like ours, so the two never share one; its
#                            example agents come from the same release's sdist (examples/)
#   .acp-agents/ts-sdk/      the TypeScript SDK (npm @agentclientprotocol/sdk), whose
#                            package ships its example agent (dist/examples/agent.js)
#   .acp-agents/claude-code-acp/  Claude Code's ACP adapter (npm @zed-industries/claude-code-acp,
#                            which brings Claude Code itself as @anthropic-ai/claude-agent-sdk)
#   .acp-agents/gemini-cli/  Gemini CLI (npm @google/gemini-cli), whose `--acp` is an agent
#
# The last two need a model: the tests give each a fake one on 127.0.0.1
# (tests/acp_agents/fake_models.py). They are optional jobs: upstream may change under
# the pin (a package republished, a dependency's range), so their tests skip, saying so,
# when what is installed is not the pinned version.
#
# What cannot be installed (no registry, no Python >= 3.10, no Node.js) leaves a SKIPPED
# file with the reason in that folder; the tests then report themselves skipped with it.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
DIR=$ROOT/.acp-agents
PY_SDK_VERSION=0.12.1
TS_SDK_VERSION=0.12.0
CLAUDE_ACP_VERSION=0.16.2
GEMINI_CLI_VERSION=0.61.0

skip() {  # folder, reason
  mkdir -p "$1"
  printf '%s\n' "$2" > "$1/SKIPPED"
  printf 'SKIPPED: %s\n' "$2"
}

# The SDK needs Python >= 3.10: the first such interpreter on PATH.
python310() {
  local cand
  for cand in ${PYTHON:-} python3 python3.13 python3.12 python3.11 python3.10; do
    command -v "$cand" >/dev/null 2>&1 || continue
    "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null && { echo "$cand"; return 0; }
  done
  return 1
}

# --- the Python SDK -----------------------------------------------------------------------
d=$DIR/python-sdk
if [ "$(cat "$d/VERSION" 2>/dev/null)" != "$PY_SDK_VERSION" ]; then
  rm -rf "$d"
  mkdir -p "$d"
  if ! py=$(python310); then
    skip "$d" "no Python >= 3.10 for agent-client-protocol $PY_SDK_VERSION"
  elif ! "$py" -m venv "$d/venv" > "$d/install.log" 2>&1; then
    skip "$d" "cannot make a virtual environment: $(tail -n 1 "$d/install.log")"
  elif ! timeout 600 "$d/venv/bin/python" -m pip install --quiet "agent-client-protocol==$PY_SDK_VERSION" \
        >> "$d/install.log" 2>&1 \
      || ! timeout 300 "$d/venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
        -d "$d/sdist" "agent-client-protocol==$PY_SDK_VERSION" >> "$d/install.log" 2>&1; then
    skip "$d" "PyPI unreachable: cannot install agent-client-protocol==$PY_SDK_VERSION: $(grep -v WARNING "$d/install.log" | tail -n 1)"
  else
    tar -xzf "$d"/sdist/*.tar.gz -C "$d" --strip-components=1 "agent_client_protocol-$PY_SDK_VERSION/examples"
    rm -rf "$d/sdist"
    echo "$PY_SDK_VERSION" > "$d/VERSION"
    echo "acp-agents: agent-client-protocol $PY_SDK_VERSION in .acp-agents/python-sdk/"
  fi
fi

# --- the npm agents: folder, package, pinned version ----------------------------------
npm_agent() {
  local d=$DIR/$1 package=$2 version=$3
  [ "$(cat "$d/VERSION" 2>/dev/null)" = "$version" ] && return 0
  rm -rf "$d"
  mkdir -p "$d"
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    skip "$d" "Node.js and npm are not installed"
  elif ! timeout 600 npm install --prefix "$d" --no-save --no-audit --no-fund --loglevel=error \
        "$package@$version" > "$d/install.log" 2>&1; then
    why=$(grep -m1 -E 'E[A-Z]{4,}|network|request to' "$d/install.log" || tail -n 1 "$d/install.log")
    skip "$d" "cannot install $package@$version (npm registry unreachable?): $why"
  else
    echo "$version" > "$d/VERSION"
    echo "acp-agents: $package $version in .acp-agents/$1/"
  fi
}
npm_agent ts-sdk @agentclientprotocol/sdk "$TS_SDK_VERSION"
npm_agent claude-code-acp @zed-industries/claude-code-acp "$CLAUDE_ACP_VERSION"
npm_agent gemini-cli @google/gemini-cli "$GEMINI_CLI_VERSION"
exit 0

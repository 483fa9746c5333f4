#!/usr/bin/env bash
# Build the peer environments used by tests/peers/test_differential.py and bench/scorers.py.
#
#   tests/peers/setup.sh                    # every peer
#   tests/peers/setup.sh ragas deepeval     # some of them
#   tests/peers/setup.sh --lock ragas       # re-resolve requirements.lock / package-lock.json first
#
# Python peers (agentevals, adk, ragas, deepeval): .peer-venvs/<peer> (git-ignored) is built from
# tests/peers/<peer>/requirements.lock with `uv pip sync`. Mastra: tests/peers/mastra/node_modules
# (git-ignored) from package-lock.json with `npm ci`. Each environment records the sha256 of the lock
# it was built from and is rebuilt only when the lock changes, so a second run is a no-op.
# The peers conflict with each other (and with the project), hence one environment per peer.
#
# Needs uv (UV=..., default .venv/bin/uv, else uv on PATH), a Python 3.11 (PYTHON=..., default
# python3.11) and, for mastra, node + npm (NPM=..., default npm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

UV="${UV:-}"
if [[ -z "$UV" ]]; then
  if [[ -x .venv/bin/uv ]]; then UV="$ROOT/.venv/bin/uv"; else UV="$(command -v uv)"; fi
fi
PYTHON="${PYTHON:-python3.11}"
NPM="${NPM:-npm}"
ALL_PEERS=(agentevals adk ragas deepeval mastra)

relock=0
if [[ "${1:-}" == "--lock" ]]; then relock=1; shift; fi
if [[ $# -eq 0 ]]; then set -- "${ALL_PEERS[@]}"; fi

sha() { sha256sum "$1" | cut -d' ' -f1; }

setup_python() {
  local peer="$1" dir="tests/peers/$1" venv=".peer-venvs/$1"
  if [[ $relock -eq 1 || ! -f "$dir/requirements.lock" ]]; then
    (cd "$dir" && "$UV" pip compile --quiet --python-version 3.11 requirements.in -o requirements.lock)
  fi
  local want stamp="$venv/.lock.sha256"
  want="$(sha "$dir/requirements.lock")"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "== $peer: up to date ($venv)"
    return 0
  fi
  rm -rf "$venv"
  "$UV" venv --quiet --python "$PYTHON" "$venv"
  "$UV" pip sync --quiet --python "$venv/bin/python" "$dir/requirements.lock"
  echo "$want" >"$stamp"
  echo "== $peer: built $venv"
}

setup_mastra() {
  local dir="tests/peers/mastra"
  if [[ $relock -eq 1 || ! -f "$dir/package-lock.json" ]]; then
    (cd "$dir" && "$NPM" install --package-lock-only --no-audit --no-fund --ignore-scripts --loglevel=error)
  fi
  local want stamp="$dir/node_modules/.lock.sha256"
  want="$(sha "$dir/package-lock.json")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "== mastra: up to date ($dir/node_modules)"
    return 0
  fi
  # @mastra/core declares node >= 22; the code scorer we call runs on node 20 too (engine warnings only).
  (cd "$dir" && "$NPM" ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$want" >"$stamp"
  echo "== mastra: built $dir/node_modules"
}

mkdir -p .peer-venvs
pids=()
names=()
for peer in "$@"; do
  case "$peer" in
    mastra) setup_mastra & ;;
    agentevals | adk | ragas | deepeval) setup_python "$peer" & ;;
    *)
      echo "unknown peer '$peer' (peers: ${ALL_PEERS[*]})" >&2
      exit 2
      ;;
  esac
  pids+=("$!")
  names+=("$peer")
done
failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "tests/peers/setup.sh: failed to build: ${failed[*]}" >&2
  exit 1
fi

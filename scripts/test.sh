#!/usr/bin/env bash
# The whole test suite: set up (once), lint, check layering, run every test.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" all
. "$(dirname "$0")/_system_deps.sh"
echo ">> ruff"
ruff check rmqlab tests bench scripts notebooks
echo ">> import layering (import-linter)"
lint-imports
echo ">> pytest"
exec python -m pytest "$@"

# Shared by demo.sh and test.sh: create .venv (once) and install rmqlab with the given extras.
# Usage: . scripts/_venv.sh EXTRAS   (e.g. "dev" or "all")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="${RMQLAB_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  echo ">> creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.rmqlab-installed-$1"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
  echo ">> installing rmqlab[$1] into $VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[$1]"
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"

#!/usr/bin/env bash
# The main job: set up (once) and run the rmqlab demo on the embedded sample store.
set -euo pipefail
. "$(dirname "$0")/_venv.sh" widgets
exec rmqlab demo "$@"

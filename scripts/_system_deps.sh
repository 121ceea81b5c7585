# Installs what the full test suite needs beyond Python when it is missing:
# a headless JRE (Spark) and Debian's Chromium (the browser test). Uses apt-get as root, or sudo.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
{ command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; } || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  echo ">> installing system packages: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $SUDO apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "!! cannot install ${need[*]}: no apt-get; Spark/browser tests will be skipped" >&2
  fi
fi

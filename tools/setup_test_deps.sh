#!/usr/bin/env bash
# Installs the real components the test suite drives, from Debian's packages, when missing:
# prometheus (promtool, and a real scraper for the metrics test).
set -euo pipefail
need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing ${need[*]} and not root: install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${need[@]}" >/dev/null

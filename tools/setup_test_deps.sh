#!/usr/bin/env bash
# Installs the real components the tests (and the benchmark) drive, from Debian's packages, when
# missing. No arguments: what the test suite needs (prometheus, for promtool and a real scraper;
# etcd-server, for the cluster tests; chromium, the browser the dashboard's, the client library's and
# the API reference page's tests drive; curl and jq, which the docs' examples use).
# With arguments: those commands, e.g. `tools/setup_test_deps.sh wrk` for `deno task bench`.
set -euo pipefail
declare -A package_of=([promtool]=prometheus [wrk]=wrk [etcd]=etcd-server [chromium]=chromium)
commands=("$@")
[ ${#commands[@]} -eq 0 ] && commands=(promtool etcd chromium curl jq)
need=()
for c in "${commands[@]}"; do
  command -v "$c" >/dev/null 2>&1 || need+=("${package_of[$c]:-$c}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing ${need[*]} and not root: install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >/dev/null

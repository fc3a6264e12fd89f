#!/bin/sh
# The start and dev tasks' launcher: `sh tools/start.sh deno run [deno flags] main.ts [broker
# flags]` runs that command with read and write access to the data directory and read access to
# the API keys file and the TLS certificate and key, wherever the settings put them, and no
# further.
#
# The paths come from BROKER_DATA_DIR (default ./data), BROKER_API_KEYS_FILE, BROKER_TLS_CERT and
# BROKER_TLS_KEY, or from the --data-dir, --api-keys-file, --tls-cert and --tls-key flags, which
# win, as in lib/config.ts. Deno's task shell expands
# $VAR but not ${VAR:-default}, and cannot see a task's own arguments, hence this script. It
# `exec`s the command: the broker keeps this process's pid, so signals reach it directly and its
# exit status is the task's (docs/operating.md, "Permissions").

data=${BROKER_DATA_DIR:-./data}
keys=${BROKER_API_KEYS_FILE:-}
cert=${BROKER_TLS_CERT:-}
key=${BROKER_TLS_KEY:-}
prev=
for arg in "$@"; do
  case $prev in
    --data-dir) data=$arg ;;
    --api-keys-file) keys=$arg ;;
    --tls-cert) cert=$arg ;;
    --tls-key) key=$arg ;;
  esac
  case $arg in
    --data-dir=*) data=${arg#--data-dir=} ;;
    --api-keys-file=*) keys=${arg#--api-keys-file=} ;;
    --tls-cert=*) cert=${arg#--tls-cert=} ;;
    --tls-key=*) key=${arg#--tls-key=} ;;
  esac
  prev=$arg
done

deno=$1
subcommand=$2
shift 2
for file in "$keys" "$cert" "$key"; do
  if [ -n "$file" ]; then
    set -- "--allow-read=$file" "$@"
  fi
done
if [ -n "$data" ] && [ "$data" != ":memory:" ]; then
  set -- "--allow-read=$data" "--allow-write=$data" "$@"
fi
exec "$deno" "$subcommand" "$@"

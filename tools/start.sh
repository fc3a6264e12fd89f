#!/bin/sh
# The start and dev tasks' launcher: `sh tools/start.sh deno run [deno flags] main.ts [broker
# flags]` runs that command with read and write access to the data directory and read access to
# the API keys file and the TLS files (certificate and key; the cluster's and etcd's CAs and
# client certificate), and the webhook key file, wherever the settings put them, and no further.
#
# The paths come from BROKER_DATA_DIR (default ./data), BROKER_API_KEYS_FILE,
# BROKER_WEBHOOK_KEY_FILE, BROKER_TLS_CERT,
# BROKER_TLS_KEY, BROKER_CLUSTER_CA and BROKER_ETCD_CA/CERT/KEY, or from their flags
# (--data-dir, --api-keys-file, --tls-cert, …), which win, as in lib/config.ts. Deno's task shell expands
# $VAR but not ${VAR:-default}, and cannot see a task's own arguments, hence this script. It
# `exec`s the command: the broker keeps this process's pid, so signals reach it directly and its
# exit status is the task's (docs/operating.md, "Permissions").
#
# It also tells the broker which BROKER_* variables are set (in BROKER_ENV_NAMES), so a misspelt
# one stops start-up: the broker may read only PORT and BROKER_*, and cannot list them itself.
# When the command's Deno is `deno` and there is none on the PATH (the README's `npx -y
# deno@2.9.6` route outside a task, such as `go test` in clients/go), it runs the Deno that npx
# fetches, that binary itself, so the pid is still the broker's.

data=${BROKER_DATA_DIR:-./data}
keys=${BROKER_API_KEYS_FILE:-}
webhookkey=${BROKER_WEBHOOK_KEY_FILE:-}
cert=${BROKER_TLS_CERT:-}
key=${BROKER_TLS_KEY:-}
clusterca=${BROKER_CLUSTER_CA:-}
etcdca=${BROKER_ETCD_CA:-}
etcdcert=${BROKER_ETCD_CERT:-}
etcdkey=${BROKER_ETCD_KEY:-}
prev=
for arg in "$@"; do
  case $prev in
    --data-dir) data=$arg ;;
    --api-keys-file) keys=$arg ;;
    --webhook-key-file) webhookkey=$arg ;;
    --tls-cert) cert=$arg ;;
    --tls-key) key=$arg ;;
    --cluster-ca) clusterca=$arg ;;
    --etcd-ca) etcdca=$arg ;;
    --etcd-cert) etcdcert=$arg ;;
    --etcd-key) etcdkey=$arg ;;
  esac
  case $arg in
    --data-dir=*) data=${arg#--data-dir=} ;;
    --api-keys-file=*) keys=${arg#--api-keys-file=} ;;
    --webhook-key-file=*) webhookkey=${arg#--webhook-key-file=} ;;
    --tls-cert=*) cert=${arg#--tls-cert=} ;;
    --tls-key=*) key=${arg#--tls-key=} ;;
    --cluster-ca=*) clusterca=${arg#--cluster-ca=} ;;
    --etcd-ca=*) etcdca=${arg#--etcd-ca=} ;;
    --etcd-cert=*) etcdcert=${arg#--etcd-cert=} ;;
    --etcd-key=*) etcdkey=${arg#--etcd-key=} ;;
  esac
  prev=$arg
done

deno=$1
subcommand=$2
shift 2
if [ "$deno" = deno ] && ! command -v deno >/dev/null 2>&1; then
  deno=$(npx -y deno@2.9.6 eval 'console.log(Deno.execPath())') || {
    echo "tools/start.sh: no deno on the PATH, and npx -y deno@2.9.6 failed; install Node.js" \
      "with npm, or Deno 2.9 (docs/getting-started.md)" >&2
    exit 127
  }
fi
BROKER_ENV_NAMES=$(env | sed -n 's/^\(BROKER_[A-Za-z0-9_]*\)=.*/\1/p' | tr '\n' ' ')
export BROKER_ENV_NAMES
for file in "$keys" "$webhookkey" "$cert" "$key" "$clusterca" "$etcdca" "$etcdcert" "$etcdkey"; do
  if [ -n "$file" ]; then
    set -- "--allow-read=$file" "$@"
  fi
done
if [ -n "$data" ] && [ "$data" != ":memory:" ]; then
  set -- "--allow-read=$data" "--allow-write=$data" "$@"
fi
exec "$deno" "$subcommand" "$@"

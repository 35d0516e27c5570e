#!/usr/bin/env bash
# `make demo`: the whole node lifecycle against the local emulator, no Google account needed.
# Starts an emulator if none answers at $TPUCTL_EMULATOR_HOST, and stops it again at the end.
set -euo pipefail

export TPUCTL_EMULATOR_HOST="${TPUCTL_EMULATOR_HOST:-127.0.0.1:8470}"
host="${TPUCTL_EMULATOR_HOST%:*}"
port="${TPUCTL_EMULATOR_HOST##*:}"
state_dir="${TPUCTL_DEMO_STATE:-$(mktemp -d -t tpuctl-demo.XXXXXX)}"
node="demo-$(date +%H%M%S)"
zone="us-central1-a"
started=""

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

cleanup() {
  # Never leave a node or an emulator behind, whatever happened above.
  tpuctl delete "$node" --zone "$zone" --yes --missing-ok >/dev/null 2>&1 || true
  if [ -n "$started" ]; then tpuctl emulator stop --state-dir "$state_dir" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

if ! tpuctl emulator status --state-dir "$state_dir" >/dev/null 2>&1 \
   && ! curl -fsS "http://$TPUCTL_EMULATOR_HOST/_emulator/v1/status" >/dev/null 2>&1; then
  step tpuctl emulator start --detach --host "$host" --port "$port"
  tpuctl emulator start --detach --host "$host" --port "$port" --state-dir "$state_dir"
  started=1
fi

step tpuctl create "$node" --accelerator v3-8 --zone "$zone"
tpuctl create "$node" --accelerator v3-8 --zone "$zone"
step tpuctl list --zone "$zone"
tpuctl list --zone "$zone"
step tpuctl describe "$node" --zone "$zone"
tpuctl describe "$node" --zone "$zone"
# SSH: uses ~/.ssh/google_compute_engine (gcloud's key; created if missing), host keys checked
step tpuctl exec "$node" --zone "$zone" -- sh -c "'echo \"hello from worker \$TPU_WORKER_ID of \$TPU_ACCELERATOR_TYPE\"'"
tpuctl exec "$node" --zone "$zone" -- sh -c 'echo "hello from worker $TPU_WORKER_ID of $TPU_ACCELERATOR_TYPE"'
step tpuctl stop "$node" --zone "$zone"
tpuctl stop "$node" --zone "$zone"
step tpuctl start "$node" --zone "$zone"
tpuctl start "$node" --zone "$zone"
step tpuctl delete "$node" --zone "$zone" --yes
tpuctl delete "$node" --zone "$zone" --yes
step tpuctl list --all-zones --json
tpuctl list --all-zones --json
printf '\nDemo done: the node was created, reached over SSH, stopped, started and deleted on the emulator.\n'

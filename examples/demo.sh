#!/usr/bin/env bash
# `make demo`: tpuctl's main job against the local emulator, no Google account needed.
# Starts an emulator if none answers at $TPUCTL_EMULATOR_HOST (and stops it at the end),
# runs examples/train.py on an emulated v3-8 with live logs, downloads its outputs and
# tears the node down; then shows the job record and that no node is left.
set -euo pipefail

cd "$(dirname "$0")/.."
export TPUCTL_EMULATOR_HOST="${TPUCTL_EMULATOR_HOST:-127.0.0.1:8470}"
host="${TPUCTL_EMULATOR_HOST%:*}"
port="${TPUCTL_EMULATOR_HOST##*:}"
made_state_dir=""
if [ -n "${TPUCTL_DEMO_STATE:-}" ]; then
  state_dir="$TPUCTL_DEMO_STATE"
else
  state_dir="$(mktemp -d -t tpuctl-demo.XXXXXX)"
  made_state_dir=1
fi
outputs="${TPUCTL_DEMO_OUTPUTS:-outputs/demo}"
zone="us-central1-a"
started=""

# Bold only on a terminal, and never with NO_COLOR (https://no-color.org).
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
else
  step() { printf '\n$ %s\n' "$*"; }
fi

cleanup() {
  # Never leave a node or an emulator behind, whatever happened above.
  if [ -n "$started" ]; then
    tpuctl gc --yes --all-owners --zone "$zone" >/dev/null 2>&1 || true
    tpuctl emulator stop --state-dir "$state_dir" >/dev/null 2>&1 || true
  fi
  if [ -n "$made_state_dir" ]; then
    rm -rf "$state_dir"  # the emulator's state and logs: nothing of the demo stays in the temp dir
  fi
}
trap cleanup EXIT

answers() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://$TPUCTL_EMULATOR_HOST/_emulator/v1/status" >/dev/null 2>&1
}
if ! answers; then
  step tpuctl emulator start --detach --host "$host" --port "$port"
  tpuctl emulator start --detach --host "$host" --port "$port" --state-dir "$state_dir"
  started=1
fi

step tpuctl run examples/train.py --accelerator v3-8 --zone "$zone" --teardown --outputs "$outputs" -- --steps 60 --sleep 0.05
tpuctl run examples/train.py --accelerator v3-8 --zone "$zone" --teardown --outputs "$outputs" \
  -- --steps 60 --sleep 0.05
step ls "$outputs"
ls "$outputs"
step tpuctl jobs
tpuctl jobs
step tpuctl list --all-zones
tpuctl list --all-zones
printf '\nDemo done: the job trained on an emulated v3-8, its outputs are in %s, and its node is gone.\n' "$outputs"

#!/usr/bin/env bash
# bench/first-run.sh: the README's two commands as on a fresh machine (#53: the first `test` within 15 minutes on
# 2 cores), on this one. A clean clone of HEAD in a temporary directory, `./infra/stack up`, then
# `./infra/stack test` beside that stack, with everything `test` builds made from nothing: an empty
# BUILT_TOOLS_DIR, Go module and build caches, pip cache, and a Podman image store of its own
# (CONTAINERS_STORAGE_CONF); /usr/local/bin and any pyenv off PATH. Debian's packages stay installed (their
# apt-get on a fresh machine is measured apart: the fresh-machine stage's "root runs the line up printed").
# Writes bench/reports/<date>-first-run.md: the machine, the command, each phase's time (one run: the whole
# thing takes 15 minutes and is CPU-bound, so min = median = max). Run it alone: it stops this machine's shared
# Podman service (which serves the default image store) and needs the edge port free.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
sim="${FIRST_RUN_DIR:-/var/tmp/image-cdn-stack-first-run}"
report="$ROOT/bench/reports/$(date -u +%F)-first-run.md"
if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
  echo "a stack answers on 127.0.0.1:8080: stop it first (./infra/stack down), the clone's up needs the port" >&2
  exit 1
fi

# what an earlier run left: its image store is mounted by overlay
clean() {
  umount "$sim/storage/overlay" 2>/dev/null || true
  rm -rf "$sim"
}
clean
mkdir -p "$sim"/{tools,gomod,gocache,storage,run}
cat >"$sim/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$sim/storage"
runroot = "$sim/run"
CONF
service='podman system service --time=0 unix:///run/image-cdn-stack/podman.sock'
pkill -f "$service" || true
sleep 1

clone="$(mktemp -d)/image-cdn-stack"
git clone -q "$ROOT" "$clone"
commit="$(git -C "$clone" rev-parse --short HEAD)"
(
  cd "$clone"
  export CONTAINERS_STORAGE_CONF="$sim/storage.conf" BUILT_TOOLS_DIR="$sim/tools" GOMODCACHE="$sim/gomod"
  export GOCACHE="$sim/gocache" PIP_NO_CACHE_DIR=1 PATH=/usr/local/sbin:/usr/bin:/usr/sbin:/sbin:/bin
  started=$SECONDS
  ./infra/stack up >"$sim/up.log" 2>&1
  echo "$((SECONDS - started))" >"$sim/up.s"
  started=$SECONDS
  # each line of the test command's output with the second it came at
  set +e
  ./infra/stack test 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$((SECONDS - started))" "$line"; done >"$sim/test.log"
  status="${PIPESTATUS[0]}"
  set -e
  echo "$((SECONDS - started)) $status" >"$sim/test.s"
  ./infra/stack down >/dev/null 2>&1 || true
  pkill -f "$service" || true
  sleep 2
  podman rm -a -f >/dev/null 2>&1 || true
)
rm -rf "$(dirname "$clone")"

read -r test_s test_status <"$sim/test.s"
at() { grep -a -m 1 -e "$1" "$sim/test.log" | cut -d' ' -f1; }
{
  echo "# bench/first-run: the README's up, then test beside it, with everything test builds made from nothing"
  echo
  echo "Run $(date -u +%FT%TZ) at commit $commit with \`bench/first-run.sh\` (one run)."
  echo
  echo '## Machine'
  echo
  echo '```'
  echo "cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
  echo "cores: $(nproc)"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "os: $(uname -sr); $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo '```'
  echo
  echo '## Times (seconds from the start of `test`, except up)'
  echo
  echo '| phase | s |'
  echo '|---|---|'
  echo "| up (first thing in the clone) | $(cat "$sim/up.s") |"
  echo "| the checks done | $(at 'the unit tier runs in\|node:test (the unit tier)') |"
  echo "| the whole-stack tier's tools ready (after) | $(grep -a -o "tools ready in [0-9]*" "$sim/test.log" | grep -o '[0-9]*$') |"
  echo "| the compose file's images built (after the tools) | $(grep -a -o "images built in [0-9]*" "$sim/test.log" | grep -o '[0-9]*$') |"
  echo "| the files with the built tools start | $(at 'files with the built tools') |"
  echo "| **the whole test command** (status $test_status) | **$test_s** |"
  echo
  echo 'The fresh-machine stage (beside the other files) and its steps:'
  echo
  echo '```'
  grep -a -E '✔ fresh|✖ fresh|the whole (root|user) stage|unit tier \(test --quick\)' "$sim/test.log" | cut -d' ' -f2- | cut -c1-160
  echo '```'
} >"$report"
echo "report: $report (the test command's output, each line with its second: $sim/test.log)"
[ "$test_status" = 0 ]

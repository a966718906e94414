#!/usr/bin/env bash
# The fresh-machine stage, inside a pristine Debian 12 container (./infra/stack fresh; the commit under test
# is /fresh/commit.bundle). A newcomer's first hour, exactly as the README writes it:
#   machine.sh root   as root: a clone in a 0700 directory under /root; `status`, `down`, then `render`
#                     first thing; a misspelt setting in .env refused with the right suggestion;
#                     `./infra/stack up`, a request through the edge, then `test --quick` with that stack
#                     running (the README's order); up again, down, up with secrets, an upload, a variant, an
#                     avatar redirect and a signed purge through the edge, down; the same (without the tests)
#                     from a path with a space and from /opt
#   machine.sh user   a user on a machine without the packages: up prints the apt-get line and fails
#                     cleanly; root runs that line; the same user's up works, then the same first use
# Each step prints its time ("step: NAME: N s"); a failure prints the end of the stack's logs.
set -euo pipefail
BUNDLE=/fresh/commit.bundle
SECRETS='UPLOAD_TOKENS=fresh-token PURGE_HMAC_KEYS=fresh-hmac AVATAR_ADMIN_TOKEN=fresh-admin'
CURRENT=''

say() { printf '── %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

# runs "$@" as step $1, printing its time
step() {
  local name="$1" started=$SECONDS
  shift
  say "$name"
  "$@"
  echo "step: $name: $((SECONDS - started)) s"
}

# the end of every log of the stack in $CURRENT (a checkout), when a step failed
logs_on_failure() {
  local status=$?
  [ "$status" -eq 0 ] || [ -z "$CURRENT" ] && exit "$status"
  local dir
  dir="$(cd "$CURRENT" && PATH="$(echo "$CURRENT"/.tools/node-*/bin):$PATH" node infra/render.js --dir-only 2>/dev/null || true)"
  for log in "$dir"/logs/*.log; do
    [ -s "$log" ] || continue
    echo "── end of $log"
    tail -n 25 "$log"
  done
  exit "$status"
}
trap logs_on_failure EXIT

# $1: who (root or a user name), $2: the checkout, $3…: the command, run in the checkout
as() {
  local who="$1" dir="$2"
  shift 2
  if [ "$who" = root ]; then (cd "$dir" && "$@"); else runuser -l "$who" -c "cd $(printf %q "$dir") && $(printf '%q ' "$@")"; fi
}

# up, which must neither install nor fail; $3: what it must say
up_again() {
  local out
  out="$(as "$1" "$2" env $SECRETS ./infra/stack up 2>&1)" || { echo "$out"; fail "up failed"; }
  echo "$out" | head -3
  if grep -q -e '^.\{0,8\}installing' -e 'npm ci' <<<"$out"; then echo "$out"; fail "up installed again"; fi
  grep -q -e "$3" <<<"$out" || { echo "$out"; fail "up did not say: $3"; }
}

# whether $1 (a command's output) holds a stack trace
stack_trace() { grep -q -E '^\s+at |Error|Traceback' <<<"$1"; }

healthy_edge() { curl -fsS --max-time 10 http://127.0.0.1:8080/healthz >/dev/null || fail "the edge's /healthz"; }

# the first use: $1 who, $2 checkout
first_use() {
  as "$1" "$2" bash -c "export $SECRETS; PATH=\"\$(echo .tools/node-*/bin):\$PATH\" node test/fresh/smoke.js http://127.0.0.1:8080"
}

# `render` in a clone nothing ran in yet: it installs what it needs and renders (it once exited 0 having
# rendered nothing under Debian's Node 20)
render_first() {
  local out
  out="$(as root "$1" ./infra/stack render 2>&1)" || { echo "$out"; fail "render failed"; }
  [ -f "$(tail -n 1 <<<"$out")/conf/supervisord.conf" ] || { echo "$out"; fail "render rendered nothing"; }
}

# status and down in a clone nothing ran in yet (Debian's Node 20, no npm modules): they say no stack runs,
# and exit 3 and 0, with no stack trace (status once failed with "Cannot find package 'bcryptjs'")
look_first() {
  local out status=0
  out="$(as root "$1" ./infra/stack status 2>&1)" || status=$?
  [ "$status" = 3 ] && grep -q 'no stack running' <<<"$out" || { echo "$out"; fail "status first thing: exit $status"; }
  out="$(as root "$1" ./infra/stack down 2>&1)" || { echo "$out"; fail "down first thing failed"; }
  if stack_trace "$out"; then echo "$out"; fail "down printed a stack trace"; fi
}

# a misspelt setting in .env stops up, naming the setting meant (a service's, not the nearest of the stack's)
misspelt_setting() {
  local out
  echo 'ORIGN_PORT=8800' >"$1/.env"
  if out="$(as root "$1" ./infra/stack up 2>&1)"; then echo "$out"; fail "up took ORIGN_PORT"; fi
  rm -f "$1/.env"
  grep -q 'ORIGN_PORT is not a setting (did you mean ORIGIN_PORT?)' <<<"$out" || { echo "$out"; fail "no suggestion of ORIGIN_PORT"; }
}

# a newcomer's first hour as root, in the checkout $1 (its parent made 0700 when $2 is private); $3 tests:
# the README's second command, with the stack of its first running
as_root() {
  local dir="$1"
  mkdir -p "$(dirname "$dir")"
  [ "${2:-}" = private ] && chmod 700 "$(dirname "$dir")"
  step "clone into $dir" git clone -q "$BUNDLE" "$dir"
  CURRENT="$dir"
  if [ "${3:-}" = tests ]; then
    step "status and down first thing in a fresh clone" look_first "$dir"
    step "render first thing in a fresh clone" render_first "$dir"
    step "a misspelt setting in .env" misspelt_setting "$dir"
  fi
  step "up (as the README writes it) in $dir" as root "$dir" ./infra/stack up
  step "the edge answers" healthy_edge
  [ "${3:-}" = tests ] && step "test --quick with the stack of up running" as root "$dir" ./infra/stack test --quick
  step "up again: the stack runs" up_again root "$dir" 'already running'
  step "down" as root "$dir" ./infra/stack down
  step "up again after down, with secrets, without installing" up_again root "$dir" 'stack up in'
  step "upload, variant, avatar, signed purge through the edge" first_use root "$dir"
  step "down" as root "$dir" ./infra/stack down
  CURRENT=''
}

as_user() {
  local who=newcomer dir=/home/newcomer/image-cdn-stack out line
  useradd --create-home --shell /bin/bash "$who"
  step "clone as $who" runuser -u "$who" -- git clone -q "$BUNDLE" "$dir"
  say "up as $who, no packages installed"
  if out="$(as "$who" "$dir" ./infra/stack up 2>&1)"; then echo "$out"; fail "up succeeded without the packages"; fi
  echo "$out"
  if stack_trace "$out"; then fail "up printed a stack trace"; fi
  line="$(sed -n 's/^  \(apt-get update && apt-get install .*\)$/\1/p' <<<"$out")"
  [ -n "$line" ] || fail "up did not print the apt-get line"
  step "root runs the line up printed" bash -c "DEBIAN_FRONTEND=noninteractive $line >/dev/null"
  CURRENT="$dir"
  step "up as $who" as "$who" "$dir" env $SECRETS ./infra/stack up
  step "the edge answers" healthy_edge
  step "upload, variant, avatar, signed purge through the edge" first_use "$who" "$dir"
  step "down" as "$who" "$dir" ./infra/stack down
  CURRENT=''
}

started=$SECONDS
case "${1:-}" in
  root)
    as_root /root/clones/image-cdn-stack private tests
    as_root '/root/my projects/image-cdn-stack' private
    as_root /opt/image-cdn-stack
    ;;
  user) as_user ;;
  *) echo "usage: $0 root|user"; exit 2 ;;
esac
echo "step: the whole $1 stage: $((SECONDS - started)) s"

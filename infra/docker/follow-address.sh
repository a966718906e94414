#!/bin/sh
# follow-address.sh SECONDS COMMAND NAME…: keeps a program of compose's stack at the addresses its next hops'
# names have now. nginx and varnish resolve a name when they load their config, never again; under Podman a
# container restarted or recreated alone (`docker-compose restart haproxy`, an upgrade's `up -d`) comes back
# at a new address, and the one in front of it kept sending everything to the old one until it restarted too
# (nginx to varnish, varnish to haproxy: the whole stack down). Every SECONDS this resolves each NAME as libc
# does (getent, as the program did); when the addresses differ from the last ones seen, COMMAND runs (sh -c:
# the program loads its config again and resolves anew; a failed COMMAND is tried again at the next look).
# While a name does not resolve nothing is done: the program would refuse the config, and keeps the one it
# runs. Started beside the program in its container (the components image has no Node for
# infra/follow-nodes.js, the chart's follower of nginx's varnish pods); logs to stderr.
every=$1
command=$2
shift 2

# "name=address …;" for every name, or nothing (status 1) while one does not resolve
look() {
  for name in "$@"; do
    found=$(getent ahosts "$name" | awk '{ print $1 }' | sort -u | tr '\n' ' ')
    [ -n "$found" ] || return 1
    printf '%s=%s;' "$name" "$found"
  done
}

last=$(look "$@")
while sleep "$every"; do
  now=$(look "$@") || continue
  if [ -n "$last" ] && [ "$now" != "$last" ]; then
    echo "follow-address: $now (was $last): $command" >&2
    sh -c "$command" || { echo "follow-address: '$command' failed; again at the next look" >&2; continue; }
  fi
  last=$now
done

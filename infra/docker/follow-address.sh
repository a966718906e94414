#!/bin/sh
# follow-address.sh SECONDS COMMAND NODE… [-- PROGRAM ARG…]: runs PROGRAM and keeps it at the addresses its
# next hops' names have now. nginx and varnish resolve a name when they load their config, never again; a
# next hop replaced comes back at a new address (under Podman a container restarted or recreated alone:
# `docker-compose restart haproxy`, an upgrade's `up -d`; in Kubernetes a varnish pod replaced), and the
# program in front of it kept sending everything to the old one until it restarted too (nginx to varnish,
# varnish to haproxy: the whole stack down). Each NODE is a name, name:port, or a comma-separated list of
# them (EDGE_VARNISH_NODES as it is).
# The first look (getent: libc resolves as the program will) is taken before PROGRAM starts (exec: this
# process becomes it; the follower runs beside it as its child); every SECONDS after, when the addresses
# differ from the last ones seen, COMMAND runs (sh -c, with the program's pid in $FOLLOWED: the program
# loads its config again and resolves anew). A reload only when something moved: each one closes the
# program's idle kept-alive connections, and a client may be sending on one at that moment. A failed COMMAND
# (the program not running yet, or restarting) is tried again at the next look. While a name does not
# resolve nothing is done: the program would refuse the config, and keeps the one it runs. For compose's
# nginx and varnish, the chart's nginx (the components image has no Node), and native nginx, varnish and
# haproxy with next hops by name (infra/render/supervisor.js); logs to stderr.
every=$1
command=$2
shift 2
nodes=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  nodes="$nodes $1"
  shift
done
[ $# -gt 0 ] && shift
names=$(printf '%s\n' $nodes | tr ',' '\n' | sed -e 's/:[0-9]*$//' -e '/^$/d')

# "name=address …;" for every name, or nothing (status 1) while one does not resolve
look() {
  for name in $names; do
    found=$(getent ahosts "$name" | awk '{ print $1 }' | sort -u | tr '\n' ' ')
    [ -n "$found" ] || return 1
    printf '%s=%s;' "$name" "$found"
  done
}

# every SECONDS, COMMAND when the addresses are not the last ones seen ($1: the first look); it ends with the
# program ($$, which the exec below makes PROGRAM)
follow() {
  last=$1
  while sleep "$every" && kill -0 $$ 2>/dev/null; do
    now=$(look) || continue
    [ "$now" = "$last" ] && continue
    echo "follow-address: $now (was ${last:-not resolved}): $command" >&2
    FOLLOWED=$$ sh -c "$command" || { echo "follow-address: '$command' failed; again at the next look" >&2; continue; }
    last=$now
  done
}

# no names (every node an address): nothing to follow
[ -z "$names" ] && [ $# -gt 0 ] && exec "$@"
first=$(look) || first=
[ $# -eq 0 ] && follow "$first"
follow "$first" &
exec "$@"

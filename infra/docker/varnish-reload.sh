#!/bin/sh
# varnish-reload.sh WORKDIR VCL: varnish loads its VCL again (resolving its backends' names anew) and uses it,
# then discards the ones it no longer uses (one still busy with a request that began on it stays until the
# next reload). Run by the follower of haproxy's address (follow-address.sh) in compose's varnish container,
# where there is no Node, and natively where HAPROXY_HOST is a name.
# varnish-reload.sh WORKDIR --use NAME: the same for a VCL already loaded as NAME (infra/reload.js, whose
# check of a new render is that load).
set -e
if [ "$2" = --use ]; then
  name=$3
else
  name=reload$(date +%s%N)
  varnishadm -n "$1" vcl.load "$name" "$2" >/dev/null
fi
varnishadm -n "$1" vcl.use "$name" >/dev/null
varnishadm -n "$1" vcl.list | awk '$1 == "available" { print $NF }' | while read -r old; do
  varnishadm -n "$1" vcl.discard "$old" >/dev/null 2>&1 || true
done
echo "varnish-reload: $name in use" >&2

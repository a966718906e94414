#!/bin/sh
# varnish-reload.sh WORKDIR VCL: varnish loads its VCL again (resolving its backends' names anew) and uses it,
# then discards the ones it no longer uses, as infra/reload.js does for `stack reload`. Run by the follower of
# haproxy's address (follow-address.sh) in compose's varnish container, where there is no Node, and natively
# where HAPROXY_HOST is a name.
set -e
name=reload$(date +%s%N)
varnishadm -n "$1" vcl.load "$name" "$2" >/dev/null
varnishadm -n "$1" vcl.use "$name" >/dev/null
varnishadm -n "$1" vcl.list | awk '$1 == "available" { print $NF }' | while read -r old; do
  varnishadm -n "$1" vcl.discard "$old" >/dev/null || true
done
echo "varnish-reload: $name in use" >&2

# syntax=docker/dockerfile:1
# The stack's components from Debian's packages, the same versions the native stack runs: nginx (+ its Lua
# module, which reads upload bodies under a minimum rate), varnish (+ varnish-modules for xkey), haproxy,
# redis, Prometheus and its exporters, mtail. One image, each compose service (and each pod of the Helm
# chart) runs one of them, as an unprivileged user (compose: its role's, infra/docker/add-users.sh; the chart:
# uid 10001); the varnish exporter reads varnish's shared memory, so both come from the same varnish.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      nginx libnginx-mod-http-lua varnish varnish-modules haproxy redis-server prometheus prometheus-varnish-exporter \
      prometheus-nginx-exporter prometheus-redis-exporter mtail ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
# a user per role, the same uids as the app image's; varnish's working directory is the edge's (compose runs
# varnish and its exporter as cdn-edge; the chart mounts a volume of its own there)
COPY infra/docker/add-users.sh /usr/local/sbin/
# compose's nginx and varnish follow their next hop's address (a container restarted or recreated alone)
COPY infra/docker/follow-address.sh infra/docker/varnish-reload.sh /usr/local/bin/
RUN add-users.sh && mkdir -p /stack /var/lib/varnish/stack && chown cdn-edge:cdn-edge /var/lib/varnish/stack
USER 10001

# syntax=docker/dockerfile:1
# The stack's components from Debian's packages, the same versions the native stack runs: nginx (+ its Lua
# module, which reads upload bodies under a minimum rate), varnish (+ varnish-modules for xkey), haproxy,
# redis, Prometheus and its exporters, mtail. One image, each compose service (and each pod of the Helm
# chart) runs one of them, all as the unprivileged user "cdn" (uid 10001); the varnish exporter reads
# varnish's shared memory, so both come from the same varnish.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      nginx libnginx-mod-http-lua varnish varnish-modules haproxy redis-server prometheus prometheus-varnish-exporter \
      prometheus-nginx-exporter prometheus-redis-exporter mtail ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin cdn \
 && mkdir -p /stack /data /var/lib/varnish/stack && chown cdn:cdn /stack /data /var/lib/varnish/stack
USER 10001

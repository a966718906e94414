# syntax=docker/dockerfile:1
# varnish (+ varnish-modules for xkey), its exporter and mtail from Debian's packages, exactly as the native
# stack runs them: the exporter reads varnish's shared memory, so both must come from the same varnish.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      varnish varnish-modules prometheus-varnish-exporter mtail ca-certificates \
 && rm -rf /var/lib/apt/lists/*

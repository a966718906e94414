# syntax=docker/dockerfile:1
# The image of the three Node services (origin, avatar-resolver, purge-service: SERVICE picks one) and of
# the render step, with the same install the native launcher runs (npm ci), without dev dependencies, as
# the unprivileged user of its role (the origin's "cdn-origin", uid 10001 by default; compose sets each
# service's; the same uids as the components image's: infra/docker/add-users.sh).
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY lib/package.json lib/
COPY origin/package.json origin/
COPY avatar-resolver/package.json avatar-resolver/
COPY purge-service/package.json purge-service/
RUN npm ci --omit=dev --no-audit --no-fund --workspaces

FROM ${NODE_IMAGE}
ENV NODE_ENV=production SERVICE=origin
WORKDIR /app
# the origin's system codecs (SYSTEM_CODECS): Debian's libjpeg-turbo (TurboJPEG API) and libwebp
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libturbojpeg0 libwebp7 libheif1 libde265-0 libavcodec59 \
 && rm -rf /var/lib/apt/lists/*
# a user per role (the origin's is uid 10001); /stack is root's, filled by the render step
COPY infra/docker/add-users.sh /usr/local/sbin/
RUN add-users.sh && mkdir -p /stack /data/variants /data/originals /data/archive \
  && chown -R cdn-origin:cdn-origin /data
COPY --from=deps /app/node_modules node_modules
COPY package.json .env.example LICENSE ./
COPY lib lib
COPY infra/settings.js infra/render.js infra/resolve.js infra/users.js infra/app-copy.js infra/dirs.js infra/secrets.js infra/with-secrets infra/rotate-logs.js infra/redis.conf.template infra/supervisord.conf.template infra/
COPY infra/render infra/render
COPY monitoring monitoring
COPY nginx nginx
COPY vcl vcl
COPY haproxy haproxy
COPY origin origin
COPY avatar-resolver avatar-resolver
COPY purge-service purge-service
USER 10001
# a service takes its settings from the environment; in compose from the file the render step wrote
CMD ["sh", "-c", "exec ${SERVICE}/bin/${SERVICE}"]

# syntax=docker/dockerfile:1
# One image recipe for the three Node services (build arg SERVICE), the same install step the native
# launcher runs (npm ci), without dev dependencies, running as the unprivileged "node" user.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
ARG SERVICE=origin
WORKDIR /app
COPY package.json package-lock.json ./
COPY lib/package.json lib/
COPY origin/package.json origin/
COPY avatar-resolver/package.json avatar-resolver/
COPY purge-service/package.json purge-service/
RUN npm ci --omit=dev --no-audit --no-fund --workspace lib --workspace "${SERVICE}"

FROM ${NODE_IMAGE}
ARG SERVICE=origin
ENV NODE_ENV=production SERVICE=${SERVICE}
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json .env.example ./
COPY lib lib
COPY infra/settings.js infra/render.js infra/
COPY nginx nginx
COPY vcl vcl
COPY haproxy haproxy
COPY infra/redis.conf.template infra/supervisord.conf.template infra/
COPY infra/prometheus infra/prometheus
COPY ${SERVICE} ${SERVICE}
USER node
# the settings rendered once by the compose "render" service, then the service itself
CMD ["sh", "-c", "set -a; . /stack/env; set +a; exec ${SERVICE}/bin/${SERVICE}"]

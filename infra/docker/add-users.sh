#!/bin/sh
# The stack's users in a container image: one per role of infra/users.js (ROLES), STACK_USER_PREFIX "cdn-",
# with fixed uids both images share. The render step (as root) then gives each role's files to its user as
# the native stack does, and each container runs as its role's uid: a container broken into reads its own
# secrets and configs, not the other services'.
set -eu
# the group that may read the rendered settings (STACK_DIR/env, no secrets in it): every container joins it
groupadd --gid 10100 cdn-settings
for entry in origin:10001 resolver:10002 purge:10003 haproxy:10004 edge:10005 redis:10006 metrics:10007 s3:10008; do
  useradd --uid "${entry#*:}" --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin "cdn-${entry%%:*}"
done

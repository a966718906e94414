# syntax=docker/dockerfile:1
# versitygw (Apache-2.0), the S3 server of the compose stack, built as the native launcher builds it: a Go
# module at a pinned version. Objects are files under /data/<bucket>; runs as an unprivileged user.
FROM golang:1.25-bookworm AS build
RUN GOBIN=/out go install github.com/versity/versitygw/cmd/versitygw@v1.7.0

FROM debian:bookworm-slim
COPY --from=build /out/versitygw /usr/local/bin/versitygw
RUN useradd --system --home /data versitygw && mkdir -p /data /iam && chown versitygw /data /iam
USER versitygw

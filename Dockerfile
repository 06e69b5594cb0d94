# kafka2pg in a container: a static binary on busybox, run as an unprivileged
# user. Build it with `make image` (docs/DEPLOY.md), which passes the git
# version as VERSION, or by hand:
#
#   docker build -t kafka2pg:dev --build-arg VERSION=$(git describe --tags --always --dirty) .
#   docker run --rm kafka2pg:dev version
#   docker run --rm kafka2pg:dev run --kafka-brokers kafka:9092 --kafka-group g --topic t --pg-url postgres://...
#
# The build needs BuildKit (docker buildx, Docker 23 or newer; or Podman).
# deploy/kubernetes runs the image as the USER below.
#
# docker-compose.yml builds it for the whole stack (Kafka, Postgres,
# Prometheus, Grafana).

# The build stage runs on the builder's own platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64) does
# not emulate the Go toolchain. The tag matches the go directive of go.mod.
FROM --platform=$BUILDPLATFORM golang:1.26.8 AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
# CGO_ENABLED=0: a static binary with Go's own DNS resolver, nothing to load
# at run time. -trimpath and -s -w: no build paths, no symbol tables.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kafka2pg ./cmd/kafka2pg

# The final image: busybox (about 1.5 MB, static itself) rather than scratch,
# so that the compose healthcheck has a wget to ask /readyz with and an
# operator has a shell. CA certificates come from the build stage, for
# TLS to Kafka and Postgres.
FROM busybox:1.37.0-musl
ARG VERSION=dev
LABEL org.opencontainers.image.title="kafka2pg" \
      org.opencontainers.image.description="Kafka topics materialized into PostgreSQL tables, exactly once" \
      org.opencontainers.image.source="https://github.com/kafka2pg/kafka2pg" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/kafka2pg /usr/local/bin/kafka2pg
# An unprivileged uid of its own. The binary needs no passwd entry, and no RUN
# in this stage means a multi-platform build needs no emulation.
USER 10001:10001
# In a container, /metrics, /healthz and /readyz must be reachable from
# outside it; the binary's default listens on loopback only. A flag or a
# KAFKA2PG_METRICS_ADDR given at run time wins.
ENV KAFKA2PG_METRICS_ADDR=:9187
EXPOSE 9187
# SIGTERM (docker stop) finishes in-flight batches and leaves the group (a
# static member, --kafka-instance-id, keeps its place until the session
# timeout instead); give the container more than --shutdown-timeout (30s)
# with docker stop -t, compose's stop_grace_period or Kubernetes'
# terminationGracePeriodSeconds.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/kafka2pg"]
CMD ["--help"]

# syntax=docker/dockerfile:1
# kafka-watchdog container image, for CI systems that reach a registry:
#
#   docker build -t kafka-watchdog .
#   docker run --read-only -v kw-state:/var/lib/kafka-watchdog \
#     -v $PWD/config.yaml:/etc/kafka-watchdog/config.yaml:ro -p 9644:9644 kafka-watchdog
#
# scripts/build-image builds an image with the same layout, user, entrypoint and settings
# from Debian packages only, without a registry; docs/install-container.md describes both.
# This one runs on debian:bookworm-slim with the C libraries the binary links (OpenSSL, zlib)
# and CA certificates added, so it keeps what slim has: a shell (bash, dash) and Debian's
# package tools (dpkg, apt). The image scripts/build-image makes, the one releases ship, has
# neither (scripts/check-release looks).

ARG DEBIAN_RELEASE=bookworm

FROM rust:1-${DEBIAN_RELEASE} AS build
# librdkafka is compiled from source (the image's C/C++ toolchain and make); OpenSSL and zlib
# are linked from the system, as scripts/setup arranges on a host.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl-dev pkg-config zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kafka-watchdog \
 && install -D -m 755 target/release/kafka-watchdog /out/kafka-watchdog

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 kafka-watchdog \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin kafka-watchdog \
 && install -d -o 65532 -g 65532 -m 0700 /var/lib/kafka-watchdog
COPY --from=build /out/kafka-watchdog /usr/bin/kafka-watchdog
COPY config/container.yaml /etc/kafka-watchdog/config.yaml
COPY config/example.yaml /usr/share/doc/kafka-watchdog/examples/example.yaml

# Numeric, so Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
USER 65532:65532
# Incident state, webhook spools, remediation history: keep it on a volume (the root file
# system can then be mounted read-only: nothing else is written).
VOLUME ["/var/lib/kafka-watchdog"]
EXPOSE 9644
# Probes: GET /healthz (200 while the round loops, the webhook dispatcher and the HTTP
# server make progress, 503 naming what is stuck: liveness) and GET /readyz (200 once
# every cluster completed a round: readiness), on http.listen. Kubernetes probes them over
# HTTP (the Helm chart does); the image has no HTTP client to run a Docker HEALTHCHECK with.
ENTRYPOINT ["/usr/bin/kafka-watchdog"]
CMD ["run", "-c", "/etc/kafka-watchdog/config.yaml"]

# syntax=docker/dockerfile:1
#
# The controller's image: the `nodewright` binary built with the `controller` feature (the EC2,
# SQS and Kubernetes adapters), on distroless — glibc and CA certificates, no shell, no package
# manager — running as the non-root user 65532, as the Helm chart's pod security context
# expects. Nothing is pushed anywhere; build and load it yourself (docs/install.md):
#
#   docker build -t nodewright:0.1.0 .
#
# The build stage and the runtime share Debian 12 (bookworm), so the glibc the binary links
# against is the one it runs on.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The registry and the build folder are cached between builds, not kept in the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --features controller --bin nodewright \
    && cp target/release/nodewright /usr/local/bin/nodewright

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/nodewright /usr/local/bin/nodewright
USER 65532:65532
# The event store lives on the volume the chart mounts here (read-only root file system).
VOLUME ["/var/lib/nodewright"]
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/nodewright"]
CMD ["controller"]

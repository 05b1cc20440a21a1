# syntax=docker/dockerfile:1
# The operator host image: the `host` binary plus the shipped plugins.
#
#   docker build -t operator-host:latest .
#
# Stage 1 builds the plugins (wasm32-wasip2) and the host with the workspace's
# toolchain; stage 2 is distroless (glibc + libgcc, no shell, no package
# manager), running as its non-root user. The Deployment in deploy/manager
# reads plugins from a ConfigMap; the copies in /plugins let the image also run
# on its own: `docker run operator-host run --plugin /plugins/cronjob.wasm ...`.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
# Cache mounts keep the registry and build outputs between builds; the
# results are copied out of the cached target dir within the same step. The
# host is built without its `embedded` feature: the image talks to a real
# cluster and carries no embedded API server, simulated kubelet or GC.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
    CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS="-C llvm-args=-inline-threshold=1000 -C link-arg=--initial-memory=4194304" \
      cargo build --release --locked --target wasm32-wasip2 -p cronjob -p mydeployment \
 && cargo build --release --locked -p host --no-default-features \
 && mkdir -p /out/plugins \
 && cp target/wasm32-wasip2/release/cronjob.wasm target/wasm32-wasip2/release/mydeployment.wasm /out/plugins/ \
 && cp target/release/host /out/host

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/host /usr/local/bin/host
COPY --from=build /out/plugins/ /plugins/
# Precompiled plugins go here; mount a writable volume (deploy/ uses an
# emptyDir) when the root filesystem is read-only.
ENV HOST_PLUGIN_CACHE_DIR=/var/cache/operator-host
# 65532 is distroless's `nonroot`; the Deployment's runAsUser matches.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/host"]
CMD ["--help"]

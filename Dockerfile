# syntax=docker/dockerfile:1
# The operator host image, for users with docker:
#
#   docker build -t operator-host:latest .
#
# Without docker, `cargo xtask image` builds the same image, pushes it,
# signs it with cosign and attests its SBOM (docs/operations.md). Both take
# the files from one list (xtask/src/image/rootfs.rs): here the build stage
# runs `cargo xtask image --rootfs DIR`, which writes exactly the files of
# the layer xtask pushes, and the final stage copies them into `scratch`:
#
#   /usr/local/bin/host                 the host without its embedded cluster
#   /lib/x86_64-linux-gnu/..., /lib64/  the glibc libraries it loads (ldd)
#   /plugins/*.wasm                     the shipped plugins
#   /usr/lib/operator-host/precompiled  the same, precompiled by this host
#   /etc/ssl/certs/ca-certificates.crt  Debian's CA bundle
#   /etc/passwd, /etc/group             root and nonroot (65532)
#   /home/nonroot, /var/cache/operator-host, /tmp
#
# The Deployment in deploy/manager (and the chart) reads plugins from a
# ConfigMap; the copies in /plugins let the image also run on its own:
# `docker run operator-host run --plugin /plugins/cronjob.wasm ...`.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
# Cache mounts keep the registry and build outputs between builds; the
# files are written out of the cached target dir within the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo xtask image --rootfs /out/rootfs

FROM scratch
COPY --from=build /out/rootfs/ /
# COPY sets owners to root unless told: the two directories the user writes.
COPY --from=build --chown=65532:65532 /out/rootfs/var/cache/operator-host /var/cache/operator-host
COPY --from=build --chown=65532:65532 /out/rootfs/home/nonroot /home/nonroot
# As the image configuration `cargo xtask image` writes (xtask/src/image/layout.rs).
ENV PATH=/usr/local/bin \
    HOST_PLUGIN_CACHE_DIR=/var/cache/operator-host \
    HOST_PLUGIN_PRECOMPILED_DIR=/usr/lib/operator-host/precompiled \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# 65532 is `nonroot` in /etc/passwd; the chart's runAsUser matches.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/host"]
CMD ["--help"]

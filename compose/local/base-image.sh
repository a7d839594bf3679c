#!/bin/sh
# The base image of the local override (docker-compose.local.yml), for a machine that reaches no image
# registry: a Debian bookworm root filesystem made with debootstrap (with Python, Prometheus and the
# Pushgateway from Debian), this machine's CA bundle (pip inside trusts what the host trusts), imported
# into the Docker daemon at DOCKER_HOST as llmchaos-local/debian:bookworm. The root filesystem is kept
# as a tarball under LLMCHAOS_CACHE (default ~/.cache/llmchaos) and reused. Needs root and debootstrap.
set -eu
IMAGE=llmchaos-local/debian:bookworm
CACHE=${LLMCHAOS_CACHE:-$HOME/.cache/llmchaos}
TARBALL=$CACHE/debian-bookworm-rootfs.tar
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-venv,ca-certificates,prometheus,prometheus-pushgateway

if [ ! -s "$TARBALL" ]; then
    mkdir -p "$CACHE"
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
fi
docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$IMAGE" >/dev/null
echo "$IMAGE"

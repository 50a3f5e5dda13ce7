#!/usr/bin/env bash
# Prepares what a lent GPU machine lacks for building pipecut: it has CMake,
# ninja, nvcc and a python3 with torch, but no Debian -dev packages and no
# network. Downloads the needed packages here and unpacks them into
# .gpu-deps/prefix (git-ignored), which travels with the device tool's `carry`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.gpu-deps
pkgs=(libcli11-dev nlohmann-json3-dev libgloo-dev libprotobuf-dev libprotobuf32 libprotoc32 protobuf-compiler zlib1g
      libsimdjson-dev libsimdjson14 libssl-dev libssl3 libmimalloc-dev libmimalloc2.0)
rm -rf "$dest" && mkdir -p "$dest/debs" "$dest/prefix"
(cd "$dest/debs" && apt-get download "${pkgs[@]}" >/dev/null)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/prefix"; done
rm -rf "$dest/debs" "$dest/prefix/usr/share/doc" "$dest/prefix/usr/share/man"
find "$dest/prefix" -name "*.a" -delete  # the shared libraries suffice; keeps the carry small
du -sh "$dest/prefix"

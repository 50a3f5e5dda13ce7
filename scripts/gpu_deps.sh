#!/usr/bin/env bash
# Prepares what a lent GPU machine lacks for building pipecut: it has CMake,
# ninja, nvcc and a python3 with torch, but no Debian -dev packages and no
# network. Downloads the needed packages here and unpacks them into
# .gpu-deps/prefix (git-ignored), which travels with the device tool's `carry`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/.gpu-deps
pkgs=(libcli11-dev nlohmann-json3-dev libgloo-dev libprotobuf-dev libprotobuf32 libprotoc32 protobuf-compiler zlib1g
      libsimdjson-dev libsimdjson14 libssl-dev libssl3 libmimalloc-dev libmimalloc2.0 libzip-dev libzip4 zlib1g-dev
      libxxhash-dev libxxhash0 libabsl-dev libabsl20220623)
rm -rf "$dest" && mkdir -p "$dest/debs" "$dest/prefix"
(cd "$dest/debs" && apt-get download "${pkgs[@]}" >/dev/null)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/prefix"; done
rm -rf "$dest/debs" "$dest/prefix/usr/share/doc" "$dest/prefix/usr/share/man"
find "$dest/prefix" -name "*.a" -delete  # the shared libraries suffice; keeps the carry small
# torch's ProcessGroupNCCL.hpp includes <nccl.h>. CMake looks for it beside the
# GPU machine's torch (site-packages/nvidia/nccl/include, from the nvidia-nccl
# wheel torch depends on); in case that wheel is missing there, a copy of the
# header from this machine's venv (only declarations: libtorch_cuda brings the
# library) goes into the prefix, where gpu_check.sh points CMake.
venv_nccl=$(dirname "$(dirname "$("$root/scripts/setup.sh")")")/lib/python3*/site-packages/nvidia/nccl/include
for d in $venv_nccl; do [[ -f $d/nccl.h ]] && mkdir -p "$dest/prefix/nccl/include" && cp -r "$d"/. "$dest/prefix/nccl/include/"; done
du -sh "$dest/prefix"

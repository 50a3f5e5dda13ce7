#!/usr/bin/env bash
# A torch outside the range pipecut builds against (cmake/torch_versions.cmake)
# is refused with the range named: by scripts/setup.sh before anything is
# downloaded, and at configure time for a Python whose torch is installed
# (here a stand-in: a python that names a CMake package of torch 2.9.1 or 2.99.0).
#
#   torch_range.sh SRC OUT
set -uo pipefail
src=$1 out=$2
source "$src/test/expect.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out" || exit 1
run=true  # expect.sh's nativert is not used here

expect 1 "setup.sh, torch 2.9.1" -- env PIPECUT_TORCH_VERSION=2.9.1 PIPECUT_VENV="$out/venv" bash "$src/scripts/setup.sh"
contains "setup.sh names the range" "PIPECUT_TORCH_VERSION=2.9.1: pipecut builds against torch 2.11 to 2.15"
[[ ! -e $out/venv ]] && ok || bad "setup.sh made a venv for a torch outside the range"
expect 1 "setup.sh, not a release" -- env PIPECUT_TORCH_VERSION=latest PIPECUT_VENV="$out/venv" bash "$src/scripts/setup.sh"
contains "setup.sh wants X.Y.Z" "(a release: X.Y.Z)"

for version in 2.9.1 2.99.0; do
  pkg=$out/torch-$version/share/cmake/Torch
  mkdir -p "$pkg"
  printf 'set(Torch_FOUND TRUE)\nset(TORCH_LIBRARIES torch)\n' >"$pkg/TorchConfig.cmake"
  printf 'set(PACKAGE_VERSION "%s")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' "$version" >"$pkg/TorchConfigVersion.cmake"
  printf '#!/bin/sh\necho %s\n' "$out/torch-$version/share/cmake" >"$out/python-$version"
  chmod +x "$out/python-$version"
  expect 1 "configure, torch $version" -- cmake -S "$src" -B "$out/build-$version" -G Ninja \
    -DPIPECUT_PYTHON="$out/python-$version"
  LAST_LOG=$(tr '\n' ' ' <<<"$LAST_LOG" | tr -s ' ')  # CMake wraps its messages
  contains "configure names the range, torch $version" \
    "pipecut builds against torch 2.11 to 2.15; $out/python-$version has torch $version"
done
contains "a newer torch: the way through" "-DPIPECUT_ALLOW_UNTESTED_TORCH=ON"

echo "torch_range: $pass passed, $fail failed"
[[ $fail -eq 0 ]]

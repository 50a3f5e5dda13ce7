# Sourced by build.sh, test.sh, demo.sh, asan_tests.sh: which torch to build
# against, and where that build lives. After `pipecut_torch_env`:
#   PIPECUT_PY     the Python whose torch provides LibTorch (and that
#                  pipecut compile and the tests' fixture scripts run)
#   PIPECUT_BUILD  the build directory: $PIPECUT_BUILD_DIR, else build/ for
#                  the default torch, build-torch-X.Y.Z for another, so that
#                  builds against two torches live side by side
# The torch is chosen by, first to last:
#   PIPECUT_PYTHON=/path/to/python     the torch already installed there
#   PIPECUT_TORCH_VERSION=X.Y.Z        a venv of that torch (setup.sh makes it)
#   neither                            the default (cmake/torch_versions.cmake)
pipecut_torch_env() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  PIPECUT_PY=$("$root/scripts/setup.sh")
  local default version
  default=$(sed -n 's/^set(PIPECUT_TORCH_DEFAULT \(.*\))$/\1/p' "$root/cmake/torch_versions.cmake")
  version=$("$PIPECUT_PY" -c 'import torch; print(torch.__version__.split("+")[0])')
  if [[ -n ${PIPECUT_BUILD_DIR:-} ]]; then PIPECUT_BUILD=$PIPECUT_BUILD_DIR
  elif [[ $version == "$default" ]]; then PIPECUT_BUILD=$root/build
  else PIPECUT_BUILD=$root/build-torch-$version
  fi
  export PIPECUT_PY PIPECUT_BUILD
}

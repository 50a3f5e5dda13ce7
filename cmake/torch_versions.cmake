# The torch releases pipecut builds against, one place for CMake and the
# scripts (scripts/setup.sh and scripts/torch_env.sh read these lines): the default is
# the torch of the lent GPU machines; the newest is the newest release
# built and tested here. Another torch is refused at configure time, unless
# PIPECUT_ALLOW_UNTESTED_TORCH=ON (a newer one the adapter may not cover:
# lib/emit/libtorch_compat.h).
set(PIPECUT_TORCH_DEFAULT 2.11.0)
set(PIPECUT_TORCH_OLDEST 2.11)
set(PIPECUT_TORCH_NEWEST 2.15)
# The newest release itself: what scripts/test.sh --full builds and tests
# against beside the default.
set(PIPECUT_TORCH_NEWEST_RELEASE 2.15.0)

#pragma once
// Writing an output beside its destination and putting it in place, so that
// readers of the destination never see a partial output, and a writer killed
// midway (SIGKILL, OOM, a CI timeout) leaves litter that the next writer of
// the same destination removes. Torch-free; Linux (flock, renameat2).
#include <filesystem>
#include <functional>

namespace pipecut::support {

enum class StagedKind { Directory, File };

// Sweeps stale temporaries of `dst` (see staging.cpp), creates `<dst>.tmp.<pid>`
// (an empty directory, or an empty file), calls `write(temp)`, and puts the
// temporary in place: a directory replaces an existing `dst` directory in one
// step; a file is renamed over `dst`. When `write` or putting in place throws,
// the temporary is removed and the exception propagates unchanged.
// A directory's missing parent directories are created; a file's are not.
void writeStaged(const std::filesystem::path& dst, StagedKind kind,
                 const std::function<void(const std::filesystem::path& temp)>& write);

}  // namespace pipecut::support

#pragma once
// Writing an output beside its destination and putting it in place, so that
// readers of the destination never see a partial output, and a writer killed
// midway (SIGKILL, OOM, a CI timeout) leaves litter that the next writer of
// the same destination removes; and replacing only what pipecut wrote itself.
// Torch-free; Linux (flock, renameat2).
//
// What may be replaced (checkDestination), in order:
// 1. Never, not even with `force`: `/`, the current directory, $HOME, or a
//    directory holding any of them; for a directory output, a directory
//    holding one of the command's inputs (an input directory itself may be
//    replaced when it is a previous output of this kind: a checkpoint resumed
//    and saved in place); for a file output, an input file itself; anything
//    inside an input directory (a split directory, a checkpoint).
// 2. Never: an entry of the other type (a directory where a file goes, a file
//    where a directory goes). Replacing it would lose a whole different thing.
// 3. Nothing there, or a previous output of this kind (previousOutput says
//    ""): replaced.
// 4. Anything else (a symbolic link, a file or directory pipecut did not
//    write): refused naming the path and what is in the way, unless `force`.
// Refusals are pipecut::Error of kind InvalidInput (exit 2).
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace pipecut::support {

enum class StagedKind { Directory, File };

struct Destination {
  std::filesystem::path path;
  StagedKind kind = StagedKind::File;
  // What the output is, in refusals: "split directory", "trace", ...
  std::string what;
  // Judges an existing entry of the right type at the path: "" when it is a
  // previous output of this kind, else what is in the way ("holds 2 entries
  // its manifest does not list, e.g. 'notes.txt'"). Must not throw. Unset:
  // nothing that exists is recognised.
  std::function<std::string(const std::filesystem::path&)> previousOutput;
  // The paths this command reads (files or directories); see rule 1.
  std::vector<std::filesystem::path> inputs;
  bool force = false;  // rule 4 gives way
};

// Throws pipecut::Error (InvalidInput) naming the path when `dst` may not be
// written. Commands call it for every output before any long work, so that
// a refusal comes before an hour of compute, not after.
void checkDestination(const Destination& dst);

// checkDestination, then: sweeps stale temporaries of the path (see
// staging.cpp), creates `<path>.tmp.<pid>` (an empty directory, or an empty
// file), calls `write(temp)`, and puts the temporary in place: a directory
// replaces an existing one in one step; a file is renamed over the path.
// When `write` or putting in place throws, the temporary is removed and the
// exception propagates unchanged. A directory's missing parents are created;
// a file's are not. What the OS refuses is an Error of osErrorKind's class.
void writeStaged(const Destination& dst, const std::function<void(const std::filesystem::path& temp)>& write);

// The temporary writeStaged makes for `dst` in process `pid`: "<path>.tmp.<pid>".
// (Training ranks write their checkpoint files into rank 0's.)
std::filesystem::path temporaryPath(const Destination& dst, long pid);

// A file written through writeStaged from a producer that streams bytes into
// the sink it is given (the sink throws on a failed write).
using ByteSink = std::function<void(const void* data, size_t size)>;
void writeFileStaged(const Destination& dst, const std::function<void(const ByteSink&)>& produce);

// Judges for Destination::previousOutput.
// A directory whose entries are all in `listed` (an empty one passes): "" or
// "holds N entries <whose> does not list, e.g. 'x'".
std::string unlistedEntries(const std::filesystem::path& dir, const std::vector<std::string>& listed,
                            const std::string& whose);
// A file that starts with `marker` (what pipecut writes first in it): "" or
// "is a file pipecut did not write (it does not start with <describe>)".
std::string startsWithMarker(const std::filesystem::path& file, const std::string& marker, const std::string& describe);
// A JSON file (up to 256 MiB) whose field at `pointer` (a JSON pointer,
// "/format") is the string `value`: "" or "is a file pipecut did not write (...)".
std::string jsonFieldInTheWay(const std::filesystem::path& file, const std::string& pointer, const std::string& value);
// "a directory of N entries, e.g. 'a', 'b'" (or "an empty directory"): what is there.
std::string describeDirectory(const std::filesystem::path& dir);

}  // namespace pipecut::support

#pragma once
// Files torch.export.save wrote before torch 2.9, converted on read into the
// layout the rest of pipecut knows (raw weight records plus payload-config
// JSON under one top folder):
// - torch <= 2.7: records at the zip's root: serialized_exported_program.json,
//   serialized_state_dict.pt and serialized_constants.pt (torch.save
//   pickles), serialized_example_inputs.pt, version, extra_files/*;
// - torch 2.8: the PT2 archive, but weights and constants as single pickles,
//   data/weights/<model>.pt and data/constants/<model>.pt.
// The pickles are read with LibTorch's unpickler, so the tensors land in
// memory: such a file costs its size in RAM to split (re-saving it with
// torch >= 2.9 makes the split stream from the file again).
#include <memory>

#include "pt2/zip_archive.h"

namespace pipecut::pt2 {

// `archive` itself when it is in the current layout; otherwise an archive in
// memory holding the same program in the current layout. Throws
// pipecut::Error (InvalidInput) naming the file and record when a pickle is
// unreadable or holds something other than a name -> tensor dictionary.
std::shared_ptr<const ArchiveReader> upgradeLegacyLayout(std::shared_ptr<const ArchiveReader> archive);

}  // namespace pipecut::pt2

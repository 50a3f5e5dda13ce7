// Tests only: DIR/manifest.pb rewritten from DIR/manifest.json, for tests that
// edit a split's manifest.json by hand (a wider shape, a mutation) and need
// the directory to hold both manifests, in agreement, as pipecut writes them.
// Exit 0, or 2 with the reader's message for a manifest.json it refuses.
#include <fstream>
#include <iostream>

#include "manifest/manifest.h"
#include "support/error.h"
#include "support/files.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pipecut_manifest_sync DIR\n";
    return 1;
  }
  const std::string dir = argv[1], json = dir + "/manifest.json";
  try {
    pipecut::Manifest m = pipecut::manifestFromJson(pipecut::support::readFile(json), json);
    std::ofstream(dir + "/manifest.pb", std::ios::binary | std::ios::trunc) << pipecut::manifestToBinary(m);
  } catch (const pipecut::Error& e) {
    std::cerr << "pipecut_manifest_sync: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

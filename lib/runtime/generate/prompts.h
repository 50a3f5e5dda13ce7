#pragma once
// Generation's files: the prompts it reads, the tokens it writes, and a
// reference to check them against. JSON Lines, one sequence per line:
//   prompts     {"id": 7, "prompt": [1, 2, 3]}            (id: a number or a string)
//   tokens      {"id": 7, "tokens": [9, 4], "finish": "eos"}   ("eos" or "length")
// Read strictly (torch-free): a malformed line is an Error (InvalidInput)
// naming the file and the line ("line 3: prompt[2]").
#include <cstdint>
#include <string>
#include <vector>

namespace pipecut::runtime {

struct PromptRequest {
  std::string id;                 // the id's JSON text, as given ("7", "\"b\"")
  std::vector<int64_t> tokens;    // at least one
};

struct GeneratedSequence {
  std::string id;                 // as PromptRequest::id
  std::vector<int64_t> tokens;
  std::string finish;             // "eos" or "length"
};

// Refuses an empty file, a line that is not an object with "id" and a
// non-empty "prompt" of integers, two prompts with one id.
std::vector<PromptRequest> readPrompts(const std::string& path);

// The output's lines, in the prompts' order (what writeSequences writes).
std::string sequencesJsonl(const std::vector<GeneratedSequence>& sequences);

// A file of sequencesJsonl's lines (a reference for --check-tokens).
std::vector<GeneratedSequence> readSequences(const std::string& path);

// For support::Destination::previousOutput: "" when `path` is a tokens file
// pipecut-run wrote (its first line has exactly id, tokens and finish).
std::string sequencesInTheWay(const std::string& path);

// The first difference of `got` from `want` (by id, token by token), as
// "prompt 7: position 3: token 12, the reference has 40", or "".
std::string compareSequences(const std::vector<GeneratedSequence>& got, const std::vector<GeneratedSequence>& want);

}  // namespace pipecut::runtime

#include "runtime/generate/prompts.h"

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "support/files.h"

namespace pipecut::runtime {

namespace {

using Json = nlohmann::json;

// Each non-empty line of `text`, with its 1-based number.
std::vector<std::pair<size_t, std::string>> numberedLines(const std::string& text) {
  std::vector<std::pair<size_t, std::string>> out;
  size_t start = 0, number = 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos) out.emplace_back(number, line);
    start = end + 1;
    ++number;
  }
  return out;
}

Json parseLine(const std::string& path, size_t number, const std::string& line) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(ErrorKind::InvalidInput, path, "line " + std::to_string(number), "not a JSON object");
  return j;
}

std::string idOf(const std::string& path, const std::string& at, const Json& j) {
  auto id = j.find("id");
  if (id == j.end() || !(id->is_number_integer() || id->is_string()))
    throw Error(ErrorKind::InvalidInput, path, at + ": id", "expected a whole number or a string");
  return id->dump();
}

std::vector<int64_t> tokensOf(const std::string& path, const std::string& at, const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) throw Error(ErrorKind::InvalidInput, path, at + ": " + key, "expected an array of token ids");
  std::vector<int64_t> out;
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& t = (*it)[k];
    if (!t.is_number_integer() || t.get<int64_t>() < 0)
      throw Error(ErrorKind::InvalidInput, path, at + ": " + key + "[" + std::to_string(k) + "]",
                  "expected a token id (a whole number >= 0), got " + t.dump().substr(0, 40));
    out.push_back(t.get<int64_t>());
  }
  return out;
}

}  // namespace

std::vector<PromptRequest> readPrompts(const std::string& path) {
  std::vector<PromptRequest> out;
  std::set<std::string> ids;
  for (const auto& [number, line] : numberedLines(support::readFile(path, "the prompts"))) {
    const std::string at = "line " + std::to_string(number);
    Json j = parseLine(path, number, line);
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "id" && it.key() != "prompt")
        throw Error(ErrorKind::InvalidInput, path, at, "unknown field (a prompt has \"id\" and \"prompt\")");
    PromptRequest p;
    p.id = idOf(path, at, j);
    p.tokens = tokensOf(path, at, j, "prompt");
    if (p.tokens.empty()) throw Error(ErrorKind::InvalidInput, path, at + ": prompt", "is empty (prompt " + p.id + ")");
    if (!ids.insert(p.id).second) throw Error(ErrorKind::InvalidInput, path, at + ": id", "prompt " + p.id + " is given twice");
    out.push_back(std::move(p));
  }
  if (out.empty()) throw Error(ErrorKind::InvalidInput, path, "", "holds no prompts");
  return out;
}

std::string sequencesJsonl(const std::vector<GeneratedSequence>& sequences) {
  std::string out;
  for (const auto& s : sequences) {
    out += "{\"id\": " + s.id + ", \"tokens\": [";
    for (size_t k = 0; k < s.tokens.size(); ++k) out += (k ? ", " : "") + std::to_string(s.tokens[k]);
    out += "], \"finish\": \"" + s.finish + "\"}\n";
  }
  return out;
}

std::vector<GeneratedSequence> readSequences(const std::string& path) {
  std::vector<GeneratedSequence> out;
  for (const auto& [number, line] : numberedLines(support::readFile(path, "the reference tokens"))) {
    const std::string at = "line " + std::to_string(number);
    Json j = parseLine(path, number, line);
    GeneratedSequence s;
    s.id = idOf(path, at, j);
    s.tokens = tokensOf(path, at, j, "tokens");
    auto f = j.find("finish");
    if (f != j.end() && f->is_string()) s.finish = f->get<std::string>();
    out.push_back(std::move(s));
  }
  return out;
}

std::string sequencesInTheWay(const std::string& path) {
  const std::string notOurs = "is a file pipecut did not write (its first line is not a generated sequence)";
  std::ifstream in(path);
  std::string first;
  if (!std::getline(in, first)) return notOurs;
  Json j = Json::parse(first, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.size() != 3 || !j.contains("id") || !j.contains("tokens") ||
      !j.contains("finish"))
    return notOurs;
  return "";
}

std::string compareSequences(const std::vector<GeneratedSequence>& got, const std::vector<GeneratedSequence>& want) {
  std::map<std::string, const GeneratedSequence*> byId;
  for (const auto& w : want) byId.emplace(w.id, &w);
  for (const auto& g : got) {
    auto it = byId.find(g.id);
    if (it == byId.end()) return "prompt " + g.id + ": the reference has no such prompt";
    const auto& w = it->second->tokens;
    for (size_t k = 0; k < std::max(g.tokens.size(), w.size()); ++k) {
      if (k < g.tokens.size() && k < w.size() && g.tokens[k] == w[k]) continue;
      std::string mine = k < g.tokens.size() ? "token " + std::to_string(g.tokens[k]) : "no token (the sequence ended)";
      std::string theirs = k < w.size() ? std::to_string(w[k]) : "no token (it ended)";
      return "prompt " + g.id + ": position " + std::to_string(k) + ": " + mine + ", the reference has " + theirs;
    }
  }
  return "";
}

}  // namespace pipecut::runtime

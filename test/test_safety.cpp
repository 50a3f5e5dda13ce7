// What protects a user's files and a run from strangers, torch-free:
// support/staging.h's destination rules, runtime/control_messages.h's
// messages, runtime/stage_failure.h's reading of LibTorch's failures,
// support/exit_status.h's classes, and pipecut-run's option parsing.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <catch2/catch.hpp>

#include "../tools/pipecut-run/options.h"
#include "runtime/control_messages.h"
#include "runtime/stage_failure.h"
#include "support/error.h"
#include "support/exit_status.h"
#include "support/staging.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace pipecut;

namespace {

fs::path safetyDir(const std::string& name) {
  fs::path d = test::outPath("safety/" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The refusal's text, or "allowed".
std::string judge(const support::Destination& d) {
  try {
    support::checkDestination(d);
    return "allowed";
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
}

support::Destination dirOutput(const fs::path& p, std::vector<fs::path> inputs = {}, bool force = false) {
  support::Destination d;
  d.path = p;
  d.kind = support::StagedKind::Directory;
  d.what = "split directory";
  d.previousOutput = [](const fs::path& dir) { return support::unlistedEntries(dir, {"manifest.pb"}, "its manifest"); };
  d.inputs = std::move(inputs);
  d.force = force;
  return d;
}

support::Destination fileOutput(const fs::path& p, std::vector<fs::path> inputs = {}, bool force = false) {
  support::Destination d;
  d.path = p;
  d.what = "trace";
  d.previousOutput = [](const fs::path& f) { return support::startsWithMarker(f, "OURS", "'OURS'"); };
  d.inputs = std::move(inputs);
  d.force = force;
  return d;
}

}  // namespace

TEST_CASE("destinations: only what pipecut wrote is replaced, --force lifts that and nothing else", "[safety]") {
  fs::path root = safetyDir("dest");
  fs::path model = root / "models" / "m.pt2";
  fs::create_directories(model.parent_path());
  put(model, "model");
  fs::create_directories(root / "mine");
  put(root / "mine" / "notes.txt", "notes");

  // Nothing there: allowed. A previous output (only listed files): allowed.
  CHECK(judge(dirOutput(root / "new", {model})) == "allowed");
  fs::create_directories(root / "prev");
  put(root / "prev" / "manifest.pb", "m");
  CHECK(judge(dirOutput(root / "prev", {model})) == "allowed");
  // A directory of other files: refused unless forced, naming what is in the way.
  CHECK(judge(dirOutput(root / "mine", {model})) ==
        (root / "mine").string() + ": holds 1 entry its manifest does not list: 'notes.txt'; pipecut replaces only "
                                   "its own split directory (--force replaces it anyway)");
  CHECK(judge(dirOutput(root / "mine", {model}, true)) == "allowed");
  // Never, even forced: the input's directory or an ancestor, the current directory, /.
  CHECK_THAT(judge(dirOutput(root / "models", {model}, true)),
             Catch::Contains("models: holds this command's input '" + model.string() + "'; pipecut never replaces it"));
  CHECK_THAT(judge(dirOutput(root, {model}, true)), Catch::Contains("holds this command's input"));
  CHECK_THAT(judge(dirOutput(".", {}, true)), Catch::EndsWith(".: is the current directory; pipecut never replaces it"));
  CHECK_THAT(judge(dirOutput("/", {}, true)), Catch::EndsWith("is the root directory; pipecut never replaces it"));
  // The other type is never replaced.
  CHECK_THAT(judge(dirOutput(model, {}, true)), Catch::Contains("exists and is not a directory"));
  CHECK_THAT(judge(fileOutput(root / "mine", {}, true)), Catch::Contains("is a directory; the trace is a file"));
  // Files: an input itself, never; inside an input directory, never.
  CHECK_THAT(judge(fileOutput(model, {model}, true)), Catch::Contains("is this command's input"));
  CHECK_THAT(judge(fileOutput(root / "prev" / "x.json", {root / "prev"}, true)),
             Catch::Contains("lies inside this command's input"));
  // A file of someone else's: refused; ours: allowed.
  put(root / "t.json", "not ours");
  CHECK_THAT(judge(fileOutput(root / "t.json")), Catch::Contains("is a file pipecut did not write (it does not start with 'OURS')"));
  put(root / "t.json", "OURS and more");
  CHECK(judge(fileOutput(root / "t.json")) == "allowed");
  // A link is replaced, not followed: refused unless forced.
  fs::create_symlink("nowhere", root / "link");
  CHECK_THAT(judge(fileOutput(root / "link")), Catch::Contains("is a symbolic link (to 'nowhere')"));
  CHECK(judge(fileOutput(root / "link", {}, true)) == "allowed");
  // An input directory that is itself a previous output of this kind may be
  // replaced (a checkpoint resumed and saved in place); any other may not.
  CHECK(judge(dirOutput(root / "prev", {root / "prev"}, false)) == "allowed");
  CHECK_THAT(judge(dirOutput(root / "mine", {root / "mine"}, true)), Catch::Contains("is this command's input"));
}

TEST_CASE("destinations: writeStaged refuses before writing and leaves what was there", "[safety]") {
  fs::path root = safetyDir("staged");
  put(root / "t.json", "theirs");
  bool wrote = false;
  CHECK_THROWS(support::writeStaged(fileOutput(root / "t.json"), [&](const fs::path&) { wrote = true; }));
  CHECK_FALSE(wrote);
  CHECK(slurp(root / "t.json") == "theirs");
  support::writeFileStaged(fileOutput(root / "t.json", {}, true), [](const support::ByteSink& sink) { sink("OURS", 4); });
  CHECK(slurp(root / "t.json") == "OURS");
  for (const auto& e : fs::directory_iterator(root)) CHECK(e.path().filename() == "t.json");
}

TEST_CASE("exit classes: the OS's refusals are the environment's (6) or the user's path (2), never a bug (3)", "[safety]") {
  CHECK(osErrorKind(ENOSPC) == ErrorKind::Environment);
  CHECK(osErrorKind(EROFS) == ErrorKind::Environment);
  CHECK(osErrorKind(EACCES) == ErrorKind::Environment);
  CHECK(osErrorKind(EBUSY) == ErrorKind::Environment);
  CHECK(osErrorKind(ENOENT) == ErrorKind::InvalidInput);
  CHECK(osErrorKind(EISDIR) == ErrorKind::InvalidInput);
  auto status = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return support::exitStatusFor(std::current_exception(), "t");
    }
    return 0;
  };
  CHECK(status([] { throwOsError("/x", "write", ENOSPC); }) == 6);
  CHECK(status([] { throw fs::filesystem_error("f", "/x", std::make_error_code(std::errc::read_only_file_system)); }) == 6);
  CHECK(status([] { throw fs::filesystem_error("f", "/x", std::make_error_code(std::errc::no_such_file_or_directory)); }) == 2);
  CHECK(status([] { throw std::bad_alloc(); }) == 6);
  CHECK(status([] { throw std::logic_error("a bug"); }) == 3);
}

TEST_CASE("store messages: typed, strict, sealed under a secret", "[safety]") {
  using namespace runtime::control;
  auto refused = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::RankFailed);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Round trips.
  Hello h{2, 4242, std::string(kNonceBytes, 'n')};
  CHECK(decodeHello(encodeHello(h), 2).pid == 4242);
  AbortNotice a{AbortCode::PeerSilent, 0, 3, 0};
  CHECK(describe(decodeAbort(encodeAbort(a), 4)) == "rank 3 is dead or frozen: no heartbeat (seen by rank 0)");
  CHECK(decodeNumbers(encodeNumbers({1.5, 0}), 2, true, "x") == std::vector<double>{1.5, 0});
  // A stranger's text is never an abort, and never shown.
  CHECK_THAT(refused([] { decodeAbort("STRANGER says stop", 2); }), !Catch::Contains("STRANGER"));
  CHECK_THAT(refused([&] { decodeAbort(encodeAbort({AbortCode::PeerLost, 0, 7, 0}), 2); }),
             Catch::Contains("names a peer outside the world"));
  CHECK_THAT(refused([&] { decodeHello(encodeHello(h), 1); }), Catch::Contains("names another rank"));
  CHECK_THAT(refused([] { decodeNumbers(encodeNumbers({std::nan("")}), 4, true, "busy"); }),
             Catch::Contains("holds a value that cannot be one"));
  CHECK_THAT(refused([] { decodeNumbers(encodeNumbers({1, 2, 3}), 2, false, "busy"); }), Catch::Contains("wrong size"));
  // Sealed: a tag over name and payload, per run.
  MacKey k1 = runKey("0123456789abcdef", {"a", "b"}), k2 = runKey("0123456789abcdef", {"a", "c"});
  std::string sealed = seal(k1, "abort", encodeAbort(a));
  CHECK(unseal(k1, "abort", sealed) == encodeAbort(a));
  CHECK_THAT(refused([&] { unseal(k2, "abort", sealed); }), Catch::Contains("does not verify under PIPECUT_RDZV_SECRET"));
  CHECK_THAT(refused([&] { unseal(k1, "hb/1", sealed); }), Catch::Contains("does not verify"));
  std::string flipped = sealed;
  flipped[3] ^= 1;
  CHECK_THAT(refused([&] { unseal(k1, "abort", flipped); }), Catch::Contains("does not verify"));
  CHECK_THAT(refused([&] { unseal(k1, "abort", "short"); }), Catch::Contains("carries no tag"));
  CHECK(runKey("", {"a"}).empty());  // no secret: unsealed
  CHECK(seal(MacKey{}, "abort", "x") == "x");
}

TEST_CASE("stage failures: the node and the cause out of LibTorch's text", "[safety]") {
  // TorchScript's interpreter (as torch 2.11 prints it for an index out of range).
  std::string ts =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript, serialized code (most recent call last):\n"
      "  File \"code/__torch__/pipecut.py\", line 57, in forward\n"
      "    _0 = ops.prim.device(input_ids)\n"
      "    embedding = torch.embedding(weight, input_ids)\n"
      "                ~~~~~~~~~~~~~~~ <--- HERE\n"
      "\n"
      "Traceback of TorchScript, original code (most recent call last):\n"
      "RuntimeError: index out of range in self\n";
  runtime::StageFailure f = runtime::parseStageFailure(ts);
  CHECK(f.node == "embedding");
  CHECK(f.expression == "torch.embedding");
  CHECK(f.cause == "index out of range in self");
  CHECK(runtime::describeFailingNode(f) == "node 'embedding' (torch.embedding)");
  // An inlined call: the failing expression is not the whole right side.
  std::string inlined = ts;
  inlined.replace(inlined.find("    embedding = torch.embedding(weight, input_ids)\n                ~~~~~~~~~~~~~~~"),
                  std::string("    embedding = torch.embedding(weight, input_ids)\n                ~~~~~~~~~~~~~~~").size(),
                  "    add = torch.add(torch.embedding(weight, input_ids), 1)\n                    ~~~~~~~~~~~~~~~");
  f = runtime::parseStageFailure(inlined);
  CHECK(f.node.empty());
  CHECK(runtime::describeFailingNode(f) == "at torch.embedding");
  // NativeRT.
  f = runtime::parseStageFailure(
      "Exception while executing node: %floor_divide = torch.ops.aten.floor_divide.default(self=%sym_size_int, "
      "other=2)\nExpected Tensor but got Int\nException raised from ...\n");
  CHECK(f.node == "floor_divide");
  CHECK(f.expression == "torch.ops.aten.floor_divide.default");
  CHECK(f.cause == "Expected Tensor but got Int");
  // Anything else: its first line, control characters made harmless.
  f = runtime::parseStageFailure("something \x1b[31mred\nmore");
  CHECK(f.node.empty());
  CHECK(f.cause == "something  [31mred");
}

TEST_CASE("pipecut-run options: ranges and lists checked when parsed", "[safety]") {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), "pipecut-run");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return cli::parseRunCommand(static_cast<int>(argv.size()), argv.data());
  };
  auto usage = [&](std::vector<std::string> args, const std::string& needle) {
    cli::RunCommand c = parse(args);
    CHECK(c.mode == cli::RunCommand::Mode::Exit);
    CHECK(c.exitCode == 1);
    CHECK_THAT(c.text, Catch::Contains(needle));
  };
  usage({"D", "--random-inputs", "--iterations", "0"}, "--iterations: expected a whole number >= 1, got 0");
  usage({"D", "--random-inputs", "--stage-ranks", "0junk,0.9"}, "--stage-ranks: expected ranks separated by commas");
  usage({"D", "--random-inputs", "--stage-ranks", "a,b"}, "--stage-ranks");
  usage({"D", "--random-inputs", "--timeout", "nan"}, "--timeout: expected a finite number, got 'nan'");
  usage({"D", "--random-inputs", "--timeout", "-1"}, "--timeout: expected a positive number of seconds");
  usage({"D", "--train", "--data", "x", "--steps", "0"}, "--steps: expected a whole number >= 1, got 0");
  usage({"D", "--train", "--data", "x", "--lr", "nan"}, "--lr: expected a finite number, got 'nan'");
  usage({"D", "--train", "--data", "x", "--betas", "0.9,1"}, "--betas: expected two numbers in [0, 1)");
  usage({"D", "--random-inputs", "--expect-manifest", "abc"}, "--expect-manifest: expected 64 hex digits");
  usage({"D", "--random-inputs", "--expect-manifest", std::string(64, 'a'), "--no-verify"}, "excludes");
  usage({"D", "--random-inputs", "--cpu-matmul", "mkl"}, "--cpu-matmul: expected auto, onednn or blas");
  usage({"D", "--train", "--data", "x", "--cpu-matmul", "onednn"}, "excludes");  // training runs ATen's BLAS
  cli::RunCommand ok = parse({"D", "--random-inputs", "--stage-ranks", "0,0,1", "--timeout", "2.5", "-m", "3"});
  REQUIRE(ok.mode == cli::RunCommand::Mode::Run);
  CHECK(ok.inference.session.stageRanks == std::vector<int>{0, 0, 1});
  CHECK(ok.inference.session.timeoutSeconds == 2.5);
  CHECK(ok.inference.session.microbatches == 3);
  CHECK(ok.inference.session.cpuMatmul == runtime::CpuMatmul::Auto);
  CHECK(parse({"D", "--generate", "--prompts", "p", "--cpu-matmul", "blas"}).generate.session.cpuMatmul ==
        runtime::CpuMatmul::Blas);
  CHECK(parse({"D", "--random-inputs", "--cpu-matmul", "onednn"}).inference.session.cpuMatmul ==
        runtime::CpuMatmul::OneDnn);
  cli::RunCommand help = parse({"--help"});
  CHECK(help.mode == cli::RunCommand::Mode::Exit);
  CHECK(help.exitCode == 0);
  CHECK_THAT(help.text, Catch::Contains("--expect-manifest"));
  cli::RunCommand version = parse({"--version"});
  CHECK(version.exitCode == 0);
  CHECK(version.text == std::string("pipecut-run ") + PIPECUT_VERSION + " (LibTorch " + PIPECUT_LIBTORCH_VERSION +
                            (PIPECUT_HAVE_NATIVERT ? ")\n" : ", without NativeRT)\n"));
}

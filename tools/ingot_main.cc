// Copyright ingot authors. Apache-2.0.
//
// The ingot command: one entry point, one subcommand per concern.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ingot/version.h"
#include "ingot_source_commit.h"
#include "build_command.h"
#include "compare_command.h"
#include "generate_command.h"
#include "tune_command.h"
#include "inspect_command.h"
#include "run_command.h"

namespace {
void usage(std::ostream& os) {
  os << "ingot " << ingot::version() << " - ONNX inference compiler and runtime\n\n"
     << "usage: ingot <command> [options]\n\n"
     << "commands:\n"
     << "  build MODEL   build an engine from an ONNX model (ingot build --help)\n"
     << "  run MODEL     run an engine or an ONNX model on random or given inputs (ingot run --help)\n"
     << "  compare MODEL compare an engine's outputs with the reference interpreter (ingot compare --help)\n"
     << "  tune          search build routes for the fastest engine within an accuracy threshold (ingot tune --help)\n"
     << "  generate GGUF generate text with a Llama-family GGUF model on the CPU (ingot generate --help)\n"
     << "  inspect FILE  show a model's graph before/after optimization, or an engine's steps and memory\n"
     << "                (ingot inspect --help)\n"
     << "  serve         serve a model repository over the KServe v2 protocol (ingot serve --help)\n"
     << "\n"
     << "options:\n"
     << "  -h, --help    this help (ingot <command> --help for a command's options)\n"
     << "  --version     print the version\n";
}
// `ingot serve` is the program ingot-serve beside this one (see serve_main.cc).
int run_serve(const char* argv0, const std::vector<std::string>& rest) {
  std::string self;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) self.assign(buf, static_cast<size_t>(n));
  else self = argv0;
  std::string dir = self.find('/') == std::string::npos ? "." : self.substr(0, self.rfind('/'));
  std::string prog = dir + "/ingot-serve";
  std::vector<std::string> args = {prog};
  args.insert(args.end(), rest.begin(), rest.end());
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execv(prog.c_str(), cargs.data());
  std::cerr << "ingot: serve needs the program '" << prog << "' (built with the server's dependencies, see README): "
            << std::strerror(errno) << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    usage(std::cerr);
    return 2;
  }
  const std::string& cmd = args[0];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(std::cout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::cout << "ingot " << ingot::version() << " (commit " << INGOT_SOURCE_COMMIT << ")\n";
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "run") return ingot::tools::run_command(rest);
  if (cmd == "build") return ingot::tools::build_command(rest);
  if (cmd == "inspect") return ingot::tools::inspect_command(rest);
  if (cmd == "compare") return ingot::tools::compare_command(rest);
  if (cmd == "generate") return ingot::tools::generate_command(rest);
  if (cmd == "tune") return ingot::tools::tune_command(rest);
  if (cmd == "serve") return run_serve(argv[0], rest);
  std::cerr << "ingot: unknown command '" << cmd << "' (see ingot --help)\n";
  return 2;
}

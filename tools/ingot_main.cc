// Copyright ingot authors. Apache-2.0.
//
// The ingot command: one entry point, one subcommand per concern.
#include <iostream>
#include <string>
#include <vector>

#include "ingot/version.h"
#include "build_command.h"
#include "compare_command.h"
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
     << "  inspect FILE  show a model's graph before/after optimization, or an engine's steps and memory\n"
     << "                (ingot inspect --help)\n"
     << "\n"
     << "options:\n"
     << "  -h, --help    this help (ingot <command> --help for a command's options)\n"
     << "  --version     print the version\n";
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
    std::cout << "ingot " << ingot::version() << "\n";
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "run") return ingot::tools::run_command(rest);
  if (cmd == "build") return ingot::tools::build_command(rest);
  if (cmd == "inspect") return ingot::tools::inspect_command(rest);
  if (cmd == "compare") return ingot::tools::compare_command(rest);
  std::cerr << "ingot: unknown command '" << cmd << "' (see ingot --help)\n";
  return 2;
}

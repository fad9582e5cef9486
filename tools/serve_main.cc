// Copyright ingot authors. Apache-2.0.
//
// ingot-serve: the server half of the ingot command, a program of its own so that `ingot` itself
// needs no server libraries (gRPC, cpp-httplib, prometheus-cpp) where it only builds and runs
// engines, e.g. on a GPU machine. `ingot serve ...` runs this program with the same arguments.
#include <string>
#include <vector>

#include "serve_command.h"
#include "serve_llm_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (ingot::tools::is_llm_serve(args)) return ingot::tools::serve_llm_command(args);
  return ingot::tools::serve_command(args);
}

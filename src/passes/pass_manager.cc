// Copyright ingot authors. Apache-2.0.
#include "passes/pass_manager.h"
#include "passes/passes.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ir/op_registry.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace ingot::passes {

void PassManager::add(std::unique_ptr<Pass> pass) {
  PipelineStage s;
  s.passes.push_back(std::move(pass));
  stages_.push_back(std::move(s));
}

void PassManager::add_fixed_point(std::vector<std::unique_ptr<Pass>> passes, int max_rounds) {
  PipelineStage s;
  s.passes = std::move(passes);
  s.max_rounds = max_rounds;
  stages_.push_back(std::move(s));
}

std::vector<std::string> PassManager::pass_names() const {
  std::vector<std::string> names;
  for (const auto& s : stages_)
    for (const auto& p : s.passes) names.push_back(p->name());
  return names;
}

namespace {
Status dump(const ir::Graph& g, const std::string& dir, int index, const std::string& name) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d_", index);
  std::string path = dir + "/" + prefix + name + ".ir";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // the folder is made when missing, as trtexec's options do
  if (ec) return make_status(StatusCode::kIoError, "cannot create the IR dump folder '", dir, "': ", ec.message());
  std::ofstream f(path);
  if (!f) return make_status(StatusCode::kIoError, "cannot write IR dump '", path, "'");
  f << ir::to_text(g);
  return Status::Ok();
}
}  // namespace

Status PassManager::run(ir::Graph& g, const PipelineOptions& options, PassContext& ctx) const {
  std::vector<std::string> names = pass_names();
  // Passes the builder runs itself after its layout choice are disabled by the same option.
  for (const char* n : builder_pass_names()) names.push_back(n);
  for (const auto& d : options.disabled)
    if (std::find(names.begin(), names.end(), d) == names.end()) {
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      return invalid_argument("unknown pass '", d, "' (passes: ", all, ")");
    }
  bool verify = options.verify;
#ifndef NDEBUG
  verify = true;
#endif
  int dump_index = 0;
  if (!options.dump_dir.empty()) INGOT_RETURN_IF_ERROR(dump(g, options.dump_dir, dump_index++, "input"));
  for (const auto& stage : stages_) {
    for (int round = 0; round < stage.max_rounds; ++round) {
      bool any = false;
      for (const auto& pass : stage.passes) {
        if (options.disabled.count(pass->name())) continue;
        auto changed = pass->run(g, ctx);
        if (!changed.ok())
          return Status(changed.status().code(), std::string("pass ") + pass->name() + ": " + changed.status().message());
        if (!*changed) continue;
        any = true;
        INGOT_RETURN_IF_ERROR(g.topological_sort());
        if (verify) {
          Status v = ir::verify_graph(g);
          if (!v.ok()) return internal_error("after pass ", pass->name(), ": ", v.message());
        }
        if (!options.dump_dir.empty()) INGOT_RETURN_IF_ERROR(dump(g, options.dump_dir, dump_index++, pass->name()));
      }
      if (!any) break;
    }
  }
  return ir::infer_graph(g);
}

}  // namespace ingot::passes

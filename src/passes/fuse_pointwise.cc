// Copyright ingot authors. Apache-2.0.
//
// fuse_pointwise: gathers maximal trees of elementwise ops into one ingot::Pointwise node whose
// `body` attribute holds the ops as a subgraph, so the CUDA backend can generate one kernel
// that reads each input once and writes only the final value.
//
// Matches elementwise ops of the default domain (unary math and activations, broadcasting
// binary arithmetic/comparison/logic, Where, Clip, PRelu, and the Casts of is_plain_cast) and
// ingot::Silu / ingot::Gelu, joined
// through values read by exactly one node and not graph outputs. Runs after fuse_conv_gemm so
// layer epilogues go to FusedConv/FusedGemm first.
// Refuses: a lone op (nothing to gain), ops with several outputs, values read outside the tree
// (they must still be materialised), Casts from float to integer types and of float8 or strings,
// ops inside subgraphs.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"

namespace ingot::passes {

std::unique_ptr<passes::Pass> make_fuse_pointwise();

namespace {

constexpr const char* kName = "fuse_pointwise";

using fusion::is_elementwise;

class FusePointwise final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(ir::Graph& g, PassContext& ctx) override {
    bool changed = false;
    std::set<const ir::Node*> grouped;
    // Roots are visited last-to-first so every tree is found from its final op.
    std::vector<ir::Node*> order;
    for (const auto& n : g.nodes()) order.push_back(n.get());
    std::vector<std::vector<ir::Node*>> groups;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ir::Node* root = *it;
      if (grouped.count(root) || !is_elementwise(*root)) continue;
      std::vector<ir::Node*> group{root};
      grouped.insert(root);
      for (size_t i = 0; i < group.size(); ++i) {
        for (ir::Value* v : group[i]->inputs()) {
          ir::Node* p = v ? v->producer() : nullptr;
          if (!p || grouped.count(p) || !is_elementwise(*p) || fusion::single_consumer(g, v) != group[i]) continue;
          group.push_back(p);
          grouped.insert(p);
        }
      }
      if (group.size() >= 2) groups.push_back(group);
    }
    for (auto& group : groups) {
      INGOT_RETURN_IF_ERROR(fuse(g, group));
      changed = true;
    }
    if (changed) {
      g.set_opset_import(kIngotDomain, 1);
      ctx.note(kName, "fused " + std::to_string(groups.size()) + " pointwise group(s)");
    }
    return changed;
  }

 private:
  Status fuse(ir::Graph& g, std::vector<ir::Node*> group) {
    std::sort(group.begin(), group.end(), [&g](const ir::Node* a, const ir::Node* b) {
      return fusion::node_index(g, a) < fusion::node_index(g, b);
    });
    std::set<const ir::Node*> members(group.begin(), group.end());
    auto body = std::make_shared<ir::Graph>("pointwise", &g);
    std::map<const ir::Value*, ir::Value*> inner;
    std::vector<ir::Value*> outer_inputs;
    for (ir::Node* n : group) {
      std::vector<ir::Value*> ins;
      for (ir::Value* v : n->inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        if (!inner.count(v)) {
          // Produced outside the tree: becomes an input of the fused node and of the body.
          inner[v] = body->add_input(v->name(), v->dtype(), v->shape());
          outer_inputs.push_back(v);
        }
        ins.push_back(inner[v]);
      }
      ir::Value* o = n->output(0);
      inner[o] = body->add_value(o->name(), o->dtype(), o->shape());
      body->add_node(n->op_type(), ins, {inner[o]}, n->attrs(), n->name(), n->domain());
    }
    ir::Node* root = group.back();
    body->add_output(inner[root->output(0)]);
    ir::Attributes attrs;
    ir::Attribute a;
    a.type = ir::AttrType::kGraph;
    a.g = body;
    attrs.set("body", std::move(a));
    std::string name = root->name().empty() ? "" : root->name() + "_pointwise";
    INGOT_ASSIGN_OR_RETURN(ir::Node* fused, fusion::replace_with_fused(g, "Pointwise", kIngotDomain, outer_inputs,
                                                                      std::move(attrs), name, root->output(0), group));
    (void)fused;
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<passes::Pass> make_fuse_pointwise() { return std::make_unique<FusePointwise>(); }

}  // namespace ingot::passes

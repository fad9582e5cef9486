// Copyright ingot authors. Apache-2.0.
#include "passes/packed_projection.h"

#include <optional>

#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

bool is_plain_matmul(const ir::Node* n) { return n && n->domain().empty() && n->op_type() == "MatMul"; }

/// A projection's attributes as a FusedGemm's (a plain MatMul is {kind="matmul"}).
ir::Attributes projection_attrs(const ir::Node* p) {
  ir::Attributes a = p->attrs();
  if (is_plain_matmul(p)) a.set_string("kind", "matmul");
  return a;
}

}  // namespace

bool is_packable_projection(const ir::Node* n) {
  if (is_plain_matmul(n)) return n->inputs().size() == 2;
  return n && n->domain() == kIngotDomain && n->op_type() == "FusedGemm" &&
         n->attrs().get_string("kind", "gemm") == "matmul" && n->attrs().get_string("activation", "").empty() &&
         n->inputs().size() <= 3;
}

Result<ir::Node*> add_packed_projection(ir::Graph& g, const std::vector<const ir::Node*>& projs,
                                        const ir::Shape& out_shape, const std::string& base, std::string* why) {
  if (projs.empty()) return internal_error("add_packed_projection: no projections");
  ir::Value* x = projs[0]->input(0);
  std::vector<Tensor> weights, biases;
  bool any_bias = false;
  for (const ir::Node* p : projs) {
    if (!is_packable_projection(p)) return (*why = p->describe() + " is not a projection without an epilogue", nullptr);
    if (p->input(0) != x) return (*why = "the projections read different inputs", nullptr);
    if (!same_scalar_attrs(projection_attrs(p), projection_attrs(projs[0])))
      return (*why = "the projections differ in attributes", nullptr);
    std::optional<Tensor> w = constant_value(p->input(1));
    if (!w || w->rank() != 2) return (*why = p->describe() + " has no constant 2-D weight", nullptr);
    if (!weights.empty() && (w->dim(0) != weights[0].dim(0) || w->dtype() != weights[0].dtype()))
      return (*why = "the weights differ in K or type", nullptr);
    std::optional<Tensor> b;
    if (p->inputs().size() > 2 && p->input(2) != nullptr) {
      b = constant_value(p->input(2));
      if (!b || b->numel() != w->dim(1) || b->dtype() != w->dtype())
        return (*why = p->describe() + " has a bias that is not a constant [N]", nullptr);
      any_bias = true;
    } else {
      INGOT_ASSIGN_OR_RETURN(Tensor z, Tensor::zeros(w->dtype(), {w->dim(1)}));
      b = std::move(z);
    }
    INGOT_ASSIGN_OR_RETURN(Tensor flat, b->reshaped({w->dim(1)}));
    weights.push_back(std::move(*w));
    biases.push_back(std::move(flat));
  }
  ir::Value* out = g.add_value(unique_value_name(g, base, "."), projs[0]->output(0)->dtype(), out_shape);
  ir::Attributes cat;
  cat.set_int("axis", 1);
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> w_cat, eval_op("Concat", weights, cat, &g));
  ir::Value* w = make_initializer(g, base + "_weight", std::move(w_cat[0]));
  ir::Node* gemm;
  if (any_bias) {
    cat.set_int("axis", 0);
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> b_cat, eval_op("Concat", biases, cat, &g));
    ir::Value* b = make_initializer(g, base + "_bias", std::move(b_cat[0]));
    gemm = g.add_node("FusedGemm", {x, w, b}, {out}, projection_attrs(projs[0]), base, kIngotDomain);
  } else {  // no bias and no epilogue: a plain product
    gemm = g.add_node("MatMul", {x, w}, {out}, ir::Attributes(), base);
  }
  for (const ir::Node* p : projs) gemm->absorb_origins(*p);
  return gemm;
}

}  // namespace ingot::passes

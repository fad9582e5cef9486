// Copyright ingot authors. Apache-2.0.
//
// FlatBuffer -> Plan. The buffer is verified first, so every field read here is in bounds;
// what the verifier cannot know (ids, dtypes, tensor sizes, weight ranges, that a node reads
// only values in scope) is checked here, each failure an error naming what is wrong. A decode
// budget proportional to the metadata size stops files whose tables share data from expanding
// into huge graphs.
#include <cstring>
#include <algorithm>

#include "engine/engine_format.h"
#include "engine/engine_generated.h"
#include "engine/engine_metadata.h"

namespace ingot::engine::detail {
namespace {

namespace fbs = ::flatbuffers;

Status corrupt(const std::string& what) { return invalid_model("engine metadata is corrupt: ", what); }

class Decoder {
 public:
  Decoder(size_t meta_size, const uint8_t* weights, size_t weights_size, std::shared_ptr<const void> owner)
      : weights_(weights), weights_size_(weights_size), owner_(std::move(owner)),
        budget_(4 * static_cast<uint64_t>(meta_size) + (1u << 16)) {}

  Result<builder::Plan> decode(const fb::Engine& e) {
    builder::Plan plan;
    if (!e.graph()) return corrupt("no graph");
    plan.graph = std::make_shared<ir::Graph>(e.graph()->name() ? e.graph()->name()->str() : "main");
    INGOT_RETURN_IF_ERROR(decode_graph(*e.graph(), plan.graph.get()));
    if (e.steps()) {
      for (const fb::Step* s : *e.steps()) {
        INGOT_RETURN_IF_ERROR(charge(1));
        builder::Step step;
        if (s->node() != -1) {
          if (s->node() < 0 || static_cast<uint64_t>(s->node()) >= nodes_.size()) return corrupt("step names node id out of range");
          step.node = nodes_[static_cast<size_t>(s->node())];
        }
        INGOT_ASSIGN_OR_RETURN(step.tactic, str(s->tactic()));
        if (s->params()) {
          INGOT_RETURN_IF_ERROR(charge(s->params()->size()));
          step.params.assign(s->params()->begin(), s->params()->end());
        }
        step.workspace_bytes = s->workspace_bytes();
        plan.steps.push_back(std::move(step));
      }
    }
    if (e.values()) {
      for (const fb::ValuePlan* p : *e.values()) {
        INGOT_RETURN_IF_ERROR(charge(1));
        builder::ValuePlan vp;
        if (p->value() != -1) {
          if (p->value() < 0 || static_cast<uint64_t>(p->value()) >= values_.size()) return corrupt("value plan names value id out of range");
          vp.value = values_[static_cast<size_t>(p->value())];
        }
        if (p->storage() > static_cast<uint8_t>(builder::Storage::kOutputView)) return corrupt("unknown storage kind");
        vp.storage = static_cast<builder::Storage>(p->storage());
        vp.offset = p->offset();
        vp.max_bytes = p->max_bytes();
        vp.first_step = p->first_step();
        vp.last_step = p->last_step();
        plan.values.push_back(vp);
      }
      for (const builder::ValuePlan& vp : plan.values)
        if (vp.storage == builder::Storage::kOutputView &&
            (!vp.value || vp.offset >= plan.values.size() ||
             plan.values[static_cast<size_t>(vp.offset)].storage != builder::Storage::kBinding))
          return corrupt("a value planned in an output's binding names no output");
    }
    if (e.profiles()) {
      for (const fb::Profile* p : *e.profiles()) {
        builder::Profile profile;
        if (p->inputs()) {
          for (const fb::ProfileDims* d : *p->inputs()) {
            builder::ProfileDims pd;
            INGOT_ASSIGN_OR_RETURN(pd.input, str(d->input()));
            INGOT_ASSIGN_OR_RETURN(pd.min, longs(d->min()));
            INGOT_ASSIGN_OR_RETURN(pd.opt, longs(d->opt()));
            INGOT_ASSIGN_OR_RETURN(pd.max, longs(d->max()));
            profile.inputs.push_back(std::move(pd));
          }
        }
        plan.profiles.push_back(std::move(profile));
      }
    }
    if (const fb::MemorySummary* m = e.memory()) {
      plan.memory.arena_bytes = m->arena_bytes();
      plan.memory.weight_bytes = m->weight_bytes();
      plan.memory.lower_bound_bytes = m->lower_bound_bytes();
      plan.memory.workspace_bytes = m->workspace_bytes();
    }
    return plan;
  }

 private:
  Status charge(uint64_t n) {
    if (n > budget_) return corrupt("more data than the metadata size allows (shared or looping tables)");
    budget_ -= n;
    return Status::Ok();
  }
  Result<std::string> str(const fbs::String* s) {
    if (!s) return std::string();
    INGOT_RETURN_IF_ERROR(charge(s->size() + 1));
    return s->str();
  }
  Result<std::vector<std::string>> strs(const fbs::Vector<fbs::Offset<fbs::String>>* v) {
    std::vector<std::string> out;
    if (!v) return out;
    INGOT_RETURN_IF_ERROR(charge(v->size()));
    out.reserve(v->size());
    for (const fbs::String* s : *v) {
      INGOT_ASSIGN_OR_RETURN(std::string x, str(s));
      out.push_back(std::move(x));
    }
    return out;
  }
  Result<std::vector<int64_t>> longs(const fbs::Vector<int64_t>* v) {
    if (!v) return std::vector<int64_t>();
    INGOT_RETURN_IF_ERROR(charge(v->size()));
    // The verifier checks a vector's length field for 4-byte alignment only, so a crafted file
    // can put 8-byte elements at a 4-byte boundary: copy bytes instead of loading int64s.
    std::vector<int64_t> out(v->size());
    if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
    return out;
  }

  Result<Tensor> decode_tensor(const fb::Tensor* t) {
    if (!t || t->dtype() == 0) return Tensor();
    if (!is_valid_data_type(t->dtype())) return corrupt("unknown tensor dtype " + std::to_string(t->dtype()));
    DataType dtype = static_cast<DataType>(t->dtype());
    INGOT_ASSIGN_OR_RETURN(Shape64 shape, longs(t->dims()));
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0) return corrupt("negative tensor dim");
      if (d != 0 && numel > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return corrupt("tensor too large");
      numel *= static_cast<uint64_t>(d);
    }
    if (dtype == DataType::kString) {
      INGOT_ASSIGN_OR_RETURN(std::vector<std::string> s, strs(t->strings()));
      if (s.size() != numel) return corrupt("string tensor holds " + std::to_string(s.size()) + " strings for " + std::to_string(numel) + " elements");
      return Tensor::from_strings(std::move(shape), std::move(s));
    }
    uint64_t bytes = storage_bytes(dtype, static_cast<int64_t>(numel));
    if (t->weights_size() != bytes) return corrupt("tensor data size does not match its shape");
    if (t->weights_offset() % kEngineAlignment != 0) return corrupt("misaligned tensor in the weights section");
    if (t->weights_offset() > weights_size_ || bytes > weights_size_ - t->weights_offset())
      return corrupt("tensor data lies outside the weights section");
    return Tensor::borrow(dtype, std::move(shape), weights_ + t->weights_offset(), owner_);
  }

  Result<ir::Value*> value_ref(int64_t id, bool allow_null) {
    if (id == -1 && allow_null) return static_cast<ir::Value*>(nullptr);
    if (id < 0 || static_cast<uint64_t>(id) >= values_.size()) return corrupt("value id out of range");
    ir::Value* v = values_[static_cast<size_t>(id)];
    if (std::find(scope_.begin(), scope_.end(), v->owner()) == scope_.end())
      return corrupt("value '" + v->name() + "' used outside its graph's scope");
    return v;
  }

  Result<ir::Attribute> decode_attr(const fb::Attribute& fa, ir::Graph* owner) {
    ir::Attribute a;
    if (fa.type() < 0 || fa.type() > static_cast<int32_t>(ir::AttrType::kGraphs)) return corrupt("unknown attribute type");
    a.type = static_cast<ir::AttrType>(fa.type());
    a.f = fa.f();
    a.i = fa.i();
    INGOT_ASSIGN_OR_RETURN(a.s, str(fa.s()));
    INGOT_ASSIGN_OR_RETURN(a.t, decode_tensor(fa.t()));
    if (fa.g()) { INGOT_ASSIGN_OR_RETURN(a.g, subgraph(*fa.g(), owner)); }
    if (fa.floats()) {
      INGOT_RETURN_IF_ERROR(charge(fa.floats()->size()));
      a.floats.assign(fa.floats()->begin(), fa.floats()->end());
    }
    INGOT_ASSIGN_OR_RETURN(a.ints, longs(fa.ints()));
    INGOT_ASSIGN_OR_RETURN(a.strings, strs(fa.strings()));
    if (fa.tensors()) {
      for (const fb::Tensor* t : *fa.tensors()) {
        INGOT_RETURN_IF_ERROR(charge(1));
        INGOT_ASSIGN_OR_RETURN(Tensor x, decode_tensor(t));
        a.tensors.push_back(std::move(x));
      }
    }
    if (fa.graphs()) {
      for (const fb::Graph* g : *fa.graphs()) {
        if (!g) return corrupt("null subgraph");
        INGOT_ASSIGN_OR_RETURN(std::shared_ptr<ir::Graph> sg, subgraph(*g, owner));
        a.graphs.push_back(std::move(sg));
      }
    }
    // Consumers dereference the payload of the declared kind: it must be there.
    if ((a.type == ir::AttrType::kGraph && !a.g) || (a.type == ir::AttrType::kTensor && !a.t.defined()))
      return corrupt("attribute of kind " + std::string(ir::attr_type_name(a.type)) + " without its value");
    return a;
  }

  Result<std::shared_ptr<ir::Graph>> subgraph(const fb::Graph& fg, ir::Graph* parent) {
    INGOT_ASSIGN_OR_RETURN(std::string name, str(fg.name()));
    auto g = std::make_shared<ir::Graph>(name, parent);
    INGOT_RETURN_IF_ERROR(decode_graph(fg, g.get()));
    return g;
  }

  Status decode_graph(const fb::Graph& fg, ir::Graph* g) {
    INGOT_RETURN_IF_ERROR(charge(1));
    scope_.push_back(g);
    if (fg.first_value_id() != static_cast<int64_t>(values_.size())) return corrupt("value ids out of order");
    const size_t first = values_.size();
    if (fg.values()) {
      for (const fb::Value* fv : *fg.values()) {
        INGOT_RETURN_IF_ERROR(charge(1));
        if (fv->dtype() != 0 && !is_valid_data_type(fv->dtype())) return corrupt("unknown value dtype");
        ir::Shape shape;
        if (!fv->rank_known()) shape = ir::Shape::unknown_rank();
        if (fv->dims()) {
          INGOT_RETURN_IF_ERROR(charge(fv->dims()->size()));
          for (const fb::Dim* d : *fv->dims()) {
            if (d->symbol()) {
              INGOT_ASSIGN_OR_RETURN(std::string s, str(d->symbol()));
              shape.mutable_dims().push_back(ir::Dim::symbol(std::move(s)));
            } else {
              shape.mutable_dims().push_back(ir::Dim(d->value()));
            }
          }
        }
        INGOT_ASSIGN_OR_RETURN(std::string name, str(fv->name()));
        ir::Value* v = g->add_value(name, static_cast<DataType>(fv->dtype()), shape);
        INGOT_ASSIGN_OR_RETURN(std::string kind, str(fv->non_tensor_kind()));
        if (!kind.empty()) v->set_non_tensor_kind(std::move(kind));
        values_.push_back(v);
      }
    }
    auto local = [&](int64_t id) -> Result<ir::Value*> {
      if (id < static_cast<int64_t>(first) || static_cast<uint64_t>(id) >= values_.size())
        return corrupt("graph '" + g->name() + "' names a value it does not own");
      return values_[static_cast<size_t>(id)];
    };
    if (fg.initializers()) {
      INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> ids1_, longs(fg.initializers()));
      for (int64_t id : ids1_) {
        INGOT_ASSIGN_OR_RETURN(ir::Value* v, local(id));
        const fb::Value* fv = fg.values()->Get(static_cast<fbs::uoffset_t>(id - static_cast<int64_t>(first)));
        if (!fv->initializer() || v->initializer()) return corrupt("bad initializer '" + v->name() + "'");
        INGOT_ASSIGN_OR_RETURN(Tensor t, decode_tensor(fv->initializer()));
        if (!t.defined()) return corrupt("initializer '" + v->name() + "' has no data");
        DataType dtype = v->dtype();
        ir::Shape shape = v->shape();
        g->set_initializer(v, std::move(t));
        v->set_dtype(dtype);  // a pass may have retyped it; keep what was written
        v->set_shape(std::move(shape));
      }
    }
    if (fg.inputs()) {
      INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> ids2_, longs(fg.inputs()));
      for (int64_t id : ids2_) {
        INGOT_ASSIGN_OR_RETURN(ir::Value* v, local(id));
        g->add_input_existing(v);
      }
    }
    if (fg.nodes()) {
      for (const fb::Node* fn : *fg.nodes()) {
        INGOT_RETURN_IF_ERROR(charge(1));
        std::vector<ir::Value*> ins, outs;
        if (fn->inputs()) {
          INGOT_RETURN_IF_ERROR(charge(fn->inputs()->size()));
          INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> ids3_, longs(fn->inputs()));
          for (int64_t id : ids3_) {
            INGOT_ASSIGN_OR_RETURN(ir::Value* v, value_ref(id, true));
            ins.push_back(v);
          }
        }
        if (fn->outputs()) {
          INGOT_RETURN_IF_ERROR(charge(fn->outputs()->size()));
          INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> ids4_, longs(fn->outputs()));
          for (int64_t id : ids4_) {
            ir::Value* v = nullptr;
            if (id != -1) {
              INGOT_ASSIGN_OR_RETURN(v, local(id));
              if (v->producer() || std::find(outs.begin(), outs.end(), v) != outs.end())
                return corrupt("value '" + v->name() + "' has two producers");
            }
            outs.push_back(v);
          }
        }
        ir::Attributes attrs;
        if (fn->attrs()) {
          for (const fb::Attribute* fa : *fn->attrs()) {
            INGOT_ASSIGN_OR_RETURN(std::string name, str(fa->name()));
            INGOT_ASSIGN_OR_RETURN(ir::Attribute a, decode_attr(*fa, g));
            // A repeated name would drop the first attribute (and free its subgraph, whose
            // nodes other records may name): a writer never produces one.
            if (attrs.has(name)) return corrupt("attribute '" + name + "' appears twice on a node");
            attrs.set(name, std::move(a));
          }
        }
        INGOT_ASSIGN_OR_RETURN(std::string op, str(fn->op_type()));
        INGOT_ASSIGN_OR_RETURN(std::string domain, str(fn->domain()));
        INGOT_ASSIGN_OR_RETURN(std::string name, str(fn->name()));
        INGOT_ASSIGN_OR_RETURN(std::vector<std::string> origins, strs(fn->origins()));
        ir::Node* n = g->add_node(op, ins, outs, std::move(attrs), name, domain);
        for (const auto& o : origins) n->add_origin(o);
        nodes_.push_back(n);
      }
    }
    if (fg.outputs()) {
      std::vector<ir::Value*> outs;
      INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> ids5_, longs(fg.outputs()));
      for (int64_t id : ids5_) {
        INGOT_ASSIGN_OR_RETURN(ir::Value* v, value_ref(id, false));
        outs.push_back(v);
      }
      g->set_outputs(std::move(outs));
    }
    if (fg.opsets()) {
      for (const fb::OpsetImport* o : *fg.opsets()) {
        INGOT_ASSIGN_OR_RETURN(std::string d, str(o->domain()));
        g->set_opset_import(d, o->version());
      }
    }
    scope_.pop_back();
    return Status::Ok();
  }

  const uint8_t* weights_;
  size_t weights_size_;
  std::shared_ptr<const void> owner_;
  uint64_t budget_;
  std::vector<ir::Value*> values_;
  std::vector<ir::Node*> nodes_;
  std::vector<const ir::Graph*> scope_;
};

}  // namespace

Result<builder::Plan> decode_metadata(const uint8_t* meta, size_t meta_size, const uint8_t* weights,
                                      size_t weights_size, std::shared_ptr<const void> owner) {
  // Depth: each subgraph level costs about four tables (Graph, Node, Attribute, Graph).
  // Tables: at least 4 bytes each, so a buffer without sharing has at most size / 4.
  fbs::Verifier::Options opts;
  opts.max_depth = 256;
  opts.max_tables = static_cast<fbs::uoffset_t>(std::min<size_t>(meta_size / 4 + 1024, 1u << 30));
  fbs::Verifier verifier(meta, meta_size, opts);
  if (!fb::VerifyEngineBuffer(verifier)) return corrupt("FlatBuffers verification failed");
  return Decoder(meta_size, weights, weights_size, std::move(owner)).decode(*fb::GetEngine(meta));
}

}  // namespace ingot::engine::detail

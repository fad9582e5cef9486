// Copyright ingot authors. Apache-2.0.
//
// Einsum: equation parsing (shared with the CPU kernel through einsum_parse) and inference.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "ir/ops/all_ops.h"

namespace ingot::ir {

/// Parses an Einsum equation for inputs of the given ranks. Labels are ints: letters map to
/// 0..51 ('a'..'z', 'A'..'Z'); the k-th ellipsis dim (of `*num_ellipsis`, right-aligned per
/// input) maps to 52 + k. Repeated labels within one operand are diagonals. The output is the
/// explicit right-hand side, or (implicit form) the ellipsis dims followed by the letters that
/// occur exactly once, in alphabetical order. Returns an error message or "" on success.
std::string einsum_parse(const std::string& equation, const std::vector<size_t>& ranks,
                         std::vector<std::vector<int>>* in_labels, std::vector<int>* out_labels,
                         int* num_ellipsis) {
  std::string eq;
  for (char ch : equation)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms;
  {
    size_t start = 0;
    while (true) {
      size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (terms.size() != ranks.size())
    return "equation has " + std::to_string(terms.size()) + " operands but the node has " +
           std::to_string(ranks.size()) + " inputs";
  auto letter = [](char ch) -> int {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
    return -1;
  };
  // Pass 1: letters and ellipsis position per term; count ellipsis dims.
  struct Term {
    std::vector<int> before, after;
    bool has_ellipsis = false;
  };
  auto split_term = [&](const std::string& t, Term* out) -> std::string {
    size_t i = 0;
    while (i < t.size()) {
      if (t.compare(i, 3, "...") == 0) {
        if (out->has_ellipsis) return "more than one ellipsis in '" + t + "'";
        out->has_ellipsis = true;
        i += 3;
        continue;
      }
      int l = letter(t[i]);
      if (l < 0) return std::string("bad character '") + t[i] + "' in equation";
      (out->has_ellipsis ? out->after : out->before).push_back(l);
      ++i;
    }
    return "";
  };
  std::vector<Term> parsed(terms.size());
  int ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    std::string e = split_term(terms[k], &parsed[k]);
    if (!e.empty()) return e;
    int letters = static_cast<int>(parsed[k].before.size() + parsed[k].after.size());
    int rank = static_cast<int>(ranks[k]);
    if (parsed[k].has_ellipsis) {
      if (rank < letters) return "operand " + std::to_string(k) + " has rank " + std::to_string(rank) +
                                 " but its term '" + terms[k] + "' needs more";
      ell = std::max(ell, rank - letters);
    } else if (rank != letters) {
      return "operand " + std::to_string(k) + " has rank " + std::to_string(rank) + " but its term '" +
             terms[k] + "' has " + std::to_string(letters) + " labels";
    }
  }
  in_labels->assign(terms.size(), {});
  std::vector<int> count(52, 0);
  for (size_t k = 0; k < terms.size(); ++k) {
    std::vector<int>& L = (*in_labels)[k];
    L = parsed[k].before;
    if (parsed[k].has_ellipsis) {
      int e = static_cast<int>(ranks[k]) - static_cast<int>(parsed[k].before.size() + parsed[k].after.size());
      for (int j = ell - e; j < ell; ++j) L.push_back(52 + j);
    }
    L.insert(L.end(), parsed[k].after.begin(), parsed[k].after.end());
    for (int l : parsed[k].before) ++count[l];
    for (int l : parsed[k].after) ++count[l];
  }
  out_labels->clear();
  if (explicit_out) {
    Term t;
    std::string e = split_term(rhs, &t);
    if (!e.empty()) return e;
    *out_labels = t.before;
    if (t.has_ellipsis)
      for (int j = 0; j < ell; ++j) out_labels->push_back(52 + j);
    out_labels->insert(out_labels->end(), t.after.begin(), t.after.end());
    std::vector<int> seen(52, 0);
    for (int l : *out_labels) {
      if (l >= 52) continue;
      if (seen[l]++) return "output label repeated in '" + rhs + "'";
      if (count[l] == 0) return "output label not among the inputs in '" + rhs + "'";
    }
  } else {
    for (int j = 0; j < ell; ++j) out_labels->push_back(52 + j);
    // Alphabetical: uppercase sorts before lowercase in ASCII (numpy uses ASCII order).
    for (int l = 26; l < 52; ++l)
      if (count[l] == 1) out_labels->push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[l] == 1) out_labels->push_back(l);
  }
  *num_ellipsis = ell;
  return "";
}

namespace {

Status infer_einsum(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  std::string eq = c.attrs().get_string("equation", "");
  std::vector<size_t> ranks;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.rank_known()) {
      c.set_output(0, dt, Shape::unknown_rank());
      return Status::Ok();
    }
    ranks.push_back(s.rank());
  }
  std::vector<std::vector<int>> in_labels;
  std::vector<int> out_labels;
  int ell = 0;
  std::string err = einsum_parse(eq, ranks, &in_labels, &out_labels, &ell);
  if (!err.empty()) return c.error(err);
  // Size of each label: a known size wins over 1 (broadcast); symbols are kept when all agree.
  std::vector<Dim> size(52 + ell, Dim(1));
  std::vector<bool> set(52 + ell, false);
  for (size_t k = 0; k < in_labels.size(); ++k) {
    const Shape& s = c.input_shape(k);
    for (size_t j = 0; j < in_labels[k].size(); ++j) {
      int l = in_labels[k][j];
      const Dim& d = s[j];
      if (!set[l]) {
        size[l] = d;
        set[l] = true;
        continue;
      }
      const Dim& cur = size[l];
      if (d.is_known() && d.value() == 1) continue;
      if (cur.is_known() && cur.value() == 1) {
        size[l] = d;
        continue;
      }
      if (d.is_known() && cur.is_known()) {
        if (d.value() != cur.value())
          return c.error("label dims differ: ", cur.value(), " vs ", d.value());
        continue;
      }
      if (d != cur) size[l] = d.is_known() ? d : (cur.is_known() ? cur : Dim::unknown());
    }
  }
  std::vector<Dim> out;
  for (int l : out_labels) out.push_back(size[l]);
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

}  // namespace

void register_nn_einsum_ops(OpRegistry& r) {
  r.add("Einsum").inputs(1, -1).outputs(1, 1).opsets(12).attr("equation", AttrType::kString, true).infer(infer_einsum);
}

}  // namespace ingot::ir

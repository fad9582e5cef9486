// Copyright ingot authors. Apache-2.0.
//
// `ingot inspect --diff A.json B.json`: two per-step profiles (`ingot run ENGINE --export-profile`)
// side by side, the habit TensorRT users are taught for upgrades (save a baseline profile, compare
// the next one to find where a regression came from).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ingot/status.h"

namespace ingot::tools {

struct ProfileStep {
  std::string name, op, tactic, precision;
  std::vector<std::string> origins;  ///< the model nodes the step stands for
  double ms = 0;
};

/// An --export-profile file: its steps in engine order and how many runs their medians cover.
struct Profile {
  std::vector<ProfileStep> steps;
  int runs = 0;
  /// How its steps were timed ("timing": "device: ..." or "host: ..."); "" in files written before
  /// the field (host wall time then).
  std::string timing;
};

/// Reads an --export-profile file (nlohmann/json); errors name the file and what is wrong.
Result<Profile> read_profile_file(const std::string& path);

/// One row of the diff: a step of A, of B, or of both (matched by name, then by a shared origin).
struct DiffRow {
  const ProfileStep* a = nullptr;
  const ProfileStep* b = nullptr;
  double delta_ms() const { return (b ? b->ms : 0) - (a ? a->ms : 0); }
};

/// Rows for every step of A and of B, the largest |change| first.
std::vector<DiffRow> diff_profiles(const std::vector<ProfileStep>& a, const std::vector<ProfileStep>& b);

/// The report (table, totals, tactics changed, steps that appeared or went) on `os`, and with
/// `svg_path` a chart of the rows with the largest changes. 0, or 1 with one line on stderr.
int profile_diff_command(const std::string& a_path, const std::string& b_path, const std::string& svg_path,
                         std::ostream& os);

}  // namespace ingot::tools

// Copyright ingot authors. Apache-2.0.
//
// Text inside the SVG charts the tools draw (inspect's timing chart, the profile diff).
#pragma once

#include <string>

namespace ingot::tools {

/// `s` as XML text or attribute content: the five markup characters escaped, the control
/// characters XML 1.0 does not allow dropped.
inline std::string xml_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') r += c;
    }
  }
  return r;
}

}  // namespace ingot::tools

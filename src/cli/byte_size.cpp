#include "cli/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace folio::cli {
namespace {

Status bad(const std::string& text, const std::string& why) {
  return Status::error("'" + text + "' is not a memory size (" + why +
                       "); use bytes or a number with K, M, G or T, e.g. 512M or 1.5G");
}

// The multiplier of a suffix such as "", "K", "MB", "GiB" (case-insensitive); 0 if unknown.
double suffix_multiplier(std::string suffix) {
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() >= 2 && suffix.ends_with("B")) suffix.pop_back();  // "MB" -> "M"
  if (suffix.size() == 2 && suffix.ends_with("I")) suffix.pop_back();  // "MI" (from MiB) -> "M"
  if (suffix.empty() || suffix == "B") return 1.0;
  if (suffix == "K") return 1024.0;
  if (suffix == "M") return 1024.0 * 1024.0;
  if (suffix == "G") return 1024.0 * 1024.0 * 1024.0;
  if (suffix == "T") return 1024.0 * 1024.0 * 1024.0 * 1024.0;
  return 0.0;
}

}  // namespace

Expected<int64_t> parse_byte_size(const std::string& text) {
  if (text.empty()) return bad(text, "empty");
  // strtod alone would also take "inf", "nan" and hex; only digits and one point are sizes.
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  if (end == 0) return bad(text, "no number");
  const std::string number = text.substr(0, end);
  char* parsed_end = nullptr;
  const double value = std::strtod(number.c_str(), &parsed_end);
  if (parsed_end != number.c_str() + number.size()) return bad(text, "malformed number");
  const double multiplier = suffix_multiplier(text.substr(end));
  if (multiplier == 0.0) return bad(text, "unknown unit '" + text.substr(end) + "'");
  const double bytes = std::floor(value * multiplier);
  if (!(bytes >= 1.0)) return bad(text, "must be at least one byte");
  if (bytes >= 9.2e18) return bad(text, "too large");
  return static_cast<int64_t>(bytes);
}

}  // namespace folio::cli

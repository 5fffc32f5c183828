/// \file llmsim/core/error.hpp
/// The one error path of llmsim.
///
/// Every check calls `detail::report_error`, which is deliberately not `constexpr`:
/// - in a constant expression (a `static_assert`, a `constexpr` variable) reaching it is a hard
///   compile error, and the compiler prints the call line, which carries the rule as a literal;
/// - at run time it throws `llmsim::config_error` whose message restates the rule with the values:
///   `llmsim::strategy: strategy.tp_size=3 must divide model.head_num=32`.
#pragma once

#include <llmsim/version.hpp>

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

LLMSIM_BEGIN_NAMESPACE

/// A configuration that breaks a rule. `file()` is empty unless the spec came from a file.
class config_error : public std::runtime_error {
 public:
  config_error(std::string api, std::string field, std::string rule, std::string file = {})
      : std::runtime_error(compose(api, rule, file)),
        api_(std::move(api)),
        field_(std::move(field)),
        rule_(std::move(rule)),
        file_(std::move(file)) {}

  /// The API that refused the input, e.g. `llmsim::strategy`.
  [[nodiscard]] const std::string& api() const noexcept { return api_; }
  /// The offending field as a dotted path, e.g. `strategy.tp_size` (may be empty).
  [[nodiscard]] const std::string& field() const noexcept { return field_; }
  /// The rule restated with the values, e.g. `strategy.tp_size=3 must divide model.head_num=32`.
  [[nodiscard]] const std::string& rule() const noexcept { return rule_; }
  /// The file the field was read from (empty for specs built in code).
  [[nodiscard]] const std::string& file() const noexcept { return file_; }

  /// The same error, now known to come from `file`.
  [[nodiscard]] config_error in_file(std::string file) const { return {api_, field_, rule_, std::move(file)}; }

 private:
  static std::string compose(const std::string& api, const std::string& rule, const std::string& file) {
    std::string out;
    if (!file.empty()) out += file + ": ";
    out += api + ": " + rule;
    return out;
  }
  std::string api_, field_, rule_, file_;
};

namespace detail {

inline void append_value(std::string& out, std::string_view v) { out += v; }
inline void append_value(std::string& out, const char* v) { out += v; }
inline void append_value(std::string& out, const std::string& v) { out += v; }
inline void append_value(std::string& out, bool v) { out += v ? "true" : "false"; }
inline void append_value(std::string& out, char v) { out += v; }
template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
void append_value(std::string& out, T v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}
template <class T>
  requires requires(const T& t) { t.view(); }
void append_value(std::string& out, const T& v) {
  out += v.view();
}

/// Replaces each `{}` of `rule` with the next value.
template <class... Values>
std::string format_rule(std::string_view rule, const Values&... values) {
  std::string out;
  out.reserve(rule.size() + 16 * sizeof...(Values));
  std::size_t pos = 0;
  [[maybe_unused]] auto next = [&](const auto& value) {
    const auto hole = rule.find("{}", pos);
    if (hole == std::string_view::npos) return;
    out.append(rule.substr(pos, hole - pos));
    append_value(out, value);
    pos = hole + 2;
  };
  (next(values), ...);
  out.append(rule.substr(pos));
  return out;
}

/// Refuses a configuration. Not constexpr on purpose: see the file comment.
/// Keep each call on one line so the compiler's note shows the whole rule.
template <class... Values>
[[noreturn]] void report_error(std::string_view api, std::string_view field, std::string_view rule,
                               const Values&... values) {
  throw config_error(std::string(api), std::string(field), format_rule(rule, values...));
}

}  // namespace detail
LLMSIM_END_NAMESPACE

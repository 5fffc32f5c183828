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
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
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

/// One value substituted into a rule: an integer, a number, a flag or a text.
class rule_value {
 public:
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) constexpr rule_value(T v)
      : kind_(kind::integer), integer_(static_cast<std::int64_t>(v)) {}      // NOLINT(google-explicit-constructor)
  constexpr rule_value(double v) : kind_(kind::number), number_(v) {}        // NOLINT(google-explicit-constructor)
  constexpr rule_value(bool v) : kind_(kind::flag), integer_(v ? 1 : 0) {}   // NOLINT(google-explicit-constructor)
  constexpr rule_value(std::string_view v) : kind_(kind::text), text_(v) {}  // NOLINT(google-explicit-constructor)
  constexpr rule_value(const char* v) : kind_(kind::text), text_(v) {}       // NOLINT(google-explicit-constructor)
  template <class T>
  requires requires(const T& t) { std::string_view(t.view()); }
  constexpr rule_value(const T& v) : kind_(kind::text), text_(v.view()) {}  // NOLINT(google-explicit-constructor)

  void append_to(std::string& out) const {
    char buf[64];
    switch (kind_) {
      case kind::integer:
        out.append(buf, std::to_chars(buf, buf + sizeof buf, integer_).ptr);
        break;
      case kind::number:
        out.append(buf, std::to_chars(buf, buf + sizeof buf, number_).ptr);
        break;
      case kind::flag:
        out += integer_ != 0 ? "true" : "false";
        break;
      case kind::text:
        out += text_;
        break;
    }
  }

 private:
  enum class kind : unsigned char { integer, number, flag, text };
  kind kind_;
  std::int64_t integer_ = 0;
  double number_ = 0;
  std::string_view text_ = {};
};

/// Replaces each `{}` of `rule` with the next value.
inline std::string format_rule(std::string_view rule, std::initializer_list<rule_value> values) {
  std::string out;
  out.reserve(rule.size() + 16 * values.size());
  std::size_t pos = 0;
  for (const auto& value : values) {
    const auto hole = rule.find("{}", pos);
    if (hole == std::string_view::npos) break;
    out.append(rule.substr(pos, hole - pos));
    value.append_to(out);
    pos = hole + 2;
  }
  out.append(rule.substr(pos));
  return out;
}

[[noreturn]] inline void throw_config_error(std::string_view api, std::string_view field, std::string_view rule,
                                            std::initializer_list<rule_value> values) {
  throw config_error(std::string(api), std::string(field), format_rule(rule, values));
}

/// Refuses a configuration. Not constexpr on purpose: see the file comment.
/// Keep each call on one line so the compiler's note shows the whole rule.
template <class... Values>
[[noreturn]] void report_error(std::string_view api, std::string_view field, std::string_view rule,
                               const Values&... values) {
  throw_config_error(api, field, rule, {rule_value(values)...});
}

}  // namespace detail
LLMSIM_END_NAMESPACE

/// \file llmsim/llm_analysis/summary.hpp
/// The summary llm-analysis returns: an ordered list of keys (its dict's keys, in its order) with
/// a null, a flag, an integer, a number or a text each, plus Python's `round(x, 2)`.
#pragma once

#include <llmsim/core/error.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

LLMSIM_BEGIN_NAMESPACE
namespace llm_analysis {

/// One value of the summary, typed as Python holds it (an int stays an integer, None is null).
struct summary_value {
  enum class kind : unsigned char { null, flag, integer, number, text };
  kind type = kind::null;
  bool flag = false;
  std::int64_t integer = 0;
  double number = 0;
  std::string_view text;

  /// The value as a double (null is NaN-free 0; check `type` first when null matters).
  [[nodiscard]] constexpr double as_double() const {
    if (type == kind::integer) return static_cast<double>(integer);
    if (type == kind::flag) return flag ? 1.0 : 0.0;
    return number;
  }
};

struct summary_item {
  std::string_view key;
  summary_value value;
};

/// The summary dict: keys in llm-analysis's order.
struct summary {
  std::vector<summary_item> items;

  constexpr void put_null(std::string_view key) { items.push_back({key, {}}); }
  constexpr void put(std::string_view key, double v) {
    items.push_back({key, {summary_value::kind::number, false, 0, v, {}}});
  }
  constexpr void put_int(std::string_view key, std::int64_t v) {
    items.push_back({key, {summary_value::kind::integer, false, v, 0, {}}});
  }
  constexpr void put_flag(std::string_view key, bool v) {
    items.push_back({key, {summary_value::kind::flag, v, 0, 0, {}}});
  }
  constexpr void put_text(std::string_view key, std::string_view v) {
    items.push_back({key, {summary_value::kind::text, false, 0, 0, v}});
  }
  constexpr void put(std::string_view key, std::optional<double> v) {
    if (v) {
      put(key, *v);
    } else {
      put_null(key);
    }
  }

  /// The value of `key`, or nullptr.
  [[nodiscard]] constexpr const summary_value* find(std::string_view key) const {
    for (const auto& item : items)
      if (item.key == key) return &item.value;
    return nullptr;
  }
  /// The value of `key` as a double; refuses an absent key.
  [[nodiscard]] constexpr double operator[](std::string_view key) const {
    const auto* v = find(key);
    if (v == nullptr)
      llmsim::detail::report_error("llmsim::llm_analysis::summary", key, "no key {} in the summary", key);
    return v->as_double();
  }
};

namespace detail {

/// `a * b` as an unevaluated sum hi + lo (Dekker's exact product with Veltkamp splitting), so
/// that rounding can look at the exact product of two doubles.
constexpr void exact_product(double a, double b, double& hi, double& lo) {
  constexpr double split = 134217729.0;  // 2^27 + 1
  hi = a * b;
  const double ca = split * a, cb = split * b;
  const double ah = ca - (ca - a), al = a - ah;
  const double bh = cb - (cb - b), bl = b - bh;
  lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl;
}

}  // namespace detail

/// Python's `round(x, 2)` on a float: the exact value of x scaled by 100, rounded to the nearest
/// integer with ties to even, divided by 100 (CPython rounds the exact binary value through
/// `_Py_dg_dtoa` and reads the decimal back, which is that quotient correctly rounded).
/// For |x| < 2^44; larger values are returned as they are.
constexpr double python_round2(double x) {
  if (!(x < 1.7e13 && x > -1.7e13)) return x;
  double hi = 0, lo = 0;
  detail::exact_product(x, 100.0, hi, lo);
  auto whole = static_cast<double>(static_cast<std::int64_t>(hi));  // truncated toward zero
  double fraction = (hi - whole) + lo;
  while (fraction >= 1) {
    whole += 1;
    fraction -= 1;
  }
  while (fraction < 0) {
    whole -= 1;
    fraction += 1;
  }
  if (fraction > 0.5) {
    whole += 1;
  } else if (fraction == 0.5 && static_cast<std::int64_t>(whole) % 2 != 0) {
    whole += 1;
  }
  return whole / 100.0;
}

}  // namespace llm_analysis
LLMSIM_END_NAMESPACE

/// \file llmsim/core/constexpr_math.hpp
/// The few functions of <cmath> the formulas need in constant expressions (<cmath> is not
/// constexpr on Clang 14), and `later`.
#pragma once

#include <llmsim/version.hpp>

LLMSIM_BEGIN_NAMESPACE
namespace detail {
/// log2 of x > 0: the exponent by halving, the mantissa m in [1, 2) by
/// ln m = 2 atanh((m - 1) / (m + 1)), a series that converges to double precision in 20 terms there.
constexpr double log2_of(double x) {
  double exponent = 0;
  while (x >= 2.0) {
    x /= 2.0;
    exponent += 1.0;
  }
  while (x < 1.0) {
    x *= 2.0;
    exponent -= 1.0;
  }
  const double y = (x - 1.0) / (x + 1.0), y2 = y * y;
  double term = y, sum = 0;
  for (int k = 0; k < 20; ++k) {
    sum += term / (2.0 * k + 1.0);
    term *= y2;
  }
  return exponent + 2.0 * sum / 0.69314718055994530942;  // ln 2
}
/// Square root of x >= 0 by `steps` of Newton's iteration from `start` >= sqrt(x).
constexpr double newton_sqrt(double x, double start, int steps) {
  if (x <= 0) return 0;
  double r = start;
  for (int i = 0; i < steps; ++i) r = 0.5 * (r + x / r);
  return r;
}
/// Square root of x >= 0 (from max(x, 1), above the root; 60 steps cover any double's halvings).
constexpr double sqrt_of(double x) { return newton_sqrt(x, x > 1 ? x : 1.0, 60); }
/// sqrt(a^2 + b^2) for a, b >= 0, from 1.5 max(a, b), above the root (which lies in [max, sqrt(2)
/// max]): the relative error e shrinks to e^2 / 2 a step, from at most 0.5 to below 1e-16 in six
/// steps; eight are taken.
constexpr double hypot_of(double a, double b) {
  const double big = a > b ? a : b;
  return newton_sqrt(a * a + b * b, 1.5 * big, 8);
}
/// The later of two times (std::max of doubles, without <algorithm>).
constexpr double later(double a, double b) { return a > b ? a : b; }
}  // namespace detail
LLMSIM_END_NAMESPACE

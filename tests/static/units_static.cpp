// Units: dimensions, literals and arithmetic, checked entirely at compile time.
#include <llmsim/llmsim.hpp>

#include <type_traits>

namespace {
using namespace llmsim::literals;
using llmsim::bytes;
using llmsim::flops;
using llmsim::seconds;

static_assert(80_GiB == bytes{85899345920});
static_assert(1_KiB == 1024_B && 1_KB == 1000_B);
static_assert(1.5_GiB == bytes{1610612736});
static_assert(80_GiB / 1_GiB == 80.0);
static_assert((2_GiB + 1_GiB) * 2 == 6_GiB);
static_assert(10_us == seconds{1e-5});
static_assert(1_ms + 1_ms == 2_ms);
// Dimensions change only through the quantities that relate them.
static_assert(std::is_same_v<decltype(1_GiB / 900_GBps), seconds>);
static_assert(std::is_same_v<decltype(312_TFLOP / 312_TFLOPS), seconds>);
static_assert((312_TFLOP / 312_TFLOPS) == 1_s);
static_assert(std::is_same_v<decltype(312_TFLOPS * 1_s), flops>);
static_assert(1_GB / 1_GBps == 1_s);
template <class A, class B>
concept addable = requires(A a, B b) {
  a + b;
};
static_assert(!addable<bytes, seconds>);
static_assert(!addable<flops, bytes>);
static_assert(addable<bytes, bytes>);
// Quantities are structural: usable as template arguments.
template <bytes Budget>
struct budget {
  static constexpr bytes value = Budget;
};
static_assert(budget<80_GiB>::value == 80_GiB);
// Totals beyond 2^63 stay representable as flops.
static_assert(flops{1e24} > flops{9.3e18});
}  // namespace

// Quantities of different dimensions do not add.
// expect: (no match for .operator\+|invalid operands to binary expression)
#include <llmsim/llmsim.hpp>

using namespace llmsim::literals;
constexpr auto nonsense = 80_GiB + 10_us;

// An option of llmsim::parallel<...> that is not a strategy option does not compile; the message
// lists the options and the notes name the offending one (parallel_option<1, double>).
// expect: llmsim::parallel: an option is not a strategy option
// expect: parallel_option<1(UL)?, double>
#include <llmsim/llmsim.hpp>

using layout = llmsim::parallel<llmsim::tp<2>, double, llmsim::dp<4>>;
constexpr auto world = layout::spec.world_size;

// The catalogue H100 SXM without its kernel model (cost/kernel_model.hpp `kernel_models::hopper`):
// every op at the flat efficiencies of catalogue::assumptions, as a system file without measured
// tables or a kernel model prices it. Tests whose expected times are derived from those flat
// figures use it.
#pragma once

#include <llmsim/llmsim.hpp>

namespace llmsim_test {

inline llmsim::system_spec flat_h100_sxm() {
  namespace assumptions = llmsim::catalogue::assumptions;
  llmsim::system_spec s = llmsim::catalogue::h100_sxm;
  s.accelerator.kernel_model = llmsim::kernel_architecture::none;
  s.accelerator.bandwidth[0].efficient_factor = assumptions::hbm_efficiency;
  for (std::size_t t = 0; t < s.network_count; ++t)
    if (s.networks[t].nccl_link == llmsim::nccl_link_kind::nvlink)
      s.networks[t].bandwidth.efficient_factor = assumptions::link_efficiency;
  return s;
}

}  // namespace llmsim_test

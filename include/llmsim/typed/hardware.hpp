/// \file llmsim/typed/hardware.hpp
/// Accelerators as types: `llmsim::hw::h100_sxm` carries `catalogue::h100_sxm` as its `spec`, so
/// `Accelerator<hw::h100_sxm>` holds and the typed estimate reads the very same `system_spec`.
/// Any other constant system becomes a type with `hw::system_of<my_cluster>`.
///
/// ```cpp
/// static_assert(llmsim::hw::device_memory(llmsim::hw::h100_sxm::spec) == 80_GiB);
/// ```
#pragma once

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/core/units.hpp>
#include <llmsim/spec/system.hpp>
#include <llmsim/typed/concepts.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE
namespace hw {

/// A constant `system_spec` as a type: `using my_cluster_t = hw::system_of<my_cluster>;`.
template <const system_spec& Spec>
struct system_of {
  static constexpr const system_spec& spec = Spec;
};

/// NVIDIA A100 SXM4 80 GB nodes (catalogue::a100_sxm).
struct a100_sxm : system_of<catalogue::a100_sxm> {};
/// NVIDIA A100 PCIe 80 GB nodes (catalogue::a100_pcie).
struct a100_pcie : system_of<catalogue::a100_pcie> {};
/// NVIDIA H100 SXM5 80 GB nodes (catalogue::h100_sxm).
struct h100_sxm : system_of<catalogue::h100_sxm> {};
/// NVIDIA H200 141 GB nodes (catalogue::h200).
struct h200 : system_of<catalogue::h200> {};
/// NVIDIA B200 180 GB nodes (catalogue::b200).
struct b200 : system_of<catalogue::b200> {};
/// AMD Instinct MI300X 192 GB nodes (catalogue::mi300x).
struct mi300x : system_of<catalogue::mi300x> {};

using llmsim::device_memory;  // accelerator.mem_gbs GiB (spec/system.hpp)

}  // namespace hw
LLMSIM_END_NAMESPACE

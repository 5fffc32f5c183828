/// \file llmsim/cost/step_cost.hpp
/// The costs of a training step outside the micro-batches: the data-parallel gradient sync per
/// DDP bucket, the optimizer step, and one pipeline transfer.
#pragma once

#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/network_cost.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace parameters {
/// Megatron-LM DDP bucket size in elements: max(40M, 1M * dp) (`distributed_data_parallel_config.bucket_size`).
inline constexpr double ddp_bucket_min_elements = 40000000.0;
inline constexpr double ddp_bucket_elements_per_dp_rank = 1000000.0;
}  // namespace parameters

namespace detail {

/// Gradient sync of one stage: Megatron DDP buckets of max(40M, 1M·dp) elements; with the
/// distributed optimizer each bucket's gradients are reduce-scattered and its bf16 parameters
/// all-gathered after the step; plain DP all-reduces each bucket. Not overlapped with backward
/// (the validation runs do not pass --overlap-grad-reduce).
constexpr seconds data_parallel_time(const system_spec& sys, const strategy_spec& s, double params, double grad_bytes_per_param,
                                     std::int64_t& buckets, comm_group which = comm_group::dp) {
  const std::int64_t group = which == comm_group::edp ? edp_size(s) : dp_size(s) * s.cp_size;
  buckets = 0;
  if (group <= 1 || params <= 0) return {};
  const network_tier& tier = resolve_tier(sys, s, which);
  const double per_bucket = parameters::ddp_bucket_min_elements > parameters::ddp_bucket_elements_per_dp_rank * static_cast<double>(group)
                                ? parameters::ddp_bucket_min_elements
                                : parameters::ddp_bucket_elements_per_dp_rank * static_cast<double>(group);
  const double full = static_cast<double>(static_cast<std::int64_t>(params / per_bucket));  // floor of a positive count
  const double rest = params - full * per_bucket;
  buckets = static_cast<std::int64_t>(full) + (rest > 0 ? 1 : 0);
  auto bucket_time = [&](double elements) {
    if (elements <= 0) return seconds{};
    if (s.zero_state >= 1) {
      return collective_time(sys, s, tier, {collective_kind::reduce_scatter, elements * grad_bytes_per_param, group, which}) +
             collective_time(sys, s, tier, {collective_kind::all_gather, elements * static_cast<double>(dtype_bytes(s.dtype)), group, which});
    }
    return collective_time(sys, s, tier, {collective_kind::all_reduce, elements * grad_bytes_per_param, group, which});
  };
  return bucket_time(per_bucket) * full + bucket_time(rest);
}

/// Optimizer step of one stage (Megatron distributed optimizer with Adam), memory-bound passes on
/// the accelerator's default bandwidth entry, each a kernel paying its latency:
/// zero the grad buffer; scale gradients by 1/dp before reduction (dp > 1); NaN/norm check of the
/// local gradients; after the reduce-scatter, over this rank's shard: grad-norm, clip, Adam (reads
/// grad, m, v, fp32 master; writes m, v, master), and the copy of the master weights to bf16.
constexpr seconds optimizer_time(const system_spec& sys, const strategy_spec& s, double params, double grad_bytes_per_param, double expert_params = 0) {
  if (params <= 0) return {};
  const double dense_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
  const double expert_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(edp_size(s)) : 1.0;
  const double grads = params * grad_bytes_per_param;
  const double local = (params - expert_params) * dense_shard + expert_params * expert_shard;
  auto pass = [&](double b) { return memory_time(sys, memory_kind::default_kind, b); };
  seconds t = pass(grads) + pass(grads);
  if (dp_size(s) * s.cp_size > 1) t += pass(2 * grads);
  t += pass(local * grad_bytes_per_param) + pass(2 * local * grad_bytes_per_param);
  t += pass(local * grad_bytes_per_param + 2 * 12.0 * local);
  t += pass(local * (4.0 + static_cast<double>(dtype_bytes(s.dtype))));
  return t;
}

}  // namespace detail

/// One activation (or gradient) transfer of `bytes` between neighbouring pipeline stages.
constexpr seconds pipeline_transfer_time(const system_spec& sys, const strategy_spec& s, double bytes) {
  if (s.pp_size <= 1) return {};
  return collective_time(sys, s, resolve_tier(sys, s, comm_group::pp), {collective_kind::p2p, bytes, 2, comm_group::pp});
}

LLMSIM_END_NAMESPACE

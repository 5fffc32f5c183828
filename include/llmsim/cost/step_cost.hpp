/// \file llmsim/cost/step_cost.hpp
/// The costs of a training step outside the micro-batches: the data-parallel gradient sync per
/// DDP bucket, the optimizer step, and one pipeline transfer.
#pragma once

#include <llmsim/cost/compute_cost.hpp>
#include <llmsim/cost/muon_cost.hpp>
#include <llmsim/cost/network_cost.hpp>
#include <llmsim/program/quantize.hpp>

LLMSIM_BEGIN_NAMESPACE

namespace parameters {
/// Megatron-LM DDP bucket size in elements: max(40M, 1M * dp) (`distributed_data_parallel_config.bucket_size`).
inline constexpr double ddp_bucket_min_elements = 40000000.0;
inline constexpr double ddp_bucket_elements_per_dp_rank = 1000000.0;
/// The most DDP buckets one stage's gradient buffer may hold: the overlap simulation walks them one
/// by one. 2^20 buckets of at least 40M elements are 42 T parameters on one pipeline stage, four
/// times a 10 T-parameter model without pipeline parallelism; beyond that the estimate refuses.
inline constexpr std::int64_t max_ddp_buckets = std::int64_t{1} << 20;
/// Optimizer CPU offload: each GPU's host link, PCIe 4.0 x16 before Hopper (A100) and PCIe 5.0 x16
/// on Hopper and Blackwell: 16 / 32 GT/s per lane, about 32 / 64 GB/s per direction (PCI-SIG base
/// specifications 4.0 and 5.0).
inline constexpr double host_link_bytes_per_second_older = 32e9;
inline constexpr double host_link_bytes_per_second_sm90 = 64e9;
/// Host DRAM bandwidth of a node, shared by its GPUs' host optimizer steps: DGX A100 (2x EPYC 7742,
/// 8 channels of DDR4-3200 each: 2*8*25.6 GB/s) and DGX H100 (2x Xeon 8480C, 8 channels of
/// DDR5-4800 each: 2*8*38.4 GB/s), from the DGX user guides' system specifications.
inline constexpr double host_memory_bytes_per_second_older = 409.6e9;
inline constexpr double host_memory_bytes_per_second_sm90 = 614.4e9;
/// The most GPUs sharing those hosts' DRAM (the DGX nodes'); larger nodes are refused.
inline constexpr std::int64_t host_optimizer_max_gpus_per_host = 8;
/// A host Adam step is memory-bound: it reads the fp32 weight, gradient, m and v and writes the
/// weight, m and v of every element (DeepSpeed csrc/adam/cpu_adam_impl.cpp, torch.optim.Adam on
/// the CPU as Megatron's HybridDeviceOptimizer runs it): 7 x 4 bytes.
inline constexpr double host_adam_bytes_per_element = 28.0;
}  // namespace parameters

namespace detail {
/// Whether TransformerEngine's FusedAdam holds the master weights (and writes the model's 16-bit
/// weights in its step, Megatron distrib_optimizer.py `_copy_main_params_to_model_params` returning
/// early): the precision-aware optimizer unless the optimizer's FP8 recipe
/// (`optimizer_fp8_recipe`, by default the job's with FP8 and "delayed" without) is one other than
/// delayed scaling with fp32 main params (optimizer_config.py
/// `use_precision_aware_optimizer_no_fp8_or_ds_fp8`; an NVFP4 job counts as delayed, Megatron-LM
/// leaving fp8_recipe at its default), and not under Megatron-FSDP, which keeps its own main
/// weights (core/optimizer/__init__.py: master_weights False).
constexpr bool te_holds_master_weights(const strategy_spec& s) {
  if (!s.use_precision_aware_optimizer || megatron_fsdp(s)) return false;
  const fp8_recipe_kind recipe = s.optimizer_fp8_recipe.value_or(s.fp8 ? s.fp8_recipe : fp8_recipe_kind::delayed);
  const bool megatron_recipe = recipe != fp8_recipe_kind::delayed && recipe != fp8_recipe_kind::nvfp4;
  return s.main_params_dtype != dtype_kind::fp32 || !megatron_recipe || s.optimizer_cpu_offload;
}

/// Whether TE keeps only the 16 bits of each fp32 master weight that its bf16 parameter lacks
/// (distrib_optimizer.py: an int16 master_param with store_param_remainders and bf16).
constexpr bool stores_param_remainders(const strategy_spec& s) {
  return te_holds_master_weights(s) && s.store_param_remainders && s.dtype == dtype_kind::bf16 &&
         s.main_params_dtype == dtype_kind::fp32;
}

/// Bytes of one parameter's master weight in the optimizer: fp32, or with TE holding it
/// `main_params_dtype`, or its 16-bit remainder.
constexpr double master_weight_bytes(const strategy_spec& s) {
  if (!te_holds_master_weights(s)) return 4.0;
  return stores_param_remainders(s) ? 2.0 : static_cast<double>(dtype_bytes(s.main_params_dtype));
}

/// Bytes of one Adam moment element in `d`: an FP8 moment is a Float8Tensor whose quantizer also
/// makes a transposed copy on GPUs without non-TN FP8 GEMMs (TE fused_adam.py Float8Quantizer,
/// quantizer.cpp), 2 bytes there (0: unknown, counted as Hopper).
constexpr double moment_bytes(dtype_kind d, double compute_capability) {
  if (d != dtype_kind::fp8) return static_cast<double>(dtype_bytes(d));
  return non_tn_fp8_gemm_supported(compute_capability) ? 1.0 : 2.0;
}

/// Adam's state bytes per parameter: master weight, m and v (12 without the precision-aware
/// optimizer: `parameters::adam_state_bytes_per_param`) on a GPU of `compute_capability`.
constexpr double adam_state_bytes_per_param(const strategy_spec& s, double compute_capability) {
  if (!s.use_precision_aware_optimizer) return parameters::adam_state_bytes_per_param;
  return master_weight_bytes(s) + moment_bytes(s.exp_avg_dtype, compute_capability) +
         moment_bytes(s.exp_avg_sq_dtype, compute_capability);
}

/// One buffer's DDP buckets (dense parameters over dp·cp, or expert parameters over edp):
/// Megatron buckets of max(40M, 1M·dp) elements (`distributed_data_parallel_config.bucket_size`),
/// `full` buckets of `per_bucket` elements and a last one of `rest`, with the time of each
/// bucket's gradient reduction (reduce-scatter with the distributed optimizer, else all-reduce)
/// and parameter all-gather (distributed optimizer only).
struct bucket_plan {
  double per_bucket = 0, rest = 0;
  std::int64_t full = 0;
  seconds reduce_full{}, reduce_rest{}, gather_full{}, gather_rest{};
  [[nodiscard]] constexpr std::int64_t count() const { return full + (rest > 0 ? 1 : 0); }
  [[nodiscard]] constexpr double elements(std::int64_t i) const { return i < full ? per_bucket : rest; }
  [[nodiscard]] constexpr seconds reduce(std::int64_t i) const { return i < full ? reduce_full : reduce_rest; }
  [[nodiscard]] constexpr seconds gather(std::int64_t i) const { return i < full ? gather_full : gather_rest; }
  [[nodiscard]] constexpr double total_elements() const { return per_bucket * static_cast<double>(full) + rest; }
};

/// `gather_bytes_per_param`: bytes one parameter moves in the all-gather (0: the job's dtype).
constexpr bucket_plan plan_buckets(const system_spec& sys, const strategy_spec& s, double params,
                                   double grad_bytes_per_param, comm_group which, double gather_bytes_per_param = 0) {
  bucket_plan b;
  const std::int64_t group = which == comm_group::edp ? edp_size(s) : dp_size(s) * s.cp_size;
  if (group <= 1 || params <= 0) return b;
  const network_tier& tier = resolve_tier(sys, s, which);
  const double per_rank = parameters::ddp_bucket_elements_per_dp_rank * static_cast<double>(group);
  b.per_bucket = parameters::ddp_bucket_min_elements > per_rank ? parameters::ddp_bucket_min_elements : per_rank;
  if (params / b.per_bucket > static_cast<double>(parameters::max_ddp_buckets))
    report_error("llmsim::estimate", "strategy.pp_size",
                 "a pipeline stage holds {} parameters in {}-element DDP buckets: more than the {} buckets the "
                 "gradient-sync simulation walks (use more pipeline stages)",
                 params, static_cast<std::int64_t>(b.per_bucket), parameters::max_ddp_buckets);
  b.full = static_cast<std::int64_t>(params / b.per_bucket);
  b.rest = params - static_cast<double>(b.full) * b.per_bucket;
  auto reduce = [&](double elements) {
    if (elements <= 0) return seconds{};
    // Muon's layer-wise distributed optimizer keeps whole gradients on every rank: plain DDP
    // all-reduce (layer_wise_optimizer.py: "Megatron DDP handle allreduce grad").
    const collective_kind kind = s.zero_state >= 1 && s.optimizer != optimizer_kind::muon
                                     ? collective_kind::reduce_scatter
                                     : collective_kind::all_reduce;
    return collective_time(sys, s, tier, {kind, elements * grad_bytes_per_param, group, which});
  };
  auto gather = [&](double elements) {
    if (elements <= 0 || s.zero_state < 1) return seconds{};
    return collective_time(
        sys, s, tier,
        {collective_kind::all_gather,
         elements * (gather_bytes_per_param > 0 ? gather_bytes_per_param : static_cast<double>(dtype_bytes(s.dtype))),
         group, which});
  };
  b.reduce_full = reduce(b.per_bucket);
  b.reduce_rest = reduce(b.rest);
  b.gather_full = gather(b.per_bucket);
  b.gather_rest = gather(b.rest);
  return b;
}

/// --overlap-grad-reduce (Megatron `param_and_grad_buffer.py`): during the last micro-batch's
/// backward (`backward` long) each bucket's reduction starts on the data-parallel stream as soon
/// as the bucket's gradients are complete — buckets fill in backward order, here at an even rate
/// over the backward — and the stream is free. Returns how long the stream runs past the end of
/// that backward. The dense and expert buffers fill side by side and share the stream.
constexpr seconds grad_reduce_tail(const bucket_plan& dense, const bucket_plan& expert, seconds backward) {
  const std::int64_t nd = dense.count(), ne = expert.count();
  double stream = 0, done_d = 0, done_e = 0;
  std::int64_t i = 0, k = 0;
  while (i < nd || k < ne) {
    // Next bucket to become ready: the one whose fill completes first.
    const double ready_d = i < nd ? backward.value * (done_d + dense.elements(i)) / dense.total_elements() : 1e300;
    const double ready_e = k < ne ? backward.value * (done_e + expert.elements(k)) / expert.total_elements() : 1e300;
    const bool take_dense = k >= ne || (i < nd && ready_d <= ready_e);  // never past a list's end, even for NaN
    const double ready = take_dense ? ready_d : ready_e;
    stream = (stream > ready ? stream : ready) + (take_dense ? dense.reduce(i) : expert.reduce(k)).value;
    if (take_dense)
      done_d += dense.elements(i++);
    else
      done_e += expert.elements(k++);
  }
  return seconds{stream > backward.value ? stream - backward.value : 0.0};
}

/// --overlap-param-gather (Megatron distributed optimizer): the parameter all-gathers run on the
/// data-parallel stream from the start of the next forward, bucket by bucket in the order the
/// forward needs them (the reverse of the backward's); the forward (`forward` long) reaches each
/// bucket at an even rate. Returns the longest wait of the forward for a bucket — at least the
/// first bucket's gather.
constexpr seconds param_gather_wait(const bucket_plan& b, seconds forward) {
  double stream = 0, reached = 0, wait = 0;
  const double total = b.total_elements();
  for (std::int64_t j = b.count() - 1; j >= 0; --j) {
    stream += b.gather(j).value;
    const double needed = total > 0 ? forward.value * reached / total : 0;
    wait = stream - needed > wait ? stream - needed : wait;
    reached += b.elements(j);
  }
  return seconds{wait};
}

/// Optimizer step of one stage (Megatron distributed optimizer with Adam), memory-bound passes on
/// the accelerator's default bandwidth entry, each a kernel paying its latency:
/// zero the grad buffer; scale gradients by 1/dp before reduction (dp > 1); NaN/norm check of the
/// local gradients; after the reduce-scatter, over this rank's shard: grad-norm, clip, Adam (reads
/// grad, m, v, fp32 master; writes m, v, master), and the copy of the master weights to bf16.
/// With ZeRO-2/3 the gradient buffer the first passes touch is this rank's shard. With
/// optimizer_cpu_offload the Adam step and the master-weight copy leave the GPU (see
/// `host_optimizer_time`).
constexpr seconds optimizer_time(const system_spec& sys, const strategy_spec& s, double params,
                                 double grad_bytes_per_param, double expert_params = 0) {
  if (params <= 0) return {};
  const double dense_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(dp_size(s) * s.cp_size) : 1.0;
  const double expert_shard = s.zero_state >= 1 ? 1.0 / static_cast<double>(edp_size(s)) : 1.0;
  const double local = (params - expert_params) * dense_shard + expert_params * expert_shard;
  const double grads = (s.zero_state >= 2 ? local : params) * grad_bytes_per_param;
  auto pass = [&](double b) { return memory_time(sys, memory_kind::default_kind, b); };
  seconds t = pass(grads) + pass(grads);
  if (dp_size(s) * s.cp_size > 1) t += pass(2 * grads);
  t += pass(local * grad_bytes_per_param) + pass(2 * local * grad_bytes_per_param);
  if (s.optimizer_cpu_offload) return t;
  const double param_bytes = static_cast<double>(dtype_bytes(s.dtype));
  const double cc = known_compute_capability(sys);
  if (te_holds_master_weights(s)) {
    // One FusedAdam pass: the 16-bit weight written beside the state (read too when the master
    // weight is its remainder), no separate copy.
    const double weight = param_bytes * (stores_param_remainders(s) ? 2 : 1);
    return t + pass(local * (grad_bytes_per_param + 2 * adam_state_bytes_per_param(s, cc) + weight));
  }
  t += pass(local * (grad_bytes_per_param + 2 * adam_state_bytes_per_param(s, cc)));
  t += pass(local * (4.0 + param_bytes));
  return t;
}

/// One GPU's link to host memory, each way: the system's `accelerator.host_link_gbs` when it names
/// one (Grace-based parts: NVLink-C2C), else PCIe 5.0 x16 (`current_gpu`: compute capability >= 9)
/// or 4.0 x16.
constexpr double host_link_bytes_per_second(const system_spec& sys, bool current_gpu) {
  if (sys.accelerator.host_link_gbs > 0) return sys.accelerator.host_link_gbs * 1e9;
  return current_gpu ? parameters::host_link_bytes_per_second_sm90 : parameters::host_link_bytes_per_second_older;
}

/// Megatron --optimizer-cpu-offload (core/optimizer/cpu_offloading/hybrid_optimizer.py, offload
/// fraction 1): this rank's `local` gradient shard is copied to pinned host memory, the host runs
/// Adam over it (its node's DRAM bandwidth shared by the node's GPUs), and the updated weights are
/// copied back into the 16-bit parameters. Without --overlap-cpu-optimizer-d2h-h2d the three run
/// one after the other. `current_gpu`: compute capability >= 9 (PCIe 5.0, DDR5 hosts).
constexpr seconds host_optimizer_time(const system_spec& sys, const strategy_spec& s, double local,
                                      double grad_bytes_per_param, bool current_gpu) {
  if (!s.optimizer_cpu_offload || local <= 0) return {};
  const double link = host_link_bytes_per_second(sys, current_gpu);
  const double host =
      (current_gpu ? parameters::host_memory_bytes_per_second_sm90 : parameters::host_memory_bytes_per_second_older) /
      static_cast<double>(sys.num_per_node);
  const double d2h = local * grad_bytes_per_param / link;
  const double step = local * parameters::host_adam_bytes_per_element / host;
  const double h2d = local * static_cast<double>(dtype_bytes(s.dtype)) / link;
  return seconds{d2h + step + h2d};
}

}  // namespace detail

/// One activation (or gradient) transfer of `bytes` between neighbouring pipeline stages.
constexpr seconds pipeline_transfer_time(const system_spec& sys, const strategy_spec& s, double bytes) {
  if (s.pp_size <= 1) return {};
  return collective_time(sys, s, resolve_tier(sys, s, comm_group::pp),
                         {collective_kind::p2p, bytes, 2, comm_group::pp});
}

LLMSIM_END_NAMESPACE

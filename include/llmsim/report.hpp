/// \file llmsim/report.hpp
/// Human-readable reports of an estimate (run time only): the time breakdown, MFU, throughput,
/// memory per pipeline stage and where it peaks.
#pragma once

#include <llmsim/estimate/estimate.hpp>
#include <llmsim/estimate/training_cost.hpp>

#include <cstdio>
#include <string>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// A stage's name as SimuMax names stages: `first_stage`, `last_stage`, and `middle_stage` when
/// all middle ranks run one program; otherwise each middle stage carries its ranks,
/// `middle_stage[1]`, `middle_stage[2-14]`.
inline std::string stage_name(const estimate_result& r, std::size_t i) {
  const stage_result& st = r.stages[i];
  std::string out(stage_kind_names[static_cast<std::size_t>(st.kind)]);
  if (st.kind != stage_kind::middle) return out;
  std::size_t middles = 0;
  for (std::size_t k = 0; k < r.stage_count; ++k) middles += r.stages[k].kind == stage_kind::middle ? 1 : 0;
  if (middles == 1) return out;
  out.append(1, '[').append(std::to_string(st.rank));  // append: GCC 12 -Wrestrict misfires on "x" + string
  if (st.last_rank != st.rank) out.append(1, '-').append(std::to_string(st.last_rank));
  return out.append(1, ']');
}

/// Where a stage's memory peaks: `first_stage/decoder.layers.31.linear_fc1, stage=backward`.
inline std::string format_peak_path(const estimate_result& r, std::size_t i) {
  const stage_result& st = r.stages[i];
  std::string out = stage_name(r, i) + '/';
  if (st.peak_path.layer >= 0) out += "decoder.layers." + std::to_string(st.peak_path.layer) + '.';
  out += st.peak_path.leaf;
  out += ", stage=";
  out += st.peak_path.pass;
  return out;
}

/// One line on whether the job fits: `fits: peak 31.81 GiB (first_stage) of 80.00 GiB device memory`
/// or `does not fit: peak 226.84 GiB on middle_stage exceeds 141.00 GiB device memory by 85.84 GiB`.
inline std::string memory_verdict(const estimate_result& r) {
  const std::string stage = stage_name(r, static_cast<std::size_t>(r.mem.peak_stage));
  if (r.mem.fits)
    return "fits: peak " + to_string(r.mem.peak_mem) + " (" + stage + ") of " + to_string(r.mem.device_mem) +
           " device memory";
  return "does not fit: peak " + to_string(r.mem.peak_mem) + " on " + stage + " exceeds " +
         to_string(r.mem.device_mem) + " device memory by " + to_string(r.mem.over_by);
}

/// What an estimate note means, for the user (`estimate_result::notes`).
inline std::string note_text(const estimate_result& r, estimate_note n) {
  char cc[32];
  std::snprintf(cc, sizeof cc, "%.1f", r.compute_capability);
  switch (n) {
    case estimate_note::compute_capability_from_name:
      return std::string("system.accelerator.compute_capability is not given; ") + cc +
             " inferred from sys_name (sizes TransformerEngine's cuBLAS workspace)";
    case estimate_note::compute_capability_assumed:
      return std::string(
                 "system.accelerator.compute_capability is not given and sys_name names no known GPU; assumed ") +
             cc + " (TransformerEngine's 32 MiB cuBLAS workspace); set it to be exact";
    case estimate_note::math_sdp_shadowed_by_flash:
      return "strategy.use_math_sdp=true has no effect while strategy.use_flash_sdp=true: flash attention is preferred "
             "(as PyTorch's SDPA and SimuMax choose); set use_flash_sdp=false for unfused attention";
    case estimate_note::processor_usage_not_modelled:
      return "system.networks.*.processor_usage is not 0 but is not modelled (SimuMax reserves the field): "
             "communication does not slow compute";
    case estimate_note::low_precision_rate_derived:
      return "the system's fp8/fp4 GEMM entry has no usable figures (absent, or efficient_factor 0): shapes it "
             "does not measure are priced as the bf16 GEMM of the same shape at the data-sheet FP8 (x2) / FP4 (x4) "
             "dense peak";
  }
  return {};
}

/// Every note of an estimate, one string each.
inline std::vector<std::string> notes_of(const estimate_result& r) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < estimate_note_count; ++k)
    if (r.has(static_cast<estimate_note>(k))) out.push_back(note_text(r, static_cast<estimate_note>(k)));
  return out;
}

namespace detail {
/// `last_stage (rank 15)`, `middle_stage[2-14] (ranks 2-14)`.
inline std::string stage_name_with_ranks(const estimate_result& r, std::size_t i) {
  const auto& st = r.stages[i];
  std::string out = stage_name(r, i);
  out.append(st.rank_count > 1 ? ", ranks " : ", rank ").append(std::to_string(st.rank));
  if (st.rank_count > 1) out.append(1, '-').append(std::to_string(st.last_rank));
  return out;
}
inline void line(std::string& out, const char* fmt, double a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a);
  out += buf;
}
}  // namespace detail

namespace detail {
/// "model llama3_8b (8.03B parameters, vocab padded to 128256) on h100_sxm"; MoE adds the active ones.
inline std::string model_line(const estimate_result& r, const model_spec& m, const system_spec& sys) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "model %s (%.2fB parameters", std::string(m.model_name.view()).c_str(),
                r.param_count / 1e9);
  std::string out = buf;
  if (is_moe(m)) {
    std::snprintf(buf, sizeof buf, ", %.2fB active per token", r.active_param_count / 1e9);
    out += buf;
  }
  out.append(", vocab padded to ")
      .append(std::to_string(r.padded_vocab))
      .append(") on ")
      .append(sys.sys_name.view())
      .append(1, '\n');
  return out;
}

/// The iteration as stage `i` sees it; the parts add up to the iteration time.
inline std::string breakdown_lines(const estimate_result& r, std::size_t i) {
  const auto& b = r.stages[i].breakdown;
  const auto& comm = r.cost.comm_result;
  std::string out;
  out += "    forward compute            " + to_string(b.fwd_compute_time) + "\n";
  out += "    backward compute           " + to_string(b.bwd_compute_time) + "\n";
  out += "    recompute                  " + to_string(b.recompute_time) + "\n";
  if (comm.cp_a2a_net.empty())
    out += "    tp / expert comm           " + to_string(b.intra_exposed_time) + " (tp " + std::string(comm.tp_net) +
           ", ep " + std::string(comm.ep_net) + ")\n";
  else  // context parallelism's exposed exchanges are in the same bucket
    out += "    tp / expert / cp comm      " + to_string(b.intra_exposed_time) + " (tp " + std::string(comm.tp_net) +
           ", ep " + std::string(comm.ep_net) + ", cp a2a " + std::string(comm.cp_a2a_net) + ", cp KV " +
           std::string(comm.cp_ring_net) + ")\n";
  out += "    pipeline p2p               " + to_string(b.inter_exposed_time) + " (" + std::string(comm.pp_net) + ")\n";
  out += "    waiting (bubble)           " + to_string(b.bubble_time) + "\n";
  out += "    data-parallel sync         " + to_string(b.dp_exposed_time) + " (" + std::string(comm.dp_net) + ")\n";
  const stage_result& st = r.stages[i];
  if (st.fwd_shard_comm_time.value + st.bwd_shard_comm_time.value > 0)
    out += "      ZeRO-2/3 per micro-batch forward gathers " + to_string(st.fwd_shard_comm_time) + ", exposed " +
           to_string(st.fwd_shard_exposed_time) + "; backward gathers + reduce-scatters " +
           to_string(st.bwd_shard_comm_time) + ", exposed " + to_string(st.bwd_shard_exposed_time) + "\n";
  out += "    optimizer step             " + to_string(b.optim_time) + "\n";
  if (st.host_optimizer_time.value > 0)
    out += "      of which on the host     " + to_string(st.host_optimizer_time) +
           " (optimizer_cpu_offload: gradients to the host, Adam there, weights back)\n";
  if (st.muon_ns_time.value > 0)
    out += "      of which Newton-Schulz   " + to_string(st.muon_ns_time) +
           " (optimizer muon: this rank's share of the orthogonalisation GEMMs)\n";
  if (b.straggler_time.value > 0)
    out += "    straggler                  " + to_string(b.straggler_time) +
           " (synchronised steps over several nodes wait for the slowest: SimuMax v1.2's straggler model, "
           "strategy.enable_straggler_model)\n";
  return out;
}

/// Memory of stage `i` at its lowest rank, the one holding the most micro-batches in flight.
inline std::string stage_memory_lines(const estimate_result& r, std::size_t i) {
  const auto& st = r.stages[i];
  char buf[320];
  std::string mtp;  // (append: GCC 12's -Wrestrict misfires on "literal" + std::string&&)
  if (st.layout.mtp_layers > 0) mtp.append(" + ").append(std::to_string(st.layout.mtp_layers)).append(" MTP layer(s)");
  std::snprintf(
      buf, sizeof buf,
      "  %s: rank%s %lld%s%s, %lld layers (%lld dense, %lld MoE)%s%s%s, chunk_time %s, micro-batches in flight "
      "at rank %lld: %lld\n",
      stage_name(r, i).c_str(), st.rank_count > 1 ? "s" : "", static_cast<long long>(st.rank),
      st.rank_count > 1 ? "-" : "", st.rank_count > 1 ? std::to_string(st.last_rank).c_str() : "",
      static_cast<long long>(st.layers), static_cast<long long>(st.layout.dense_layers),
      static_cast<long long>(st.layers - st.layout.dense_layers), st.layout.embedding ? " + embedding" : "",
      mtp.c_str(), st.layout.head ? " + LM head and loss" : "", to_string(st.chunk_time).c_str(),
      static_cast<long long>(st.rank), static_cast<long long>(st.micro_batches_in_flight));
  std::string out = buf;
  out += "    model_mem                  " + to_string(st.model_mem) + " (weights " + to_string(st.weight_mem) +
         ", grads " + to_string(st.grad_mem) + ", optimizer " + to_string(st.optimizer_state_mem) +
         (st.te_dummy_wgrad_mem.value > 0 ? ", TE wgrad buffers " + to_string(st.te_dummy_wgrad_mem) : std::string()) +
         (st.gathered_param_mem.value > 0 ? ", gathered weights in flight " + to_string(st.gathered_param_mem)
                                          : std::string()) +
         (st.unsharded_grad_mem.value > 0 ? ", unsharded grads in flight " + to_string(st.unsharded_grad_mem)
                                          : std::string()) +
         ", cuBLAS workspaces " + to_string(st.workspace_mem) + ")\n";
  out += "    activations / micro-batch  " + to_string(st.fwd_activation_cache_per_micro_batch) + "\n";
  out += "    peak_mem                   " + to_string(st.peak_mem) + " (reserved " +
         to_string(st.peak_mem_with_reserved) + ")\n";
  out += "    peak_path                  " + format_peak_path(r, i) + "\n";
  return out;
}
}  // namespace detail

/// A multi-line text report: the iteration, the bounding stage's breakdown, memory per distinct
/// stage, the verdict against device memory, and the estimate's notes.
inline std::string to_text(const estimate_result& r, const model_spec& m, const strategy_spec& s,
                           const system_spec& sys) {
  std::string out = detail::model_line(r, m, sys);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "strategy: world %lld = tp %lld x cp %lld x pp %lld x dp %lld%s, seq %lld, micro-batch %lld x %lld, zero %lld\n",
      static_cast<long long>(s.world_size), static_cast<long long>(s.tp_size), static_cast<long long>(s.cp_size),
      static_cast<long long>(s.pp_size), static_cast<long long>(dp_size(s)), sequence_parallel_active(s) ? " (SP)" : "",
      static_cast<long long>(s.seq_len), static_cast<long long>(s.micro_batch_size),
      static_cast<long long>(s.micro_batch_num), static_cast<long long>(s.zero_state));
  out += buf;
  if (s.cp_size > 1) {  // how the attention exchanges the sequence (TE cp_comm_type)
    if (s.cp_comm_type == cp_comm_kind::all_gather)
      std::snprintf(buf, sizeof buf, "context parallelism: all_gather, K and V gathered over %lld ranks\n",
                    static_cast<long long>(s.cp_size));
    else
      std::snprintf(buf, sizeof buf, "context parallelism: %s, all-to-all over %lld ranks, KV ring over %lld\n",
                    std::string(enum_name(s.cp_comm_type)).c_str(), static_cast<long long>(cp_a2a_size(s)),
                    static_cast<long long>(cp_ring_size(s)));
    out += buf;
  }
  if (s.pp_size > 1) {  // the schedule the pipeline runs (explicit, or implied by interleaving_size)
    out += "pipeline schedule: ";
    out += enum_name(pipeline_schedule_of(s));
    if (s.interleaving_size > 1)
      out.append(" (").append(std::to_string(s.interleaving_size)).append(" model chunks per rank)");
    out += "\n";
  }
  const auto& c = r.cost;
  out += "\ncost\n";
  out += "  duration_time_per_iter       " + to_string(c.duration_time_per_iter) + "\n";
  detail::line(out, "  mfu_6nd_with_attn            %.4f", c.mfu_6nd_with_attn);
  out += c.mfu_6nd_with_attn > 1 ? " (above 1: " + std::string(mfu_above_one_reason) + ")\n" : "\n";
  detail::line(out, "  throughput_per_accelerator   %.1f tokens/s\n", c.throughput_per_accelerator);
  detail::line(out, "  all_tokens_per_iter          %.0f\n", c.all_tokens_per_iter);
  const auto bound = static_cast<std::size_t>(c.bounding_stage);
  out += "  breakdown of the bounding stage, " + detail::stage_name_with_ranks(r, bound) +
         " (the busiest; the pipeline runs at its pace)\n";
  out += detail::breakdown_lines(r, bound);
  out += "  critical path                ends on pipeline rank " + std::to_string(c.critical_rank) + ", " +
         std::string(critical_stream_names[static_cast<std::size_t>(c.critical_stream)]) + "\n";
  std::snprintf(buf, sizeof buf,
                "  compute kernels priced: %d, by measured shape %d, between measured shapes %d, by the kernel "
                "model %d, at the flat efficient_factor %d\n",
                c.efficiency_lookups, c.efficiency_lookups - c.efficiency_misses, c.efficiency_interpolated,
                c.efficiency_modelled, c.efficiency_misses - c.efficiency_interpolated - c.efficiency_modelled);
  out += buf;
  out += "\nmemory per GPU (GiB = 2^30 bytes), per distinct pipeline stage\n";
  for (std::size_t i = 0; i < r.stage_count; ++i) out += detail::stage_memory_lines(r, i);
  out += "  peak over stages             " + to_string(r.mem.peak_mem) + " of " + to_string(r.mem.device_mem) +
         " device memory\n";
  out += "  verdict                      " + memory_verdict(r) + "\n";
  const auto notes = notes_of(r);
  if (!notes.empty()) out += "\nnotes\n";
  for (const auto& n : notes) out += "  - " + n + "\n";
  return out;
}

/// A training run's cost in the report's style (`training_cost`).
inline std::string to_text(const training_run_cost& c) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "\ntraining run\n"
      "  tokens                       %.0f (%.0f steps of %.0f tokens; a partial last batch runs a whole step)\n"
      "  wall clock                   %.2f days (%.0f s, one job, no restarts or evaluation)\n"
      "  gpu_hours                    %.1f\n",
      c.tokens, c.steps, c.tokens_per_step, c.days, c.seconds, c.gpu_hours);
  std::string out = buf;
  if (c.usd) {
    std::snprintf(buf, sizeof buf, "  cost                         $%.2f at $%.4g per GPU-hour\n", *c.usd,
                  *c.usd_per_gpu_hour);
    out += buf;
  }
  return out;
}

LLMSIM_END_NAMESPACE

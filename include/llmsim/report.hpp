/// \file llmsim/report.hpp
/// Human-readable reports of an estimate (run time only): the time breakdown, MFU, throughput,
/// memory per pipeline stage and where it peaks.
#pragma once

#include <llmsim/estimate/estimate.hpp>

#include <cstdio>
#include <string>

LLMSIM_BEGIN_NAMESPACE

/// Where a stage's memory peaks: `first_stage/decoder.layers.31.linear_fc1, stage=backward`.
inline std::string format_peak_path(const stage_result& r) {
  std::string out(stage_kind_names[static_cast<std::size_t>(r.kind)]);
  out += '/';
  if (r.peak_path.layer >= 0) out += "decoder.layers." + std::to_string(r.peak_path.layer) + '.';
  out += r.peak_path.leaf;
  out += ", stage=";
  out += r.peak_path.pass;
  return out;
}

/// One line on whether the job fits: `fits: peak 31.81 GiB (first_stage) of 80.00 GiB device memory`
/// or `does not fit: peak 226.84 GiB on middle_stage exceeds 141.00 GiB device memory by 85.84 GiB`.
inline std::string memory_verdict(const estimate_result& r) {
  const std::string stage(stage_kind_names[static_cast<std::size_t>(r.stages[static_cast<std::size_t>(r.mem.peak_stage)].kind)]);
  if (r.mem.fits)
    return "fits: peak " + to_string(r.mem.peak_mem) + " (" + stage + ") of " + to_string(r.mem.device_mem) + " device memory";
  return "does not fit: peak " + to_string(r.mem.peak_mem) + " on " + stage + " exceeds " + to_string(r.mem.device_mem) +
         " device memory by " + to_string(r.mem.over_by);
}

namespace detail {
inline void line(std::string& out, const char* fmt, double a) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a);
  out += buf;
}
}  // namespace detail

/// A multi-line text report.
inline std::string to_text(const estimate_result& r, const model_spec& m, const strategy_spec& s, const system_spec& sys) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "model %.*s (%.2fB parameters, vocab padded to %lld) on %.*s\n", static_cast<int>(m.model_name.view().size()),
                m.model_name.view().data(), r.param_count / 1e9, static_cast<long long>(r.padded_vocab), static_cast<int>(sys.sys_name.view().size()),
                sys.sys_name.view().data());
  out += buf;
  std::snprintf(buf, sizeof buf, "strategy: world %lld = tp %lld x cp %lld x pp %lld x dp %lld%s, seq %lld, micro-batch %lld x %lld, zero %lld\n",
                static_cast<long long>(s.world_size), static_cast<long long>(s.tp_size), static_cast<long long>(s.cp_size),
                static_cast<long long>(s.pp_size), static_cast<long long>(dp_size(s)), s.enable_sequence_parallel && s.tp_size > 1 ? " (SP)" : "",
                static_cast<long long>(s.seq_len), static_cast<long long>(s.micro_batch_size), static_cast<long long>(s.micro_batch_num),
                static_cast<long long>(s.zero_state));
  out += buf;
  const auto& c = r.cost;
  out += "\ncost\n";
  out += "  duration_time_per_iter       " + to_string(c.duration_time_per_iter) + "\n";
  detail::line(out, "  mfu_6nd_with_attn            %.4f\n", c.mfu_6nd_with_attn);
  detail::line(out, "  throughput_per_accelerator   %.1f tokens/s\n", c.throughput_per_accelerator);
  detail::line(out, "  all_tokens_per_iter          %.0f\n", c.all_tokens_per_iter);
  const auto& b = c.breakdown_result;
  out += "  breakdown (first stage, whole iteration)\n";
  out += "    forward compute            " + to_string(b.fwd_compute_time) + "\n";
  out += "    backward compute           " + to_string(b.bwd_compute_time) + "\n";
  out += "    recompute                  " + to_string(b.recompute_time) + "\n";
  out += "    tensor-parallel comm       " + to_string(b.intra_exposed_time) + " (" + std::string(c.comm_result.tp_net) + ")\n";
  out += "    pipeline p2p               " + to_string(b.inter_exposed_time) + " (" + std::string(c.comm_result.pp_net) + ")\n";
  out += "    pipeline bubble            " + to_string(b.bubble_time) + "\n";
  out += "    data-parallel sync         " + to_string(b.dp_exposed_time) + " (" + std::string(c.comm_result.dp_net) + ")\n";
  out += "    optimizer step             " + to_string(b.optim_time) + "\n";
  if (b.straggler_time.value > 0) out += "    straggler                  " + to_string(b.straggler_time) + "\n";
  std::snprintf(buf, sizeof buf, "  compute shapes priced from measured tables: %d of %d\n", c.efficiency_lookups - c.efficiency_misses, c.efficiency_lookups);
  out += buf;
  out += "\nmemory per GPU (GiB = 2^30 bytes)\n";
  for (std::size_t i = 0; i < r.stage_count; ++i) {
    const auto& st = r.stages[i];
    std::snprintf(buf, sizeof buf, "  %s (%lld layers, chunk_time %s, micro-batches in flight: %lld)\n",
                  std::string(stage_kind_names[static_cast<std::size_t>(st.kind)]).c_str(), static_cast<long long>(st.layers),
                  to_string(st.chunk_time).c_str(), static_cast<long long>(st.micro_batches_in_flight));
    out += buf;
    out += "    model_mem                  " + to_string(st.model_mem) + " (weights " + to_string(st.weight_mem) + ", grads " + to_string(st.grad_mem) +
           ", optimizer " + to_string(st.optimizer_state_mem) + (st.te_dummy_wgrad_mem.value > 0 ? ", TE wgrad buffers " + to_string(st.te_dummy_wgrad_mem) : std::string()) + ")\n";
    out += "    activations / micro-batch  " + to_string(st.fwd_activation_cache_per_micro_batch) + "\n";
    out += "    peak_mem                   " + to_string(st.peak_mem) + " (reserved " + to_string(st.peak_mem_with_reserved) + ")\n";
    out += "    peak_path                  " + format_peak_path(st) + "\n";
  }
  out += "  peak over stages             " + to_string(r.mem.peak_mem) + " of " + to_string(r.mem.device_mem) + " device memory\n";
  out += "  verdict                      " + memory_verdict(r) + "\n";
  return out;
}

LLMSIM_END_NAMESPACE

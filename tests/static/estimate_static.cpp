// The whole estimate runs in constant expressions: the same functions the runtime path uses.
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;
using namespace llmsim::literals;

constexpr strategy_spec tp2_dp4{
    .seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
constexpr estimate_result llama3_8b_h100 = estimate(catalogue::llama3_8b, tp2_dp4, catalogue::h100_sxm);
static_assert(llama3_8b_h100.mem.peak_mem < 80_GiB);
static_assert(llama3_8b_h100.cost.duration_time_per_iter > 100_ms &&
              llama3_8b_h100.cost.duration_time_per_iter < 100_s);
static_assert(llama3_8b_h100.cost.mfu > 0 && llama3_8b_h100.cost.mfu < 1);
// Llama 3 8B: 8,030,261,248 parameters (32 layers of 218,112,000, two 128256 x 4096 embeddings, final norm).
static_assert(parameter_count(catalogue::llama3_8b, 128256) == 8030261248.0);

// A hybrid Mamba-2 / attention / MoE model estimates in constant expressions: Nemotron 3 Nano
// 30B-A3B on 8 B200 (ep 8). Parameters by hand in tests/runtime/test_mamba.cpp (model card: 31.6B).
constexpr strategy_spec nano_ep8{
    .seq_len = 8192, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .ep_size = 8};
constexpr estimate_result nano_b200 = estimate(catalogue::nemotron_3_nano_30b_a3b, nano_ep8, catalogue::b200);
static_assert(nano_b200.mem.peak_mem < 180_GiB);
static_assert(nano_b200.cost.mfu > 0 && nano_b200.cost.mfu < 1);
static_assert(parameter_count(catalogue::nemotron_3_nano_30b_a3b, 131072) == 31577937344.0);
// Nemotron 3 Super (LatentMoE, one "*E" MTP layer): parameters by hand in
// tests/runtime/test_latent_moe.cpp (120 668 687 360 + the MTP layer's 2 942 324 736).
static_assert(parameter_count(catalogue::nemotron_3_super_120b_a12b, 131072) == 123611012096.0);

// Context parallelism (TE ring attention over cp 2) estimates in constant expressions too: each
// rank holds half of every sequence, so its activations are half those of the same job at cp 1.
constexpr strategy_spec tp2_cp2_dp2{.seq_len = 8192,
                                    .micro_batch_size = 1,
                                    .micro_batch_num = 8,
                                    .world_size = 8,
                                    .tp_size = 2,
                                    .cp_size = 2,
                                    .cp_comm_type = cp_comm_kind::p2p};
constexpr strategy_spec tp2_dp4_8k{
    .seq_len = 8192, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 8, .tp_size = 2};
constexpr estimate_result llama3_8b_cp2 = estimate(catalogue::llama3_8b, tp2_cp2_dp2, catalogue::h100_sxm);
constexpr estimate_result llama3_8b_cp1 = estimate(catalogue::llama3_8b, tp2_dp4_8k, catalogue::h100_sxm);
constexpr std::int64_t cp2_cache = llama3_8b_cp2.stages[0].fwd_activation_cache_per_micro_batch.value;
constexpr std::int64_t cp1_cache = llama3_8b_cp1.stages[0].fwd_activation_cache_per_micro_batch.value;
static_assert(2 * cp2_cache - cp1_cache <= 2 && cp1_cache - 2 * cp2_cache <= 2);
static_assert(llama3_8b_cp2.cost.mfu > 0 && llama3_8b_cp2.cost.mfu < 1);
static_assert(llama3_8b_cp2.stages[0].optimizer_state_mem == llama3_8b_cp1.stages[0].optimizer_state_mem);

// 1F1B with equal stages and free p2p: (m + p - 1) * (F + B).
constexpr seconds pipeline_4x8 = [] {
  std::vector<stage_timing> t(4, stage_timing{1_s, 2_s, {}});
  return simulate_1f1b(t, 8).total;
}();
static_assert(pipeline_4x8 == 33_s);

// ZB-H1 with F = B = W: (m + p - 1)F + m(B + W), a third of 1F1B's bubble (Qi et al. 2024 §2.1).
constexpr double zb_h1_4x8 = [] {
  schedule_setup in;
  in.ranks = 4;
  in.durations.assign(4, chunk_durations{1, 1, 1, 0, 0});
  in.p2p.assign(4, 0.0);
  return simulate_zb_h1(in, 8).pipe.total.value;
}();
static_assert(zb_h1_4x8 == 27);

// DualPipeV with F = B_input = W = 1 over 4 ranks, 8 micro-batches: each rank's 2 chunks x 8 x
// (F + B + W) = 48 plus the DualPipe README's bubble (PP/2 - 1)(F&B + B - 3W) = 3·(3 + 2 - 3) = 6.
constexpr double dualpipev_4x8 = [] {
  schedule_setup in;
  in.ranks = 4;
  in.chunks = 2;
  in.placement = chunk_placement::v_shape;
  in.async_p2p = false;
  in.durations.assign(8, chunk_durations{1, 1, 1, 0, 0});
  in.p2p.assign(4, 0.0);
  return detail::simulate_passes(in, dualpipev_passes(4, 8), 8).pipe.total.value;
}();
static_assert(dualpipev_4x8 == 54);

// A catalogue ZB-H1 estimate: its pipeline is never slower than 1F1B's on the same stages.
constexpr strategy_spec tp8_pp4_zbh1{.seq_len = 4096,
                                     .micro_batch_size = 1,
                                     .micro_batch_num = 16,
                                     .world_size = 32,
                                     .tp_size = 8,
                                     .pp_size = 4,
                                     .pipeline_schedule = pipeline_schedule_kind::zb_h1};
constexpr strategy_spec tp8_pp4_1f1b = [] {
  strategy_spec s = tp8_pp4_zbh1;
  s.pipeline_schedule = {};
  return s;
}();
constexpr estimate_result llama3_70b_zbh1 = estimate(catalogue::llama3_70b, tp8_pp4_zbh1, catalogue::h100_sxm);
constexpr estimate_result llama3_70b_1f1b = estimate(catalogue::llama3_70b, tp8_pp4_1f1b, catalogue::h100_sxm);
static_assert(llama3_70b_zbh1.cost.pipeline_time < llama3_70b_1f1b.cost.pipeline_time);
static_assert(llama3_70b_zbh1.stages[0].micro_batches_in_flight == 4);
}  // namespace

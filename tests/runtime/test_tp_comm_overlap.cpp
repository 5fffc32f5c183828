// TransformerEngine's userbuffers overlap of the sequence-parallel TP collectives with the GEMMs
// (strategy.tp_comm_overlap, cost/op_cost.hpp `userbuffers_exposed`). The exposure formulas are
// checked on hand-picked times; the programs' pairing on Llama 3 8B at tp 4 (hidden 4096, fc1
// 2 x 14336 / 4 wide) from the times of the same ops without the overlap.
#include <llmsim/estimate/trace.hpp>
#include <llmsim/json.hpp>
#include <llmsim/search.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_tp_comm_overlap {

using namespace llmsim;

namespace {

op userbuffers_op(userbuffers_method m, std::int64_t chunks, std::int64_t sms, bool margin) {
  op o = collective_op(pass_kind::forward, collective_kind::all_gather, comm_group::tp, 1);
  o.beside_previous = true;
  o.userbuffers = m;
  o.userbuffers_chunks = chunks;
  o.userbuffers_sms = sms;
  o.userbuffers_sm_margin = margin;
  return o;
}

/// The exposure in ms on a GPU of 148 SMs.
double exposed_ms(userbuffers_method m, std::int64_t chunks, std::int64_t sms, double comm_ms, double gemm_ms,
                  bool margin = true) {
  const op o = userbuffers_op(m, chunks, sms, margin);
  return userbuffers_exposed(o, seconds{comm_ms * 1e-3}, seconds{gemm_ms * 1e-3}, 148).value * 1e3;
}

strategy_spec tp4_job(bool overlap) {
  strategy_spec s{.seq_len = 8192, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 8};
  s.tp_size = 4;
  s.tp_comm_overlap = overlap;
  return s;
}

/// Every op of one linear leaf of Llama 3 8B at tp 4 on B200, recorded with its priced time.
struct recorded_linear {
  op_record record;
  leaf l;
};
recorded_linear linear(leaf_id id, bool column, std::int64_t in, std::int64_t out, const strategy_spec& s) {
  const model_spec& m = catalogue::llama3_8b;
  validate(m, s, catalogue::b200);
  recorded_linear r;
  build_context c = make_build_context(m, s, catalogue::b200, padded_vocab(m, s.tp_size));
  c.record = &r.record;
  c.pricing = &record_op;
  r.l = linear_leaf(c, id, column, in, out);
  return r;
}

/// The priced times of the ops of `pass` of kind `kind` (collectives: `coll` only), in order.
std::vector<double> times(const recorded_linear& r, pass_kind pass, op_kind kind,
                          collective_kind coll = collective_kind::all_gather) {
  std::vector<double> out;
  for (const priced_op& p : r.record.ops)
    if (p.o.pass == pass && p.o.kind == kind && (kind != op_kind::collective || p.o.collective == coll))
      out.push_back(p.time.value);
  return out;
}

/// Ring exchange over tp = 4 chunks (TE split_overlap_ag): 3 steps each hide a transfer of C / 3
/// behind a GEMM chunk of G / 4.
double ring4(double comm, double gemm) {
  const double step = comm / 3, chunk = gemm / 4;
  return 3 * (step > chunk ? step - chunk : 0);
}
/// Bulk on 16 of 148 SMs with TE's default SM margin: the GEMM runs on 132 SMs throughout, the pair
/// takes max(C, G x 148 / 132).
double bulk16(double comm, double gemm) {
  const double pair = std::max(comm, gemm * 148 / 132);
  return pair - gemm;
}
}  // namespace

TEST(TpCommOverlap, RingExchangeHidesEachStepBehindAGemmChunk) {
  // C = 3 ms over 3 steps of 1 ms; G = 2 ms in 4 chunks of 0.5 ms: each step leaves 0.5 ms.
  EXPECT_NEAR(exposed_ms(userbuffers_method::ring_exchange, 4, 0, 3, 2), 1.5, 1e-12);
  // C = 1 ms: steps of 1/3 ms under chunks of 0.5 ms: all hidden, and no SMs taken.
  EXPECT_NEAR(exposed_ms(userbuffers_method::ring_exchange, 4, 0, 1, 2), 0.0, 1e-12);
  // tp 2: one step of C under half the GEMM. C = 3, G = 2: 3 - 1 = 2 ms.
  EXPECT_NEAR(exposed_ms(userbuffers_method::ring_exchange, 2, 0, 3, 2), 2.0, 1e-12);
}

TEST(TpCommOverlap, PipelineRunsChunksOnTheSmsTheReduceScatterLeaves) {
  // G = 4 ms in 4 chunks on 132 of 148 SMs: 148/132 ms each; C = 2 ms in pieces of 0.5 ms. The
  // pair: chunk + 3 x max(chunk, piece) + piece = 4 x 148/132 + 0.5 ms; exposed = that - 4.
  EXPECT_NEAR(exposed_ms(userbuffers_method::pipeline, 4, 16, 2, 4), 4 * 148.0 / 132 + 0.5 - 4, 1e-12);
  // C = 8 ms: pieces of 2 ms outlast the chunks: 148/132 + 3 x 2 + 2 - 4.
  EXPECT_NEAR(exposed_ms(userbuffers_method::pipeline, 4, 16, 8, 4), 148.0 / 132 + 8 - 4, 1e-12);
}

TEST(TpCommOverlap, BulkRunsTheGemmOnTheSmsTheCollectiveLeaves) {
  // TE's default margin: G = 4 ms on 132 of 148 SMs takes 4 x 148/132 = 4.4848 ms beside C = 2 ms.
  EXPECT_NEAR(exposed_ms(userbuffers_method::bulk, 1, 16, 2, 4), 4 * 148.0 / 132 - 4, 1e-12);
  // C = 6 ms outlasts it: exposed 6 - 4 = 2 ms.
  EXPECT_NEAR(exposed_ms(userbuffers_method::bulk, 1, 16, 6, 4), 2.0, 1e-12);
  // Without the margin (Megatron-Bridge's configs) the SMs are shared only while C runs:
  // 4 + 2 x 16/148 = 4.2162 ms; exposed 0.2162 ms.
  EXPECT_NEAR(exposed_ms(userbuffers_method::bulk, 1, 16, 2, 4, false), 2.0 * 16 / 148, 1e-12);
  EXPECT_NEAR(exposed_ms(userbuffers_method::bulk, 1, 16, 6, 4, false), 2.0, 1e-12);
}

TEST(TpCommOverlap, ColumnLinearPairsEachGatherAndReduceWithAGemm) {
  const std::int64_t h = 4096, fc1 = 2 * 14336 / 4;
  const auto plain = linear(leaf_id::linear_fc1, true, h, fc1, tp4_job(false));
  const auto over = linear(leaf_id::linear_fc1, true, h, fc1, tp4_job(true));
  // The GEMMs are priced alike; only where the collectives sit changes.
  EXPECT_EQ(times(plain, pass_kind::forward, op_kind::gemm), times(over, pass_kind::forward, op_kind::gemm));
  const double g_fwd = times(plain, pass_kind::forward, op_kind::gemm).at(0);
  const double ag = times(plain, pass_kind::forward, op_kind::collective).at(0);
  const double g_dgrad = times(plain, pass_kind::backward_input, op_kind::gemm).at(0);
  const double rs = times(plain, pass_kind::backward_input, op_kind::collective, collective_kind::reduce_scatter).at(0);
  const double g_wgrad = times(plain, pass_kind::backward_weight, op_kind::gemm).at(0);
  const double ag_w = times(plain, pass_kind::backward_weight, op_kind::collective).at(0);
  ASSERT_GT(ag, 0);
  // Without the overlap every collective is exposed whole.
  EXPECT_NEAR(plain.l.fwd_comm.value, ag, 1e-15);
  EXPECT_NEAR(plain.l.bwd_comm.value, rs + ag_w, 1e-15);
  // Forward: the input gather by ring exchange beside the fc1 GEMM; backward: the dgrad's
  // reduce-scatter beside the dgrad GEMM and the input's re-gather beside the wgrad GEMM, in bulk.
  EXPECT_NEAR(over.l.fwd_comm.value, ring4(ag, g_fwd), 1e-15);
  EXPECT_NEAR(over.l.bwd_comm.value, bulk16(rs, g_dgrad) + bulk16(ag_w, g_wgrad), 1e-15);
  EXPECT_NEAR(over.l.bwd_weight_comm.value, bulk16(ag_w, g_wgrad), 1e-15);
  EXPECT_LT(over.l.fwd_comm.value + over.l.bwd_comm.value, plain.l.fwd_comm.value + plain.l.bwd_comm.value);
}

TEST(TpCommOverlap, RowLinearReduceScattersByTheChosenMethod) {
  const std::int64_t h = 4096, ffn = 14336 / 4;
  const auto plain = linear(leaf_id::linear_fc2, false, ffn, h, tp4_job(false));
  const double g_fwd = times(plain, pass_kind::forward, op_kind::gemm).at(0);
  const double rs = times(plain, pass_kind::forward, op_kind::collective, collective_kind::reduce_scatter).at(0);
  const double g_dgrad = times(plain, pass_kind::backward_input, op_kind::gemm).at(0);
  const double ag = times(plain, pass_kind::backward_input, op_kind::collective).at(0);
  // TE's default pipeline: 4 chunks on 132 of 148 SMs, the reduce-scatter in 4 pieces.
  const double chunk = g_fwd / 4 * 148 / 132, piece = rs / 4;
  const double pipeline = chunk + 3 * std::max(chunk, piece) + piece - g_fwd;
  const auto over = linear(leaf_id::linear_fc2, false, ffn, h, tp4_job(true));
  EXPECT_NEAR(over.l.fwd_comm.value, pipeline, 1e-15);
  // The output gradient's gather by ring exchange beside the dgrad GEMM.
  EXPECT_NEAR(over.l.bwd_comm.value, ring4(ag, g_dgrad), 1e-15);
  // Megatron-Bridge's FP8 configs reduce-scatter by ring exchange too.
  strategy_spec ring = tp4_job(true);
  ring.tp_comm_overlap_rs_method = userbuffers_method::ring_exchange;
  EXPECT_NEAR(linear(leaf_id::linear_fc2, false, ffn, h, ring).l.fwd_comm.value, ring4(rs, g_fwd), 1e-15);
}

TEST(TpCommOverlap, OnlyTheLinearsTeNamesBuffersForOverlap) {
  // The LM head has no userbuffers: its collectives stay exposed.
  const std::int64_t h = 4096;
  const auto plain = linear(leaf_id::output_layer, true, h, 32000, tp4_job(false));
  const auto over = linear(leaf_id::output_layer, true, h, 32000, tp4_job(true));
  EXPECT_GT(plain.l.fwd_comm.value, 0);
  EXPECT_EQ(over.l.fwd_comm.value, plain.l.fwd_comm.value);
  EXPECT_EQ(over.l.bwd_comm.value, plain.l.bwd_comm.value);
  // Megatron names the shared experts' and the Mamba mixer's projections fc1 / fc2 too
  // (transformer/mlp.py, ssm/mamba_mixer.py): the same ring exchange as the MLP's fc1.
  const auto fc1 = linear(leaf_id::linear_fc1, true, h, 1024, tp4_job(true));
  for (const leaf_id id : {leaf_id::shared_experts_linear_fc1, leaf_id::mamba_in_proj}) {
    const auto over_id = linear(id, true, h, 1024, tp4_job(true));
    EXPECT_EQ(over_id.l.fwd_comm.value, fc1.l.fwd_comm.value) << leaf_name(id);
    EXPECT_LT(over_id.l.fwd_comm.value, linear(id, true, h, 1024, tp4_job(false)).l.fwd_comm.value) << leaf_name(id);
  }
}

TEST(TpCommOverlap, TheIterationHidesTpCommAndTheTraceEndsAtIt) {
  const model_spec& m = catalogue::llama3_8b;
  strategy_spec s = tp4_job(false);
  s.pp_size = 2;
  const auto plain = estimate(m, s, catalogue::h200);
  s.tp_comm_overlap = true;
  const auto t = trace_iteration(m, s, catalogue::h200);
  const auto& over = t.estimate;
  EXPECT_LT(over.cost.duration_time_per_iter.value, plain.cost.duration_time_per_iter.value);
  ASSERT_EQ(over.stage_count, 2U);
  for (std::size_t i = 0; i < over.stage_count; ++i) {
    EXPECT_LT(over.stages[i].fwd_tp_comm_time.value, plain.stages[i].fwd_tp_comm_time.value);
    EXPECT_EQ(over.stages[i].fwd_compute_time.value, plain.stages[i].fwd_compute_time.value);
  }
  double last = 0;
  for (const auto& sp : t.spans) last = std::max(last, sp.end);
  EXPECT_NEAR(last, over.cost.duration_time_per_iter.value, 1e-9 * last);
}

TEST(TpCommOverlap, RulesNameTheFieldAndTheRule) {
  const model_spec& m = catalogue::llama3_8b;
  const auto refused = [&](const strategy_spec& s, const system_spec& sys, const std::string& field,
                           const std::string& words) {
    try {
      (void)estimate(m, s, sys);
      ADD_FAILURE() << "accepted: " << field;
    } catch (const config_error& e) {
      EXPECT_EQ(e.field(), field);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  strategy_spec s = tp4_job(true);
  s.tp_size = 1;
  refused(s, catalogue::b200, "strategy.tp_comm_overlap", "strategy.tp_size > 1");
  s = tp4_job(true);
  s.enable_sequence_parallel = false;
  refused(s, catalogue::b200, "strategy.tp_comm_overlap", "enable_sequence_parallel=true");
  s = tp4_job(true);
  s.tp_comm_overlap_rs_method = userbuffers_method::bulk;
  refused(s, catalogue::b200, "strategy.tp_comm_overlap_rs_method", "\"pipeline\" or \"ring_exchange\"");
  s = tp4_job(true);
  s.tp_comm_overlap_num_sm = 0;
  refused(s, catalogue::b200, "strategy.tp_comm_overlap_num_sm", "[1, 1024]");
  // TE refuses its bulk wgrad overlap with delayed weight gradients (checked on its own: Megatron's
  // delay_wgrad_compute also needs the EP overlap, refused first).
  s = tp4_job(true);
  s.delay_wgrad_compute = true;
  try {
    detail::validate_tp_comm_overlap(s);
    ADD_FAILURE() << "delay_wgrad_compute accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "strategy.tp_comm_overlap");
    EXPECT_NE(std::string(e.what()).find("ub_bulk_wgrad"), std::string::npos) << e.what();
  }
  // ... and with the schedules that run weight gradients apart (ZB-H1, DualPipeV).
  for (const auto k : {pipeline_schedule_kind::zb_h1, pipeline_schedule_kind::dualpipev}) {
    s = tp4_job(true);
    s.pipeline_schedule = k;
    try {
      detail::validate_tp_comm_overlap(s);
      ADD_FAILURE() << enum_name(k) << " accepted";
    } catch (const config_error& e) {
      EXPECT_EQ(e.field(), "strategy.tp_comm_overlap");
      EXPECT_NE(std::string(e.what()).find("zb_h1"), std::string::npos) << e.what();
    }
  }
  // MLA's buffer names make Megatron turn the overlap off for the whole model.
  try {
    (void)estimate(catalogue::deepseek_v3, tp4_job(true), catalogue::b200);
    ADD_FAILURE() << "MLA accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.field(), "strategy.tp_comm_overlap");
    EXPECT_NE(std::string(e.what()).find("multi-latent attention"), std::string::npos) << e.what();
  }
  // A system that does not say its SM count cannot price the SMs a bulk collective takes.
  system_spec unknown = catalogue::b200;
  unknown.accelerator.sm_count = 0;
  unknown.accelerator.kernel_model = kernel_architecture::none;
  refused(tp4_job(true), unknown, "system.accelerator.sm_count", "strategy.tp_comm_overlap_num_sm=16");
}

TEST(TpCommOverlap, JsonReadsTheMethodByName) {
  const auto s = json::parse_strategy(nlohmann::json{{"seq_len", 4096},
                                                     {"micro_batch_size", 1},
                                                     {"micro_batch_num", 1},
                                                     {"tp_size", 2},
                                                     {"world_size", 2},
                                                     {"tp_comm_overlap", true},
                                                     {"tp_comm_overlap_rs_method", "ring_exchange"},
                                                     {"tp_comm_overlap_num_sm", 24}});
  EXPECT_TRUE(s.tp_comm_overlap);
  EXPECT_EQ(s.tp_comm_overlap_rs_method, userbuffers_method::ring_exchange);
  EXPECT_EQ(s.tp_comm_overlap_num_sm, 24);
  EXPECT_EQ(s.tp_comm_overlap_num_splits, 4);
}

TEST(TpCommOverlap, CompactNameTokenTurnsItOn) {
  strategy_spec s;
  ASSERT_TRUE(catalogue::parse_strategy_name("tp4_dp2_tpoverlap", s));
  EXPECT_TRUE(s.tp_comm_overlap);
  EXPECT_EQ(s.tp_comm_overlap_rs_method, userbuffers_method::pipeline);  // TE's defaults
  EXPECT_EQ(s.tp_comm_overlap_num_sm, 16);
  ASSERT_TRUE(catalogue::parse_strategy_name("tp4_dp2", s));
  EXPECT_FALSE(s.tp_comm_overlap);
}

TEST(TpCommOverlap, SearchKeepsTheOverlapOnlyWithTensorParallelism) {
  search_space sp;
  sp.base = tp4_job(true);
  sp.seq_len = 8192;
  sp.gpus = 8;
  search_point p;
  p.layout.tp = 1;
  EXPECT_FALSE(to_strategy(p, sp).tp_comm_overlap);
  p.layout.tp = 2;
  EXPECT_TRUE(to_strategy(p, sp).tp_comm_overlap);
  sp.base.tp_comm_overlap = false;
  EXPECT_FALSE(to_strategy(p, sp).tp_comm_overlap);
}

}  // namespace llmsim_test_tp_comm_overlap

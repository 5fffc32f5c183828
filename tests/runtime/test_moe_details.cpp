// MoE details as Megatron-LM implements them: expert capacity (moe_utils.py get_capacity), token
// dropping, ETP ranks routing their own tokens, the all-gather and flex (DeepEP) dispatchers; and
// learned absolute position embeddings (LanguageModelEmbedding). Expected numbers are worked by hand
// in the comments.
#include <llmsim/llmsim.hpp>

#include <gtest/gtest.h>

#include <vector>

// A named namespace per file: the runtime tests compile as a CMake unity build.
namespace llmsim_test_moe_details {

using namespace llmsim;

namespace {
std::vector<op>* recorded = nullptr;
seconds record(const build_context&, leaf&, const op& o) {
  recorded->push_back(o);
  return {};
}

/// Mixtral 8x7B (8 experts, top-2, hidden 4096) without padding, on 8 ranks.
model_spec mixtral(bool pad, double capacity_factor) {
  model_spec m = catalogue::mixtral_8x7b;
  m.moe_pad_expert_input_to_capacity = pad;
  m.capacity = capacity_factor;
  return m;
}
strategy_spec moe_job(dispatcher_kind d, std::int64_t ep, std::int64_t etp = 1) {
  return {.seq_len = 4096,
          .micro_batch_size = 1,
          .micro_batch_num = 4,
          .world_size = 8,
          .ep_size = ep,
          .etp_size = etp,
          .moe_dispatcher_policy = d};
}

/// The ops one leaf builder emits, unpriced.
template <class Build>
std::vector<op> ops_of(const model_spec& m, const strategy_spec& s, Build build) {
  std::vector<op> ops;
  recorded = &ops;
  build_context c = make_build_context(m, s, catalogue::h100_sxm, padded_vocab(m, s.tp_size));
  c.pricing = &record;
  build(c);
  recorded = nullptr;
  return ops;
}
/// Bytes and kernels of memory ops per pass (forward, then every backward pass together).
struct pass_tally {
  double fwd = 0, bwd = 0;
  std::size_t fwd_n = 0, bwd_n = 0;
};
pass_tally tally(const std::vector<op>& ops) {
  pass_tally t;
  for (const op& o : ops) {
    EXPECT_EQ(o.kind, op_kind::memory);
    (o.pass == pass_kind::forward ? t.fwd : t.bwd) += o.bytes;
    ++(o.pass == pass_kind::forward ? t.fwd_n : t.bwd_n);
  }
  return t;
}
}  // namespace

TEST(MoeCapacity, RoundedAfterTheCapacityFactorAsMegatron) {
  // 4096 tokens x top-2 = 8192 copies over 8 experts: 1024 each.
  // Factor 1.1: ceil(1024 x 1.1) = ceil(1126.4) = 1127 per expert, 9016 in all (not 1024 x 8 x 1.1 = 9011.2).
  EXPECT_EQ(routed_copies(mixtral(true, 1.1), 8192), 9016.0);
  EXPECT_EQ(routed_copies(mixtral(true, 1.0), 8192), 8192.0);
  // 8190 copies: ceil(1023.75) = 1024 per expert when padded, 8192 in all.
  EXPECT_EQ(routed_copies(mixtral(true, 1.0), 8190), 8192.0);
}

TEST(MoeCapacity, UnpaddedDropsOnlyBeyondCapacity) {
  // Balanced routing sends 1024 copies to each expert; capacity ceil(1024 x 0.5) = 512 drops half.
  EXPECT_EQ(routed_copies(mixtral(false, 0.5), 8192), 4096.0);
  // Factor >= 1: nothing dropped, nothing padded (8190 copies stay 8190).
  EXPECT_EQ(routed_copies(mixtral(false, 1.0), 8190), 8190.0);
  EXPECT_EQ(routed_copies(mixtral(false, 1.5), 8192), 8192.0);
}

TEST(MoeCapacity, EachExpertTensorParallelRankRoutesItsOwnTokens) {
  // ep 2 x etp 2: each rank routes its 4096 tokens (capacity 1127 per expert at factor 1.1 -> 9016
  // copies), and the ETP all-gather brings the other rank's 9016: 18032 enter the grouped GEMMs
  // (rounding the gathered 16384 copies at once would give ceil(2252.8) x 8 = 18024).
  const model_spec m = mixtral(true, 1.1);
  const strategy_spec s = moe_job(dispatcher_kind::all2all, 2, 2);  // the context keeps a pointer to it
  const build_context c = make_build_context(m, s, catalogue::h100_sxm, padded_vocab(m, 1));
  const moe_tokens t = moe_token_counts(c);
  EXPECT_EQ(t.local, 4096.0);
  EXPECT_EQ(t.dispatched, 9016.0);
  EXPECT_EQ(t.expert, 18032.0);
}

TEST(MoeFlex, DistinctRanksOfATokensExperts) {
  // 8 experts on 4 ranks (2 each), top-2: a given rank holds neither expert with probability
  // C(6,2)/C(8,2) = 15/28, so a token reaches 4 x 13/28 = 13/7 ranks on average.
  EXPECT_NEAR(distinct_expert_ranks(8, 4, 2), 13.0 / 7.0, 1e-15);
  // One expert per rank: every expert is on its own rank (k ranks); one rank: always 1.
  EXPECT_NEAR(distinct_expert_ranks(256, 256, 8), 8.0, 1e-12);
  EXPECT_EQ(distinct_expert_ranks(256, 1, 8), 1.0);
  // 64 experts on 2 ranks, top-8: P(none of 8 on a rank) = C(32,8)/C(64,8) = 10518300/4426165368.
  EXPECT_NEAR(distinct_expert_ranks(64, 2, 8), 2 * (1 - 10518300.0 / 4426165368.0), 1e-12);
}

TEST(MoeFlex, DispatchSendsEachTokenOncePerRankWithItsRouting) {
  // 4096 tokens x 13/7 ranks each; a row is 4096 bf16 values plus top-2 int64 indices and fp32 weights.
  const model_spec m = mixtral(false, 1.0);
  const strategy_spec s = moe_job(dispatcher_kind::flex, 4);
  const double rows = 4096 * 13.0 / 7.0;
  const auto ops = ops_of(m, s, [](const build_context& c) { permutation_leaf(c, moe_token_counts(c)); });
  ASSERT_EQ(ops.size(), 4U);  // permute, dispatch, its backward (combine of gradients), unpermute
  EXPECT_EQ(ops[0].kind, op_kind::memory);
  EXPECT_NEAR(ops[0].bytes, (rows + 8192) * 4096 * 2, 1e-3);  // received rows in, expert copies out
  EXPECT_EQ(ops[1].collective, collective_kind::all2all);
  EXPECT_EQ(ops[1].group, comm_group::ep);
  EXPECT_NEAR(ops[1].bytes, rows * (4096 * 2 + 2 * 12), 1e-3);
  EXPECT_EQ(ops[2].pass, pass_kind::backward_input);
  EXPECT_NEAR(ops[2].bytes, ops[1].bytes, 1e-9);
  // Combine: the locally reduced rows go back, 4096 x 13/7 of them, hidden values only.
  const auto combine = ops_of(m, s, [](const build_context& c) { unpermutation_leaf(c, moe_token_counts(c)); });
  ASSERT_EQ(combine.size(), 4U);
  EXPECT_EQ(combine[0].collective, collective_kind::all2all);
  EXPECT_NEAR(combine[0].bytes, rows * 4096 * 2, 1e-3);
  EXPECT_NEAR(combine[1].bytes, (8192 + rows) * 4096 * 2, 1e-3);
}

TEST(MoeFlex, RefusesPaddingAndExpertTensorParallelism) {
  EXPECT_THROW(validate(mixtral(true, 1.0), moe_job(dispatcher_kind::flex, 4)), config_error);
  try {
    validate(mixtral(true, 1.0), moe_job(dispatcher_kind::flex, 4));
  } catch (const config_error& e) { EXPECT_EQ(e.field(), "strategy.moe_dispatcher_policy"); }
  EXPECT_THROW(estimate(mixtral(false, 1.0), moe_job(dispatcher_kind::flex, 2, 2), catalogue::h100_sxm), config_error);
  EXPECT_NO_THROW(estimate(mixtral(false, 1.0), moe_job(dispatcher_kind::flex, 4), catalogue::h100_sxm));
}

TEST(MoeAllGather, GathersTokensProbabilitiesAndMapOverTheExpertGroup) {
  // ep 4: each rank contributes 4096 tokens x 4096 x 2 bytes plus 4096 x 8 probabilities (2 bytes)
  // and routing-map entries (1 byte); the gathered output is 4 times that. Each rank then permutes
  // out the 8192 copies of its experts (read + write, 2 x 8192 x 4096 x 2 bytes).
  const model_spec m = mixtral(true, 1.0);
  const strategy_spec s = moe_job(dispatcher_kind::allgather, 4);
  const auto ops = ops_of(m, s, [](const build_context& c) { permutation_leaf(c, moe_token_counts(c)); });
  ASSERT_EQ(ops.size(), 6U);  // permute, gather over ep and etp, two reduce-scatters back, unpermute grads
  EXPECT_EQ(ops[0].bytes, 2.0 * 8192 * 4096 * 2);
  EXPECT_EQ(ops[1].collective, collective_kind::all_gather);
  EXPECT_EQ(ops[1].group, comm_group::ep);
  EXPECT_EQ(ops[1].bytes, 4 * (4096.0 * 4096 * 2 + 4096.0 * 8 * 3));
  EXPECT_EQ(ops[3].collective, collective_kind::reduce_scatter);
  EXPECT_EQ(ops[3].pass, pass_kind::backward_input);
  // Combine: the unpermuted 4 x 4096-row buffer is reduce-scattered over ep (etp = 1 first).
  const auto combine = ops_of(m, s, [](const build_context& c) { unpermutation_leaf(c, moe_token_counts(c)); });
  EXPECT_EQ(combine[1].collective, collective_kind::reduce_scatter);
  EXPECT_EQ(combine[1].group, comm_group::ep);
  EXPECT_EQ(combine[1].bytes, 4 * 4096.0 * 4096 * 2);
}

TEST(MoeAllToAll, CombineMirrorsTheDispatchUnderExpertTensorParallelism) {
  // Mixtral, ep 2 x etp 2 (4 of the 8 ranks), padded to capacity 1: each rank routes 4096 tokens x
  // top-2 = 8192 copies (exactly capacity: ceil(8192 / 8) x 8). Dispatch: those 8192 rows of 4096
  // bf16 values (67,108,864 B) over the ep all-to-all, then the etp all-gather of both ETP ranks'
  // rows (2 x 67,108,864 B gathered). Combine, its mirror (Megatron combine_preprocess, then
  // token_combine): the experts' 16,384 output rows reduce-scattered over etp (134,217,728 B in),
  // then this rank's own 8192 rows (67,108,864 B) back over ep. (Before: etp times each.)
  const model_spec m = mixtral(true, 1.0);
  const strategy_spec s = moe_job(dispatcher_kind::all2all, 2, 2);
  const double rows = 4096.0 * 2, row_bytes = 4096.0 * 2;
  const auto dispatch = ops_of(m, s, [](const build_context& c) { permutation_leaf(c, moe_token_counts(c)); });
  std::vector<op> fwd;
  for (const op& o : dispatch)
    if (o.kind == op_kind::collective && o.pass == pass_kind::forward) fwd.push_back(o);
  ASSERT_EQ(fwd.size(), 2U);
  EXPECT_EQ(fwd[0].collective, collective_kind::all2all);
  EXPECT_EQ(fwd[0].bytes, rows * row_bytes);
  EXPECT_EQ(fwd[1].collective, collective_kind::all_gather);
  EXPECT_EQ(fwd[1].group, comm_group::etp);
  EXPECT_EQ(fwd[1].bytes, 2 * rows * row_bytes);
  const auto combine = ops_of(m, s, [](const build_context& c) { unpermutation_leaf(c, moe_token_counts(c)); });
  std::vector<op> back;
  for (const op& o : combine)
    if (o.kind == op_kind::collective && o.pass == pass_kind::forward) back.push_back(o);
  ASSERT_EQ(back.size(), 2U);
  EXPECT_EQ(back[0].collective, collective_kind::reduce_scatter);
  EXPECT_EQ(back[0].group, comm_group::etp);
  EXPECT_EQ(back[0].bytes, 2 * rows * row_bytes);
  EXPECT_EQ(back[1].collective, collective_kind::all2all);
  EXPECT_EQ(back[1].group, comm_group::ep);
  EXPECT_EQ(back[1].bytes, rows * row_bytes);
}

TEST(MoeExpertBias, Fc2BiasIsAddedPerExpertInAnEagerLoop) {
  // Mixtral with add_linear_bias, unpadded, ep 2 on 8 ranks: 4 local experts; each rank routes 4096
  // tokens x top-2 = 8192 copies, and balanced routing brings 8192 rows to this rank's experts. The
  // fc2 output X = 8192 x 4096 x 2 B = 67,108,864 B, 16,777,216 B per expert. Megatron's
  // `_apply_bias` (experts.py): per expert b*p (writes X_e) and t + b*p (reads 2, writes 1 X_e),
  // then the cat (2 X): 9 kernels, 6 X; backward per expert two products (2 X_e) and two sums
  // (X_e), then the cat of the rows' gradients (2 X): 17 kernels, 8 X. Biases: 4 x 4096.
  model_spec m = mixtral(false, 1.0);
  m.add_linear_bias = true;
  strategy_spec s = moe_job(dispatcher_kind::all2all, 2);
  const double X = 8192.0 * 4096 * 2;
  const auto bias_ops = [&](const strategy_spec& job, double* params) {
    return ops_of(m, job, [&](const build_context& c) {
      leaf l;
      add_expert_fc2_bias(l, c, moe_token_counts(c), 4096);
      *params = l.params;
    });
  };
  double params = 0;
  const pass_tally t = tally(bias_ops(s, &params));
  EXPECT_EQ(params, 4 * 4096.0);
  EXPECT_EQ(t.fwd_n, 9U);
  EXPECT_EQ(t.bwd_n, 17U);
  EXPECT_EQ(t.fwd, 6 * X);
  EXPECT_EQ(t.bwd, 8 * X);
  // TE's fused grouped MLP adds it in its kernel; Megatron asserts it has no expert tensor
  // parallelism (experts.py), so that combination is refused.
  s.use_transformer_engine_op_fuser = true;
  EXPECT_TRUE(bias_ops(s, &params).empty());
  EXPECT_EQ(params, 4 * 4096.0);
  strategy_spec etp2 = moe_job(dispatcher_kind::all2all, 2, 2);
  etp2.use_transformer_engine_op_fuser = true;
  try {
    validate(etp2);
    ADD_FAILURE() << "the op fuser with etp 2 was accepted";
  } catch (const config_error& e) { EXPECT_EQ(e.field(), "strategy.use_transformer_engine_op_fuser"); }
}

TEST(GptOssActivation, ClampsRunEagerlyBeforeTheFusedQuickGeglu) {
  // gpt-oss-120b on ep 8 (world 8), 4096 tokens a rank: 4096 x top-4 = 16,384 routed rows reach this
  // rank's 16 experts. fc1's output X = 16,384 x (2 x 2880) x 2 B = 188,743,680 B. Megatron's
  // weighted_bias_quick_geglu_impl: two clamps (X/2 read + X/2 written each) and a cat (2 X):
  // 3 kernels, 4 X. Backward (autograd): gate compare (X/2 + mask X/4) and where (X/4 + X), the
  // linear half's two compares (2 x 3X/4), their and (3 x X/4) and where (X/4 + X), the chunk's
  // cat (2 X): 7.5 X, with each clamp's one-element zero 9 kernels. The clamps keep fc1's output:
  // X more cached.
  const model_spec m = catalogue::gpt_oss_120b;
  strategy_spec s = moe_job(dispatcher_kind::all2all, 8);
  const double X = 16384.0 * 5760 * 2;
  const auto clamp_ops = [&](const model_spec& model, const strategy_spec& job, double* cache) {
    return ops_of(model, job, [&](const build_context& c) {
      leaf l;
      add_eager_glu_clamps(l, c, X);
      *cache = l.cache;
    });
  };
  double cache = 0;
  const pass_tally t = tally(clamp_ops(m, s, &cache));
  EXPECT_EQ(t.fwd_n, 3U);
  EXPECT_EQ(t.bwd_n, 9U);
  EXPECT_EQ(t.fwd, 4 * X);
  EXPECT_EQ(t.bwd, 7.5 * X + 4);  // and the two one-element zeros of 2 B
  EXPECT_EQ(cache, X);
  // Unfused (use_fused_swiglu false, experts.py glu): the clamped halves go on without the cat.
  strategy_spec unfused = s;
  unfused.use_fused_swiglu = false;
  const pass_tally u = tally(clamp_ops(m, unfused, &cache));
  EXPECT_EQ(u.fwd_n, 2U);
  EXPECT_EQ(u.fwd, 2 * X);
  EXPECT_EQ(u.bwd, 7.5 * X + 4);
  EXPECT_EQ(cache, X);
  // TE's fused grouped MLP clamps in its kernel; SwiGLU's fused kernel clamps inside too
  // (fused_bias_swiglu.py); no clamp value, no clamps.
  strategy_spec fuser = s;
  fuser.use_transformer_engine_op_fuser = true;
  EXPECT_TRUE(clamp_ops(m, fuser, &cache).empty());
  model_spec swiglu = m;
  swiglu.use_quick_geglu = false;
  EXPECT_TRUE(clamp_ops(swiglu, s, &cache).empty());
  model_spec unclamped = m;
  unclamped.activation_func_clamp_value.reset();
  EXPECT_TRUE(clamp_ops(unclamped, s, &cache).empty());
  // The MoE layer wires it to the experts' activation: the layer's forward bytes grow by 4 X.
  const auto act_forward = [&](const model_spec& model) {
    double bytes = 0;
    for (const op& o : ops_of(model, s, [](const build_context& c) {
           leaf_block b;
           push_moe_mlp(b, c);
         }))
      if (o.kind == op_kind::memory && o.pass == pass_kind::forward) bytes += o.bytes;
    return bytes;
  };
  EXPECT_EQ(act_forward(m) - act_forward(unclamped), 4 * X);
}

TEST(MoeExpertBias, ParametersOfEveryBiasByHand) {
  // Mixtral with add_linear_bias: per layer q, k, v (32 + 2 x 8) x 128 = 6144 and o 4096, the
  // router's 8, and each of 8 experts fc1 2 x 14336 + fc2 4096 = 32,768: 272,392 x 32 layers.
  model_spec m = catalogue::mixtral_8x7b;
  const double without = parameter_count(m, 32000);
  m.add_linear_bias = true;
  EXPECT_EQ(parameter_count(m, 32000) - without, 32 * (6144 + 4096 + 8 + 8 * 32768.0));
  // gpt-oss-120b, every linear biased (Megatron-Bridge add_bias_linear): per layer q and o
  // 2880 x 4096, k and v 2880 x 512, router 2880 x 128, 128 experts x 3 x 2880^2, two norms:
  // 3,211,966,080; biases 4096 + 2 x 512 + 2880 + 128 + 128 x 3 x 2880 = 1,114,048; x 36, + two
  // 201088 x 2880 embeddings and the final norm: 116,829,154,368 (the 2,304 sinks apart: the model
  // card's 116.83B).
  EXPECT_EQ(parameter_count(catalogue::gpt_oss_120b, 201088), 116829154368.0);
}

TEST(MoeAllToAll, DispatchedProbabilitiesTravelOnePerRoutedCopy) {
  // Mixtral padded to capacity 1 on ep 2 with dispatch_probs: each rank sends its 8192 routed copies
  // (4096 tokens x top-2) of 4096 bf16 values, and beside them one bf16 probability per copy
  // (token_dispatcher.py token_dispatch: the all-to-all of permuted_probs): 8192 x 2 B = 16,384 B,
  // not the whole [tokens, experts] map. Backward mirrors both.
  strategy_spec s = moe_job(dispatcher_kind::all2all, 2);
  s.dispatch_probs = true;
  const auto ops =
      ops_of(mixtral(true, 1.0), s, [](const build_context& c) { permutation_leaf(c, moe_token_counts(c)); });
  std::vector<double> fwd, bwd;
  for (const op& o : ops)
    if (o.kind == op_kind::collective && o.group == comm_group::ep)
      (o.pass == pass_kind::forward ? fwd : bwd).push_back(o.bytes);
  EXPECT_EQ(fwd, (std::vector<double>{8192.0 * 4096 * 2, 8192.0 * 2}));
  EXPECT_EQ(bwd, fwd);
  // ep 2 x etp 2: the probabilities are gathered over expert TP beside the rows (dispatch_postprocess):
  // both ETP ranks' 8192 copies, 2 x 16,384 B, after the rows' 2 x 67,108,864 B.
  s = moe_job(dispatcher_kind::all2all, 2, 2);
  s.dispatch_probs = true;
  std::vector<double> gathered;
  for (const op& o :
       ops_of(mixtral(true, 1.0), s, [](const build_context& c) { permutation_leaf(c, moe_token_counts(c)); }))
    if (o.kind == op_kind::collective && o.group == comm_group::etp && o.pass == pass_kind::forward)
      gathered.push_back(o.bytes);
  EXPECT_EQ(gathered, (std::vector<double>{2 * 8192.0 * 4096 * 2, 2 * 8192.0 * 2}));
}

TEST(MoeServing, ExpertsInsideTheTensorParallelGroupAllReduceOnce) {
  // A decode step of 4 sequences of Mixtral (top-2 of 8 experts, hidden 4096, bf16) on tp 2: every
  // rank holds the 4 tokens, so no token moves before the experts; ep 1 (each expert's FFN halved):
  // the rank's experts take all 4 x 2 = 8 copies; ep 2 (four experts each): 8 / 2 = 4 expected
  // copies. After them one all-reduce over tp sums the partial outputs of the 4 tokens: 4 x 4096 x 2
  // = 32,768 B (vLLM FusedMoE reduce_results). ep 4 spans two tp 2 replicas: all-to-all.
  model_spec m = mixtral(false, 1.0);
  const inference_forward decode{.kv_cached = 100, .routed_tokens = 4};
  for (const std::int64_t ep : {1, 2}) {
    SCOPED_TRACE(ep);
    const strategy_spec s{.seq_len = 1,
                          .micro_batch_size = 4,
                          .micro_batch_num = 1,
                          .world_size = 2,
                          .tp_size = 2,
                          .ep_size = ep,
                          .etp_size = 2 / ep,
                          .enable_sequence_parallel = false};
    std::vector<op> ops;
    recorded = &ops;
    build_context c = make_build_context(m, s, catalogue::h100_sxm, padded_vocab(m, 2));
    c.pricing = &record;
    c.inference = &decode;
    const moe_tokens tok = moe_token_counts(c);
    EXPECT_EQ(tok.local, 4);
    EXPECT_EQ(tok.expert, 8.0 / static_cast<double>(ep));
    const auto before = ops.size();
    (void)permutation_leaf(c, tok);
    for (std::size_t k = before; k < ops.size(); ++k) EXPECT_NE(ops[k].kind, op_kind::collective);
    ops.clear();
    (void)unpermutation_leaf(c, tok);
    std::vector<op> comm;
    for (const op& o : ops)
      if (o.kind == op_kind::collective) comm.push_back(o);
    ASSERT_EQ(comm.size(), 1U);
    EXPECT_EQ(comm[0].collective, collective_kind::all_reduce);
    EXPECT_EQ(comm[0].group, comm_group::tp);
    EXPECT_EQ(comm[0].bytes, 4 * 4096.0 * 2);
    recorded = nullptr;
  }
  const strategy_spec wide{.seq_len = 1,
                           .micro_batch_size = 4,
                           .micro_batch_num = 1,
                           .world_size = 4,
                           .tp_size = 2,
                           .ep_size = 4,
                           .enable_sequence_parallel = false};
  build_context c = make_build_context(m, wide, catalogue::h100_sxm, padded_vocab(m, 2));
  c.inference = &decode;
  EXPECT_FALSE(serving_tp_moe(c));
  EXPECT_EQ(moe_token_counts(c).local, 2);  // each rank routes its half of the replica's tokens
}

TEST(MoeDispatcher, UnknownNameListsTheFour) {
  strategy_spec s = moe_job(dispatcher_kind::invalid, 4);
  try {
    validate(s);
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"allgather\" or \"flex\""), std::string::npos) << e.what();
  }
}

TEST(YarnRope, MegatronRunsItUnfused) {
  // Llama 3 8B with YaRN (factor 8): Megatron turns TE's fused RoPE off for position_embedding_type
  // "yarn" (arguments.py; Megatron-Bridge fusions.py) and runs rope_utils.py's
  // _apply_rotary_pos_emb_bshd. 4096 tokens: q 4096 x 32 x 128 x 2 B = 33,554,432, k 4096 x 8 x
  // 128 x 2 B = 8,388,608, T = q + k = 41,943,040; the fp32 frequency table 4096 x 128 x 4 B =
  // 2,097,152 = F. Forward per tensor: cos and sin (2 F each), times mscale (2 F each), cast (1.5 F
  // each) and T·cos 2, -half 1, cat 2, ·sin 2, sum 3, final cat 2 (12 T): 12 kernels; both tensors
  // 24 kernels, 12 x 41,943,040 + 22 x 2,097,152 = 549,453,824 B. Backward: grad·sin 2, negation 1,
  // cat 2, grad·cos 2, sum 3, zero-filled slice gradient 1, its add 3 (14 T): 7 kernels a tensor, 14,
  // 587,202,560 B. Its peak: q and k plus three q-sized temporaries, 41,943,040 + 100,663,296 =
  // 142,606,336 B. Without YaRN, TE's fused RoPE: one kernel a tensor and pass, 2 T, peak q + k.
  model_spec m = catalogue::llama3_8b;
  m.yarn_rotary_scaling_factor = 8;
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 1, .world_size = 1};
  double peak = 0;
  const auto rope_ops = [&](const model_spec& model) {
    return ops_of(model, s, [&](const build_context& c) { peak = rotary_leaf(c).fwd_peak; });
  };
  const pass_tally unfused = tally(rope_ops(m));
  EXPECT_EQ(unfused.fwd, 549453824.0);
  EXPECT_EQ(unfused.fwd_n, 24U);
  EXPECT_EQ(unfused.bwd, 587202560.0);
  EXPECT_EQ(unfused.bwd_n, 14U);
  EXPECT_EQ(peak, 142606336.0);
  m.yarn_rotary_scaling_factor.reset();
  const pass_tally fused = tally(rope_ops(m));
  EXPECT_EQ(fused.fwd, 2 * 41943040.0);
  EXPECT_EQ(fused.fwd_n, 2U);
  EXPECT_EQ(fused.bwd, 2 * 41943040.0);
  EXPECT_EQ(fused.bwd_n, 2U);
  EXPECT_EQ(peak, 41943040.0);
}

TEST(YarnRope, FieldsAreChecked) {
  const auto refused = [](model_spec m) {
    try {
      validate(m);
    } catch (const config_error& e) { return std::string(e.field()); }
    return std::string();
  };
  model_spec m = catalogue::llama3_8b;
  m.yarn_rotary_scaling_factor = 0;
  EXPECT_EQ(refused(m), "model.yarn_rotary_scaling_factor");
  m.yarn_rotary_scaling_factor = 8;
  m.position_embedding_type = position_kind::none;
  EXPECT_EQ(refused(m), "model.yarn_rotary_scaling_factor");
  model_spec oss = catalogue::gpt_oss_120b;
  oss.activation_func_clamp_value = 0;
  EXPECT_EQ(refused(oss), "model.activation_func_clamp_value");
  oss.activation_func_clamp_value = 7;
  oss.use_swiglu = false;
  EXPECT_EQ(refused(oss), "model.activation_func_clamp_value");
  oss.activation_func_clamp_value.reset();
  EXPECT_EQ(refused(oss), "model.use_quick_geglu");
  // Quick-GEGLU outside routed experts (a dense MLP, a shared expert) is not modelled.
  model_spec shared = catalogue::gpt_oss_120b;
  shared.moe_shared_expert_intermediate_size = 2880;
  EXPECT_EQ(refused(shared), "model.use_quick_geglu");
  model_spec dense = catalogue::gpt_oss_120b;
  dense.dense_layers = 1;
  EXPECT_EQ(refused(dense), "model.use_quick_geglu");
}

TEST(LearnedPositions, TableCountedInParametersAndTheFirstStage) {
  // GPT-3 175B: 2048 positions x 12288 = 25165824 parameters beyond the rotary twin.
  model_spec rotary = catalogue::gpt3_175b;
  rotary.position_embedding_type = position_kind::rope;
  EXPECT_EQ(parameter_count(catalogue::gpt3_175b, 50432) - parameter_count(rotary, 50432), 2048.0 * 12288);
  // The embedding leaf on tp 2: 50432/2 vocabulary rows plus the whole serial position table.
  const strategy_spec s{.seq_len = 2048, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  const build_context c = make_build_context(catalogue::gpt3_175b, s, catalogue::h100_sxm, 50432);
  EXPECT_EQ(embedding_leaf(c).params, 25216.0 * 12288 + 2048.0 * 12288);
}

TEST(LearnedPositions, WordEmbeddingsAllReducedThenSliced) {
  // With positions Megatron all-reduces the full 2048 x 12288 bf16 output (no reduce-scatter), adds
  // the positions and clones this rank's sequence slice; backward all-gathers the slices' gradients.
  const strategy_spec s{.seq_len = 2048, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  const auto ops = ops_of(catalogue::gpt3_175b, s, [](const build_context& c) { embedding_leaf(c); });
  const double out = 2048.0 * 12288 * 2;
  std::vector<op> comm;
  double forward_bytes = 0;
  for (const op& o : ops) {
    if (o.kind == op_kind::collective) comm.push_back(o);
    if (o.kind == op_kind::memory && o.pass == pass_kind::forward) forward_bytes += o.bytes;
  }
  ASSERT_EQ(comm.size(), 2U);
  EXPECT_EQ(comm[0].collective, collective_kind::all_reduce);
  EXPECT_EQ(comm[0].bytes, out);
  EXPECT_EQ(comm[1].collective, collective_kind::all_gather);
  EXPECT_EQ(comm[1].pass, pass_kind::backward_input);
  // ids (4 B each) + lookup write/read 2·out, positions 2·out, add 3·out, transpose 2·out, clone 2·out/2.
  EXPECT_EQ(forward_bytes, 2048.0 * 4 + 2 * out + 2 * out + 3 * out + 2 * out + out);
}

TEST(LearnedPositions, TableRequiredAndLongEnough) {
  model_spec m = catalogue::gpt3_175b;
  m.max_position_embeddings = {};
  EXPECT_THROW(validate(m), config_error);
  const strategy_spec s{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 4, .world_size = 2, .tp_size = 2};
  try {
    validate(catalogue::gpt3_175b, s);
    FAIL() << "no error";
  } catch (const config_error& e) { EXPECT_EQ(e.field(), "strategy.seq_len"); }
}

TEST(ParameterCount, Gpt3WithBiasesAndPositionsByHand) {
  // Per layer, h = 12288: QKV 3h² + 3h, projection h² + h, fc1 4h² + 4h, fc2 4h² + h, two LayerNorms
  // 4h: 12h² + 13h = 1812099072; x 96 = 173961510912. Tied embedding 50257 x h = 617558016,
  // positions 2048 x h = 25165824, final LayerNorm 2h = 24576: 174604259328 (GPT-3's "175B").
  EXPECT_EQ(parameter_count(catalogue::gpt3_175b, 50257), 174604259328.0);
}

}  // namespace llmsim_test_moe_details

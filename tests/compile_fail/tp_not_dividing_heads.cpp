// A strategy whose tensor-parallel size does not divide the model's heads is refused at compile time.
// expect: strategy\.tp_size=\{\} must divide model\.head_num=\{\}
#include <llmsim/llmsim.hpp>

constexpr llmsim::model_spec model{.hidden_size = 4096, .head_num = 32, .kv_head_num = 8, .intermediate_size = 14336,
                                   .layer_num = 32, .vocab_size = 128256};
constexpr llmsim::strategy_spec strategy{.seq_len = 4096, .micro_batch_size = 1, .micro_batch_num = 8, .world_size = 12, .tp_size = 3};
constexpr llmsim::system_spec cluster = [] {
  llmsim::system_spec s{};
  s.accelerator.mem_gbs = 80;
  s.accelerator.op[0] = {.present = true, .tflops = 989, .efficient_factor = 0.6};
  s.accelerator.bandwidth[0] = {.present = true, .gbps = 3350, .efficient_factor = 0.8, .latency_us = 10};
  s.networks[0].name = "inter_node";
  s.networks[0].bandwidth = {.present = true, .gbps = 50, .efficient_factor = 0.7, .latency_us = 20};
  s.network_count = 1;
  return s;
}();
static_assert((llmsim::validate(model, strategy, cluster), true));

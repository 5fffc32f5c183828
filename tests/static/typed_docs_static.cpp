// The example of docs/typed_api.md ("Checking a budget at compile time"), verbatim between the
// markers, so the documented code keeps compiling.
#include <llmsim/llmsim.hpp>

namespace docs_example {
// ---- begin docs/typed_api.md example ----
using namespace llmsim::typed;
using namespace llmsim::literals;

constexpr auto llama3_70b = model("llama3_70b", embedding{.vocab = 128256, .hidden = 8192},
                                  repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128},
                                                         swiglu_mlp{.ffn = 28672}, rms_norm{}},
                                           80},
                                  lm_head{});
using layout = llmsim::parallel<llmsim::tp<8>, llmsim::pp<4>, llmsim::dp<2>, llmsim::micro_batches<32>>;

constexpr auto r = estimate(llama3_70b, layout{}, llmsim::hw::h100_sxm{});
static_assert(llmsim::fits_in<r.mem.peak_mem, 80_GiB>);
// ---- end docs/typed_api.md example ----
}  // namespace docs_example

// AMD Instinct MI355X catalogue constants against the AMD data sheet's figures: peak dense matrix
// 2.5 PFLOPS BF16 (2516.6 TFLOPS: 2400 MHz x 1024 matrix cores x 1024 FLOPs per clock), 5 PFLOPS
// FP8 (twice), 10 PFLOPS MXFP4 (four times); 288 GB HBM3E at 8 TB/s; 7 Infinity Fabric links of
// 153.6 GB/s in both directions; 8 GPUs per node.
#include <llmsim/llmsim.hpp>

namespace {
using namespace llmsim;
constexpr const system_spec& mi355x = catalogue::mi355x;
constexpr double peak(compute_kind k) { return mi355x.op(k).tflops; }
constexpr bool near(double a, double b) { return a - b < 0.05 && b - a < 0.05; }
constexpr double bf16 = 2400e6 * 1024 * 1024 / 1e12;  // 2516.58 TFLOPS
static_assert(near(peak(compute_kind::matmul), bf16) && near(peak(compute_kind::group_matmul), bf16));
static_assert(near(peak(compute_kind::fp8_matmul), 2 * bf16) && near(peak(compute_kind::fp8_group_matmul), 2 * bf16));
static_assert(near(peak(compute_kind::fp4_matmul), 4 * bf16) && near(peak(compute_kind::fp4_group_matmul), 4 * bf16));
static_assert(mi355x.accelerator.mem_gbs == 288);
// 8 TB/s = 8e12 B/s in the system format's 2^30 B/s.
static_assert(near(mi355x.memory(memory_kind::default_kind).gbps * 1073741824.0 / 1e9, 8000));
static_assert(mi355x.num_per_node == 8);
// Within the node, one direction of 7 links of 153.6 GB/s: 7 x 76.8 = 537.6 GB/s.
static_assert(mi355x.networks[0].name.view() == "high_intra_node");
static_assert(near(mi355x.networks[0].bandwidth.gbps * 1073741824.0 / 1e9, 7 * 153.6 / 2));
}  // namespace

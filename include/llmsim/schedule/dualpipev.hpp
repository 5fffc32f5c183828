/// \file llmsim/schedule/dualpipev.hpp
/// DualPipeV: the V-shaped, "cut-in-half" variant of DeepSeek's DualPipe (DeepSeek-V3 technical
/// report, arXiv 2412.19437, section 3.2.1; github deepseek-ai/DualPipe, dualpipe/dualpipev.py;
/// the cut-in-half derivation is Sea AI Lab's). `p` ranks hold 2p virtual stages in a V: rank r
/// runs chunk 0 = virtual stage r (micro-batches flow rank 0 → p-1) and chunk 1 = virtual stage
/// 2p-1-r (flow p-1 → 0), so rank 0 holds the embedding and the output layer + loss, and the last
/// rank hands its chunk-0 output to its own chunk 1.
///
/// A rank's order, in eight phases (F0/F1: forward of chunk 0/1, B: backward, "split": the
/// backward's input gradients now and its weight gradients deferred to a later W pass, which
/// takes the oldest deferred one, as in the zero-bubble schedules of Qi et al., ICLR 2024):
///  1. 2(p-r-1) F0: warm-up, filling the first leg of the V;
///  2. r+1 times F0 then F1;
///  3. p-r-1 times a split B1, its W at once, then F1;
///  4. m-2p+r+1 times the overlapped pairs F0 & B1, then F1 & B0 (the steady phase; on the last
///     rank the very first F0 and B1 run one after the other, not overlapped, which shortens the
///     bubble there);
///  5. p-r-1 times B1, then the overlapped pair F1 & B0;
///  6. r+1 times B1 then B0, of which the first r+1 backwards are whole and the last r+1 split;
///  7. p-r-1 times a W then a split B0;
///  8. the r+1 W left.
/// In an overlapped pair the forward of one micro-batch and the backward of another run together
/// (the forward's expert all-to-all hides under the backward's compute and vice versa; section
/// 3.2.1); the pair's first entry carries `overlapped_with_next`.
#pragma once

#include <llmsim/core/error.hpp>
#include <llmsim/schedule/pass.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// Why DualPipeV cannot run `m` micro-batches over `p` ranks; empty when it can. At least two
/// micro-batches per rank: dualpipev.py asserts num_chunks >= 2 * num_ranks (rank 0 runs 2p - 1
/// chunk-0 forwards in phases 1 and 2, and its steady phase needs one more). At least two ranks:
/// llmsim's own rule (the source asserts none), since one rank is no pipeline, only its two chunks.
constexpr std::string_view dualpipev_rule(std::int64_t p, std::int64_t m) {
  if (p < 2) return "DualPipeV needs strategy.pp_size >= 2";
  if (m < 2 * p) return "DualPipeV needs strategy.micro_batch_num >= 2 * strategy.pp_size (dualpipev.py)";
  return {};
}

namespace detail {
/// Refuses a DualPipeV job that breaks `dualpipev_rule`, naming the field and the values.
constexpr void validate_dualpipev(std::string_view api, std::int64_t p, std::int64_t m) {
  if (p < 2) report_error(api, "strategy.pp_size", "DualPipeV needs strategy.pp_size >= 2, got {}", p);
  if (m < 2 * p)
    report_error(api, "strategy.micro_batch_num",
                 "DualPipeV needs strategy.micro_batch_num={} >= 2 * strategy.pp_size={} (dualpipev.py asserts "
                 "num_chunks >= num_ranks * 2)",
                 m, p);
}

/// Appends one rank's passes, counting micro-batches per chunk: the k-th forward (backward) of a
/// chunk is micro-batch k, since both directions take micro-batches in order.
struct dualpipev_writer {
  std::vector<scheduled_pass> out;
  std::array<std::int64_t, 2> forwards{}, backwards{};
  std::vector<scheduled_pass> deferred;  ///< weight passes waiting, oldest first from `oldest`
  std::size_t oldest = 0;

  constexpr void forward(std::int64_t chunk, bool overlapped = false) {
    out.push_back({pass_type::forward, forwards[static_cast<std::size_t>(chunk)]++, chunk, overlapped});
  }
  /// A backward; `split`: input gradients only, the weight-gradient pass queued for `weight`.
  constexpr void backward(std::int64_t chunk, bool split = false) {
    const std::int64_t mb = backwards[static_cast<std::size_t>(chunk)]++;
    out.push_back({split ? pass_type::backward_input : pass_type::backward, mb, chunk, false});
    if (split) deferred.push_back({pass_type::backward_weight, mb, chunk, false});
  }
  constexpr void weight() { out.push_back(deferred[oldest++]); }
  /// The forward of `forward_chunk` overlapped with the backward of `backward_chunk`.
  constexpr void pair(std::int64_t forward_chunk, std::int64_t backward_chunk) {
    forward(forward_chunk, true);
    backward(backward_chunk);
  }
};
}  // namespace detail

/// The passes rank `rank` of `p` runs over `m` micro-batches under DualPipeV, in order (the
/// phases of the file comment). Chunk 0 is virtual stage `rank`, chunk 1 virtual stage 2p-1-rank
/// (`chunk_placement::v_shape`). Every rank runs each micro-batch's forward and backward of both
/// chunks once; of its backwards 2p-rank-1 are split, each followed later by its weight pass.
///
/// ```cpp
/// const auto order = llmsim::dualpipev_order(4, 8, 0);  // rank 0 of 4: 6 F0 first
/// ```
constexpr std::vector<scheduled_pass> dualpipev_order(std::int64_t p, std::int64_t m, std::int64_t rank) {
  detail::validate_dualpipev("llmsim::dualpipev_order", p, m);
  if (rank < 0 || rank >= p)
    detail::report_error("llmsim::dualpipev_order", "rank", "rank={} must be in [0, pp_size={})", rank, p);
  const std::int64_t r = rank, down = p - r - 1, up = r + 1;  // phases sized by the ranks below / above
  detail::dualpipev_writer w;
  w.out.reserve(static_cast<std::size_t>(4 * m + 2 * down + up));
  for (std::int64_t i = 0; i < 2 * down; ++i) w.forward(0);  // 1: warm-up
  for (std::int64_t i = 0; i < up; ++i) {                    // 2: both legs
    w.forward(0);
    w.forward(1);
  }
  for (std::int64_t i = 0; i < down; ++i) {  // 3: zero-bubble B1 W1 F1
    w.backward(1, true);
    w.weight();
    w.forward(1);
  }
  for (std::int64_t i = 0; i < m - 2 * p + up; ++i) {  // 4: steady phase
    if (i == 0 && r == p - 1) {
      w.forward(0);
      w.backward(1);
    } else {
      w.pair(0, 1);
    }
    w.pair(1, 0);
  }
  for (std::int64_t i = 0; i < down; ++i) {  // 5
    w.backward(1);
    w.pair(1, 0);
  }
  for (std::int64_t i = 0; i < up; ++i) {  // 6: the last r+1 of these 2(r+1) backwards split
    w.backward(1, 2 * i >= up);
    w.backward(0, 2 * i + 1 >= up);
  }
  for (std::int64_t i = 0; i < down; ++i) {  // 7
    w.weight();
    w.backward(0, true);
  }
  for (std::int64_t i = 0; i < up; ++i) w.weight();  // 8
  return std::move(w.out);
}

LLMSIM_END_NAMESPACE

/// \file llmsim/schedule/pass.hpp
/// The vocabulary every pipeline schedule is written in: a rank runs an ordered list of passes,
/// each the forward, backward, input-gradient backward or weight-gradient backward of one model
/// chunk for one micro-batch. Where a rank's chunks sit in the pipeline is the placement:
/// looped (Megatron-LM interleaving: chunk c of rank r is virtual stage c·p + r) or V-shaped
/// (DualPipeV: rank r holds virtual stages r and 2p - 1 - r, so rank 0 holds the first and the
/// last).
#pragma once

#include <llmsim/version.hpp>

#include <cstdint>

LLMSIM_BEGIN_NAMESPACE

/// What one pass computes.
enum class pass_type : std::uint8_t {
  forward,
  backward,         ///< input and weight gradients together (1F1B, interleaved 1F1B)
  backward_input,   ///< input gradients only (zero-bubble "B"; the weight gradients follow later)
  backward_weight,  ///< weight gradients only (zero-bubble "W")
};

/// One entry of a rank's schedule.
struct scheduled_pass {
  pass_type type = pass_type::forward;
  std::int64_t micro_batch = 0;
  std::int64_t chunk = 0;             ///< model chunk of this rank, 0 .. chunks - 1
  bool overlapped_with_next = false;  ///< DualPipe: runs together with the next entry (a forward-backward pair)
  friend constexpr bool operator==(const scheduled_pass&, const scheduled_pass&) = default;
};

/// How a rank's model chunks are placed over the virtual pipeline stages.
enum class chunk_placement : std::uint8_t { looped, v_shape };

/// Virtual stage of chunk `chunk` on rank `rank` of `p`.
constexpr std::int64_t virtual_stage(chunk_placement placement, std::int64_t p, std::int64_t rank, std::int64_t chunk) {
  if (placement == chunk_placement::v_shape) return chunk == 0 ? rank : 2 * p - 1 - rank;
  return chunk * p + rank;
}

/// Rank that runs virtual stage `stage` (of `p` ranks).
constexpr std::int64_t rank_of_stage(chunk_placement placement, std::int64_t p, std::int64_t stage) {
  if (placement == chunk_placement::v_shape) return stage < p ? stage : 2 * p - 1 - stage;
  return stage % p;
}

/// Chunk of virtual stage `stage` on its rank.
constexpr std::int64_t chunk_of_stage(chunk_placement placement, std::int64_t p, std::int64_t stage) {
  return placement == chunk_placement::v_shape ? (stage < p ? 0 : 1) : stage / p;
}

LLMSIM_END_NAMESPACE

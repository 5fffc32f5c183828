/// \file llmsim/typed.hpp
/// The typed compile-time API: models as Boost.Hana sequences of layer kinds, strategies and
/// accelerators as types, lowered into the specs of the core and estimated by the same
/// `llmsim::estimate` that serves JSON configs at run time.
///
/// ```cpp
/// using namespace llmsim::typed;
/// constexpr auto llama3_70b = model("llama3_70b", embedding{.vocab = 128256, .hidden = 8192},
///     repeated{decoder_layer{gqa_attention{.heads = 64, .kv_heads = 8, .head_dim = 128}, swiglu_mlp{.ffn = 28672}}, 80},
///     lm_head{});
/// constexpr auto r = estimate(llama3_70b, llmsim::parallel<llmsim::tp<8>, llmsim::pp<4>, llmsim::dp<2>>{}, llmsim::hw::h100_sxm{});
/// static_assert(llmsim::fits_on<r.mem.peak_mem, llmsim::hw::h100_sxm>);
/// ```
#pragma once

#include <llmsim/typed/choose.hpp>
#include <llmsim/typed/concepts.hpp>
#include <llmsim/typed/estimate.hpp>
#include <llmsim/typed/hardware.hpp>
#include <llmsim/typed/layers.hpp>
#include <llmsim/typed/model.hpp>
#include <llmsim/typed/parallel.hpp>

/// \file llmsim/search.hpp
/// `llmsim::search`: the exhaustive strategy search — every candidate of a `search_space`
/// (search/space.hpp) validated, its peak memory (every stage) checked against the device less a
/// margin, the fitting ones ranked by iteration time. SimuMax's first use case
/// (`search_best_parallel_strategy_with_recompute`, simumax/core/perf_llm.py), over the whole space
/// the engine models instead of tp x ep x pp x recompute.
///
/// ```cpp
/// llmsim::search_space sp{.gpus = 1024, .global_batch = 1024, .seq_len = 8192};
/// auto r = llmsim::search(*llmsim::catalogue::find_model("llama3-70b"),
///                         *llmsim::catalogue::find_system("h100-sxm"), sp, {.top_k = 5});
/// // r.top[0]: the fastest fitting strategy; r.evaluated, r.strategies_per_second
/// ```
///
/// Pruning (never drops a candidate that would rank in the top K, checked against brute force by
/// tests/runtime/test_search.cpp): within one group (a layout with its micro-batch size, ZeRO
/// stage, FP8 recipe and offload), recompute only trades time for memory — full recompute of n
/// layers holds no more memory than of n - 1 and takes no less time, and selective recompute and
/// no recompute hold at least what recomputing every layer holds. So each group first prices full
/// recompute of every layer (if even that does not fit, no variant fits), then finds the fewest
/// recomputed layers that fit by bisection, and prices more layers only while their time can still
/// enter the top K.
#pragma once

#include <llmsim/catalogue/catalogue.hpp>
#include <llmsim/estimate/estimate.hpp>
#include <llmsim/perf_llm.hpp>
#include <llmsim/search/space.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

LLMSIM_BEGIN_NAMESPACE

/// What the search ranks by. For a fixed GPU count and batch the three agree (MFU and GPU cost per
/// token are both inverse to the iteration time); `mfu` and `cost` name the column the user reads.
enum class search_objective : std::uint8_t { time, mfu, cost };

/// Progress of a running search (given to `search_options::progress`).
struct search_progress {
  std::int64_t done_layouts = 0, layouts = 0;
  std::int64_t evaluated = 0, fitting = 0;
  double best_time = 0;  ///< seconds; 0 while nothing fits
  double elapsed = 0;    ///< seconds
};

struct search_options {
  std::size_t top_k = 10;
  double memory_margin = 0.05;  ///< the budget is device memory x (1 - margin)
  search_objective objective = search_objective::time;
  unsigned threads = 2;
  bool keep_all = false;  ///< every fitting candidate in `fitting` (needs every one priced: no top-K bound)
  bool prune = true;      ///< the memory and top-K bounds above (off: brute force, for tests)
  const std::atomic<bool>* stop = nullptr;  ///< set (e.g. by SIGINT): workers stop, results so far are ranked
  std::function<void(const search_progress&)> progress{};  ///< called about 4 times a second from a worker
};

/// One priced candidate.
struct search_candidate {
  search_point point{};
  double time = 0;  ///< duration_time_per_iter, seconds
  double mfu = 0;
  double tokens_per_gpu = 0;  ///< tokens per second per GPU
  double peak_mem = 0;        ///< bytes, the largest stage peak (allocated)
  stage_kind peak_stage = stage_kind::first;
};

struct search_result {
  std::vector<search_candidate> top;      ///< the best K, best first
  std::vector<search_candidate> fitting;  ///< keep_all: every fitting candidate, ranked
  std::vector<search_candidate> pareto;   ///< keep_all: the memory-vs-time front, fastest first
  std::int64_t layouts = 0;
  std::int64_t evaluated = 0;        ///< candidates decided (priced, or excluded by a bound, or invalid)
  std::int64_t estimated = 0;        ///< full estimates run
  std::int64_t invalid = 0;          ///< refused by validate() or by the estimate (not modelled)
  std::int64_t over_memory = 0;      ///< priced or bounded over the budget
  std::int64_t bounded_by_time = 0;  ///< skipped: cannot enter the top K
  std::int64_t fitting_count = 0;
  double budget = 0;               ///< bytes
  double smallest_shortfall = -1;  ///< bytes over the budget of the least-memory candidate (-1: none priced)
  search_candidate closest{};      ///< that candidate
  double seconds = 0, strategies_per_second = 0;
  bool interrupted = false;
};

namespace detail {
/// Ranking: lower time first, then the lower canonical order.
constexpr bool ranks_before(const search_candidate& a, const search_candidate& b) {
  if (a.time != b.time) return a.time < b.time;
  return a.point.order < b.point.order;
}

/// Prices one candidate; false when validate() or the estimate refuses it.
inline bool price_candidate(const model_spec& m, const system_spec& sys, const search_space& sp, const search_point& p,
                            search_candidate& out, block_cache& blocks) {
  const strategy_spec s = to_strategy(p, sp);
  try {
    validate(m, s, sys);
    const estimate_result r = estimate_validated(m, s, sys, blocks);
    out.point = p;
    out.time = r.cost.duration_time_per_iter.value;
    out.mfu = r.cost.mfu;
    out.tokens_per_gpu = r.cost.throughput_per_accelerator;
    out.peak_mem = static_cast<double>(r.mem.peak_mem.value);
    out.peak_stage = r.stages[static_cast<std::size_t>(r.mem.peak_stage)].kind;
    return true;
  } catch (const config_error&) { return false; }
}

/// What one worker gathers.
struct search_worker_state {
  std::vector<search_candidate> best;  ///< heap of its best K (worst on top)
  std::vector<search_candidate> all;
  std::int64_t evaluated = 0, estimated = 0, invalid = 0, over_memory = 0, bounded = 0, fitting = 0;
  double shortfall = -1;
  search_candidate closest{};
};

/// State shared by the workers.
struct search_shared {
  std::atomic<std::int64_t> next_layout{0}, done_layouts{0}, evaluated{0}, fitting{0};
  std::atomic<double> threshold{std::numeric_limits<double>::infinity()};  ///< some worker's K-th best time
  std::atomic<double> best{0};
};

inline void lower_atomic(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {}
}

/// One worker's view of the search: prices candidates and keeps what `options` asks.
class search_worker {
 public:
  search_worker(const model_spec& m, const system_spec& sys, const search_space& sp, const search_options& o,
                search_shared& sh, double budget)
      : m_(m), sys_(sys), sp_(sp), o_(o), sh_(sh), budget_(budget) {}

  search_worker_state state;

  /// All recompute variants of one group.
  void run_group(const search_point& group) {
    const std::int64_t n = recompute_variant_count(group, sp_);
    if (!o_.prune || n <= 2) {  // nothing to bisect (no full recompute: none, selective)
      for (std::int64_t i = 0; i < n; ++i) price(recompute_variant(group, i));
      return;
    }
    const std::int64_t most = group.layout.max_stage_layers;
    search_candidate all_layers;
    const int full = price(recompute_variant(group, 1 + most), &all_layers);
    if (full < 0) {
      // Refused: the refusal is the group's (fp8 recipe, ZeRO, offload ...) when no recompute and
      // one recomputed layer are refused too; otherwise each variant is priced on its own.
      const int none = price(recompute_variant(group, 0));
      const int one = price(recompute_variant(group, 2));
      if (none < 0 && one < 0) {
        state.invalid += n - 3;
        state.evaluated += n - 3;
        sh_.evaluated.fetch_add(n - 3, std::memory_order_relaxed);
        return;
      }
      price(recompute_variant(group, 1));
      for (std::int64_t i = 3; i < n - 1; ++i) price(recompute_variant(group, i));
      return;
    }
    if (full == 0) {  // even recomputing every layer does not fit: nothing of the group does
      count_bounded_memory(n - 1);
      return;
    }
    // No recompute: if it fits, every full-recompute variant fits too (they hold less).
    search_candidate none;
    const int none_fits = price(recompute_variant(group, 0), &none);
    // Fewest full-recompute layers that fit: memory does not grow with more recomputed layers.
    // The first probe interpolates between no recompute and every layer (each recomputed layer
    // frees about the same activations), the second checks its neighbour; then bisection.
    std::int64_t lo = 1, hi = most;  // hi fits
    std::vector<std::pair<std::int64_t, search_candidate>> priced;
    std::int64_t tried_over = 0;  // probes that did not fit (all below `fewest`)
    if (none_fits == 1) hi = 1;
    std::int64_t guess = lo;
    if (none_fits == 0 && none.peak_mem > all_layers.peak_mem)
      guess = static_cast<std::int64_t>(static_cast<double>(most) * (none.peak_mem - budget_) /
                                        (none.peak_mem - all_layers.peak_mem)) +
              1;
    bool last_fit = false;
    for (int step = 0; lo < hi; ++step) {
      std::int64_t mid = lo + (hi - lo) / 2;
      if (step == 0) mid = guess < lo ? lo : (guess > hi - 1 ? hi - 1 : guess);
      if (step == 1) mid = last_fit ? hi - 1 : lo;
      search_candidate c;
      const int f = price(recompute_variant(group, 1 + mid), &c);
      if (f < 0) {  // not expected once "all layers" passed: price the rest one by one
        for (std::int64_t k = 1; k < most; ++k)
          if (k != mid) price(recompute_variant(group, 1 + k));
        price(recompute_variant(group, 1));
        return;
      }
      last_fit = f == 1;
      if (f == 1) {
        hi = mid;
        priced.emplace_back(mid, c);
      } else {
        lo = mid + 1;
        ++tried_over;
      }
    }
    const std::int64_t fewest = hi;
    count_bounded_memory(fewest - 1 - tried_over);  // fewer layers do not fit
    price(recompute_variant(group, 1));
    // Full recompute of `fewest`.. layers: time does not fall with more layers.
    for (std::int64_t k = fewest; k <= most; ++k) {
      if (k == most) break;  // priced first
      const search_candidate* known = find_priced(priced, k);
      search_candidate c;
      if (known != nullptr) {
        c = *known;
      } else if (price(recompute_variant(group, 1 + k), &c) != 1) {
        continue;
      }
      if (!o_.keep_all && c.time > sh_.threshold.load(std::memory_order_relaxed)) {
        std::int64_t rest = 0;
        for (std::int64_t j = k + 1; j < most; ++j) rest += find_priced(priced, j) == nullptr ? 1 : 0;
        state.bounded += rest;
        state.evaluated += rest;
        sh_.evaluated.fetch_add(rest, std::memory_order_relaxed);
        return;
      }
    }
  }

 private:
  /// 1: fits (kept), 0: over the budget, -1: refused. `out` receives the priced candidate.
  int price(const search_point& p, search_candidate* out = nullptr) {
    ++state.evaluated;
    sh_.evaluated.fetch_add(1, std::memory_order_relaxed);
    search_candidate c;
    ++state.estimated;
    if (!price_candidate(m_, sys_, sp_, p, c, blocks_)) {
      ++state.invalid;
      return -1;
    }
    if (out != nullptr) *out = c;
    if (c.peak_mem > budget_) {
      ++state.over_memory;
      const double over = c.peak_mem - budget_;
      // Ties go to the first candidate in enumeration order, so threads and pruning cannot change it.
      if (state.shortfall < 0 || over < state.shortfall ||
          (over == state.shortfall && c.point.order < state.closest.point.order)) {
        state.shortfall = over;
        state.closest = c;
      }
      return 0;
    }
    keep(c);
    return 1;
  }
  void keep(const search_candidate& c) {
    ++state.fitting;
    sh_.fitting.fetch_add(1, std::memory_order_relaxed);
    if (o_.keep_all) state.all.push_back(c);
    auto& h = state.best;
    if (h.size() < o_.top_k) {
      h.push_back(c);
      std::push_heap(h.begin(), h.end(), ranks_before);
    } else if (!h.empty() && ranks_before(c, h.front())) {
      std::pop_heap(h.begin(), h.end(), ranks_before);
      h.back() = c;
      std::push_heap(h.begin(), h.end(), ranks_before);
    }
    if (h.size() == o_.top_k && !h.empty()) lower_atomic(sh_.threshold, h.front().time);
    double b = sh_.best.load(std::memory_order_relaxed);
    while ((b == 0 || c.time < b) && !sh_.best.compare_exchange_weak(b, c.time, std::memory_order_relaxed)) {}
  }
  void count_bounded_memory(std::int64_t k) {
    if (k <= 0) return;
    state.over_memory += k;
    state.evaluated += k;
    sh_.evaluated.fetch_add(k, std::memory_order_relaxed);
  }
  static const search_candidate* find_priced(const std::vector<std::pair<std::int64_t, search_candidate>>& v,
                                             std::int64_t k) {
    for (const auto& [layers, c] : v)
      if (layers == k) return &c;
    return nullptr;
  }

  const model_spec& m_;
  const system_spec& sys_;
  const search_space& sp_;
  const search_options& o_;
  search_shared& sh_;
  double budget_;
  block_cache blocks_;  ///< a group's recompute variants share their layer blocks
};
}  // namespace detail

/// Refuses a space or options the search cannot mean, naming the field (`search.gpus`): the
/// command line's ranges (`llmsim search --gpus 1..2^24`); an empty space was a silent "nothing
/// fits".
inline void validate_search(const search_space& sp, const search_options& o) {
  constexpr std::string_view api = "llmsim::search";
  if (sp.gpus < 1 || sp.gpus > max_search_gpus)
    detail::report_error(api, "search.gpus", "search.gpus={} must be in [1, {}]", sp.gpus, max_search_gpus);
  if (sp.seq_len < 1 || sp.seq_len > max_dimension)
    detail::report_error(api, "search.seq_len", "search.seq_len={} must be in [1, {}]", sp.seq_len, max_dimension);
  if (sp.global_batch < 0 || sp.tokens_per_step < 0 || (sp.global_batch > 0) == (sp.tokens_per_step > 0))
    detail::report_error(api, "search.global_batch",
                         "give one of search.global_batch={} and search.tokens_per_step={}, positive", sp.global_batch,
                         sp.tokens_per_step);
  if (sp.tokens_per_step > 0 && sp.tokens_per_step % sp.seq_len != 0)
    detail::report_error(api, "search.tokens_per_step", "search.tokens_per_step={} must be a multiple of seq_len={}",
                         sp.tokens_per_step, sp.seq_len);
  if (sp.global_batch > max_dimension)
    detail::report_error(api, "search.global_batch", "search.global_batch={} exceeds {}", sp.global_batch,
                         max_dimension);
  // A margin of 1 or more leaves no budget: nothing fits, and the result says by how much.
  if (!(o.memory_margin >= 0 && o.memory_margin <= 1e6))
    detail::report_error(api, "search.memory_margin", "search.memory_margin={} must be a number from 0",
                         o.memory_margin);
}

/// The exhaustive search. Throws config_error when the model, the system or the space is invalid.
inline search_result search(const model_spec& m, const system_spec& sys, const search_space& sp,
                            const search_options& o = {}) {
  validate(m);
  validate(sys);
  validate_search(sp, o);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<search_layout> layouts = search_layouts(m, sp);
  // --allow tp-overlap added copies this system cannot price (a base with the overlap on leaves
  // its candidates to validation, one by one).
  if (std::any_of(layouts.begin(), layouts.end(), [](const search_layout& l) { return l.tp_overlap; }))
    validate_userbuffers_sms(sp.base, sys);
  const std::vector<fp8_recipe_kind> recipes = search_fp8_recipes(sp, sys);
  search_result out;
  out.layouts = static_cast<std::int64_t>(layouts.size());
  out.budget = static_cast<double>(device_memory(sys).value) * (1.0 - o.memory_margin);
  detail::search_shared sh;
  const unsigned n_threads = o.threads == 0 ? 1 : o.threads;
  std::vector<detail::search_worker> workers;
  workers.reserve(n_threads);
  for (unsigned i = 0; i < n_threads; ++i) workers.emplace_back(m, sys, sp, o, sh, out.budget);
  std::atomic<bool> stopped{false};
  const auto work = [&](unsigned id) {
    detail::search_worker& w = workers[id];
    auto last_report = std::chrono::steady_clock::now();
    for (;;) {
      const std::int64_t i = sh.next_layout.fetch_add(1);
      if (i >= static_cast<std::int64_t>(layouts.size())) break;
      if (o.stop != nullptr && o.stop->load(std::memory_order_relaxed)) {
        stopped = true;
        break;
      }
      for_each_group(layouts[static_cast<std::size_t>(i)], sp, recipes, static_cast<std::uint64_t>(i),
                     [&](const search_point& g) {
                       w.run_group(g);
                       return o.stop == nullptr || !o.stop->load(std::memory_order_relaxed);
                     });
      sh.done_layouts.fetch_add(1);
      const auto now = std::chrono::steady_clock::now();
      if (id == 0 && o.progress && now - last_report > std::chrono::milliseconds(250)) {
        last_report = now;
        o.progress({sh.done_layouts.load(), static_cast<std::int64_t>(layouts.size()), sh.evaluated.load(),
                    sh.fitting.load(), sh.best.load(), std::chrono::duration<double>(now - t0).count()});
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n_threads; ++i) threads.emplace_back(work, i);
  work(0);
  for (auto& t : threads) t.join();
  out.interrupted = stopped.load() || (o.stop != nullptr && o.stop->load());
  std::size_t kept = 0;
  for (const auto& w : workers) kept += w.state.all.size();
  out.fitting.reserve(kept);  // one allocation: growing it by doubling held up to twice the rows
  for (auto& w : workers) {
    auto& s = w.state;
    out.evaluated += s.evaluated;
    out.estimated += s.estimated;
    out.invalid += s.invalid;
    out.over_memory += s.over_memory;
    out.bounded_by_time += s.bounded;
    out.fitting_count += s.fitting;
    out.top.insert(out.top.end(), s.best.begin(), s.best.end());
    out.fitting.insert(out.fitting.end(), s.all.begin(), s.all.end());
    std::vector<search_candidate>().swap(s.all);  // freed before the next worker's rows are copied
    if (s.shortfall >= 0 &&
        (out.smallest_shortfall < 0 || s.shortfall < out.smallest_shortfall ||
         (s.shortfall == out.smallest_shortfall && s.closest.point.order < out.closest.point.order))) {
      out.smallest_shortfall = s.shortfall;
      out.closest = s.closest;
    }
  }
  std::sort(out.top.begin(), out.top.end(), detail::ranks_before);
  if (out.top.size() > o.top_k) out.top.resize(o.top_k);
  std::sort(out.fitting.begin(), out.fitting.end(), detail::ranks_before);
  double least = std::numeric_limits<double>::infinity();
  for (const search_candidate& c : out.fitting) {
    if (c.peak_mem < least) {
      out.pareto.push_back(c);
      least = c.peak_mem;
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.strategies_per_second = out.seconds > 0 ? static_cast<double>(out.evaluated) / out.seconds : 0;
  return out;
}

/// The strategy of a ranked candidate.
inline strategy_spec strategy_of(const search_candidate& c, const search_space& sp) { return to_strategy(c.point, sp); }

/// The candidate's compact strategy name (`catalogue::compact_strategy_name`), e.g.
/// `tp1_pp1_cp2ring_dp512_mbs1_mbc2_zero3_fp8delayed_full2_seq8192`. With the default base
/// strategy (`llmsim search`'s) it names the whole strategy: `catalogue::parse_strategy_name` reads
/// it back to `strategy_of(c, sp)` (`llmsim perf --strategy NAME`); a base with fields names do not
/// set (a strategy file's) keeps them only in `strategy_of`.
inline fixed_string<catalogue::strategy_name_capacity> search_candidate_name(const search_candidate& c,
                                                                             const search_space& sp) {
  return catalogue::compact_strategy_name(strategy_of(c, sp));
}

/// The answer of `search_best_parallel_strategy_with_recompute`.
struct best_parallel_strategy {
  bool found = false;
  strategy_spec strategy{};
  double mfu = 0;
  double duration_time_per_iter = 0;  ///< seconds
  double peak_mem = 0;                ///< bytes
  search_result search{};             ///< the whole search (every fitting candidate in `fitting`)
};

/// SimuMax's `PerfLLM.search_best_parallel_strategy_with_recompute` (simumax/core/perf_llm.py),
/// with its parameter names, on a configured `perf_llm` (its strategy gives every field the search
/// does not vary): tp from `tp_search_list` (SimuMax's default 1, 2, 4, 8 for dense models, 1 for
/// MoE), ep from `ep_search_list` (1, 2, 4, 8 for MoE), pp from `pp_search_list` (every size),
/// etp = tp when `use_etp` else 1, the fixed `micro_batch_size` with micro_batch_num =
/// global_batch_size / (dp x micro_batch_size), recompute none, selective and full over 1..L
/// layers; the ZeRO stage, FP8 recipe, optimizer offload and ZB-H1 / DualPipeV schedule (where
/// pp > 1) of the configured strategy, with cp 1 and no interleaving. A candidate fits when its
/// peak (reserved: peak / mem_factor, when `use_reserved_memory`) is at most device memory less
/// `gmi_error` GiB. The best is the highest MFU, as SimuMax picks it.
inline best_parallel_strategy search_best_parallel_strategy_with_recompute(
    const perf_llm& perf, std::int64_t world_size, double gmi_error, std::int64_t micro_batch_size,
    std::int64_t global_batch_size, std::vector<std::int64_t> tp_search_list = {},
    std::vector<std::int64_t> ep_search_list = {}, std::vector<std::int64_t> pp_search_list = {}, bool use_etp = false,
    bool use_reserved_memory = true) {
  constexpr std::string_view api = "llmsim::search_best_parallel_strategy_with_recompute";
  const auto refuse = [&](std::string_view name, const std::string& rule) {
    throw config_error(std::string(api), std::string(name), rule);
  };
  // The command line's ranges (llmsim search --gpus): a world of 1 .. 2^24 GPUs.
  if (world_size < 1 || world_size > max_search_gpus)
    refuse("world_size",
           "world_size=" + std::to_string(world_size) + " must be in [1, " + std::to_string(max_search_gpus) + "]");
  if (micro_batch_size < 1 || micro_batch_size > max_dimension)
    refuse("micro_batch_size", "micro_batch_size=" + std::to_string(micro_batch_size) + " must be at least 1");
  if (global_batch_size < 1 || global_batch_size > max_dimension)
    refuse("global_batch_size", "global_batch_size=" + std::to_string(global_batch_size) + " must be at least 1");
  if (!(gmi_error >= 0 && gmi_error <= 1e6))
    refuse("gmi_error", "gmi_error=" + std::to_string(gmi_error) + " must be in [0, 1e6] GiB");
  for (const auto* list : {&tp_search_list, &ep_search_list, &pp_search_list})
    for (const std::int64_t v : *list)
      if (v < 1 || v > world_size)
        refuse(list == &tp_search_list   ? "tp_search_list"
               : list == &ep_search_list ? "ep_search_list"
                                         : "pp_search_list",
               "every size must be in [1, world_size=" + std::to_string(world_size) + "], got " + std::to_string(v));
  const model_spec& m = perf.model();
  const strategy_spec& base = perf.strategy();
  search_space sp{.gpus = world_size, .global_batch = global_batch_size, .seq_len = base.seq_len};
  sp.base = base;
  const bool moe = is_moe(m);
  if (tp_search_list.empty())
    tp_search_list = moe ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{1, 2, 4, 8};
  if (ep_search_list.empty())
    ep_search_list = moe ? std::vector<std::int64_t>{1, 2, 4, 8} : std::vector<std::int64_t>{1};
  sp.tp = tp_search_list;
  sp.ep = ep_search_list;
  sp.pp = pp_search_list;
  sp.cp = {1};
  sp.mbs = {micro_batch_size};
  sp.max_mbs = micro_batch_size;
  sp.zero = {base.zero_state};
  sp.fp8 = false;
  sp.offload = false;
  sp.schedules = false;
  sp.vp = {1};
  best_parallel_strategy out;
  const double device = static_cast<double>(device_memory(perf.system()).value);
  const double budget = (device - gmi_error * 1024.0 * 1024.0 * 1024.0) * (use_reserved_memory ? base.mem_factor : 1.0);
  search_options o{.top_k = 1, .memory_margin = 1.0 - budget / device, .keep_all = true};
  out.search = search(m, perf.system(), sp, o);
  if (use_etp) {  // etp follows tp
    std::erase_if(out.search.fitting,
                  [](const search_candidate& c) { return c.point.layout.etp != c.point.layout.tp; });
  } else {
    std::erase_if(out.search.fitting, [](const search_candidate& c) { return c.point.layout.etp != 1; });
  }
  if (out.search.fitting.empty()) return out;
  const search_candidate& best = out.search.fitting.front();
  out.found = true;
  out.strategy = strategy_of(best, sp);
  out.mfu = best.mfu;
  out.duration_time_per_iter = best.time;
  out.peak_mem = best.peak_mem;
  return out;
}

LLMSIM_END_NAMESPACE

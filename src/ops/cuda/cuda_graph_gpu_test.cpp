// CUDA-graph decode (runner/cuda_graph_runner.h) against eager decode on the fixtures: batches of 3 and 5
// sequences (padded to the captured 4 and 8), prompts of different lengths, decode steps crossing a page
// boundary. Logits must match within bf16 tolerance, greedy tokens exactly wherever the eager margin is
// clear, the caches must agree, and no padding row may write a real page (unused slots stay NaN). Captured with
// the graph arena (cuda_runtime.h, DSERVE_GRAPH_ARENA=1): the graphs hold no allocator node.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/pdl_probe.h"
#include "model/deepseek_model.h"
#include "ops/cuda/gpu_test_util.h"
#include "runner/attn_metadata.h"
#include "runner/batch_engine.h"
#include "runner/engine_test_util.h"
#include "runner/cuda_graph_runner.h"
#include "runner/sequence_runner.h"

namespace ds {
namespace {

std::string fixture_dir(const std::string& name) {
  const char* env = std::getenv("DSERVE_SOURCE_DIR");
  return std::string(env && *env ? env : DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

struct Fixture {
  ModelConfig cfg;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<DeepseekModel> model;
};

Fixture load_fixture(const std::string& name) {
  Fixture f;
  auto cfg = load_model_config(fixture_dir(name));
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().message();
  f.cfg = cfg.value();
  auto w = load_weights(fixture_dir(name), f.cfg);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  f.ops = make_cuda_ops(0);
  f.model = std::make_unique<DeepseekModel>(f.cfg, w.value(), *f.ops);
  return f;
}

Tensor upload_ids(Ops& ops, const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), t.data_as<int32_t>());
  return ops.upload(t);
}

// The same random prompts (lens[i] tokens into tables[i], ids from `rng`) prefilled into both caches.
void prefill_both(Fixture& f, const std::vector<int>& lens, const std::vector<std::vector<int32_t>>& tables, int page,
                  KvCache& a, KvCache& b, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(f.cfg.vocab_size) - 1);
  for (size_t i = 0; i < lens.size(); ++i) {
    std::vector<int32_t> ids(lens[i]);
    for (auto& t : ids) t = tok(rng);
    AttnMetadata m = build_attn_metadata({SeqSlice{0, lens[i], &tables[i]}}, page, *f.ops);
    f.model->forward(upload_ids(*f.ops, ids), m, a);
    f.model->forward(upload_ids(*f.ops, ids), m, b);
  }
}

// Graphs up to batch 4 over the model's whole context, padding on `dummy_page`, quiet: the cases' common options.
CudaGraphOptions small_graph_options(const Fixture& f, int dummy_page) {
  CudaGraphOptions go;
  go.max_bs = 4;
  go.max_context = f.cfg.max_position_embeddings;
  go.dummy_page = dummy_page;
  go.verbose = false;
  return go;
}

// Every cache layer of the two runs: sequence b's slots at positions < written[b] equal (bf16 tolerance), its pages'
// other slots still NaN (the allocation poison: padding rows wrote only the dummy page).
void expect_caches_agree(const KvCache& eager, const KvCache& graphed, const std::vector<std::vector<int32_t>>& tables,
                         int page, const std::vector<int>& written, const std::string& what) {
  // The latent cache's layers, then V3.2's index-key cache's (the indexer's graph replays write those rows too).
  std::vector<std::pair<Tensor, Tensor>> layers;
  for (size_t l = 0; l < eager.latent.size(); ++l) layers.emplace_back(eager.latent[l], graphed.latent[l]);
  EXPECT_EQ(eager.index_k.size(), graphed.index_k.size());
  for (size_t l = 0; l < eager.index_k.size() && l < graphed.index_k.size(); ++l)
    layers.emplace_back(eager.index_k[l], graphed.index_k[l]);
  for (size_t l = 0; l < layers.size(); ++l) {
    Tensor a = test::to_host_f32(layers[l].first), c = test::to_host_f32(layers[l].second);
    const int64_t D = a.dim(1);
    int64_t written_bad = 0, unwritten_bad = 0;
    for (size_t b = 0; b < tables.size(); ++b)
      for (size_t p = 0; p < tables[b].size(); ++p)
        for (int o = 0; o < page; ++o) {
          const int64_t pos = static_cast<int64_t>(p) * page + o;
          const int64_t slot = static_cast<int64_t>(tables[b][p]) * page + o;
          for (int64_t j = 0; j < D; ++j) {
            const float x = a.f32()[slot * D + j], y = c.f32()[slot * D + j];
            if (pos < written[b]) {
              if (!(std::fabs(x - y) <= 3e-2f * (1.0f + std::fabs(x)))) ++written_bad;
            } else if (!std::isnan(y)) {
              ++unwritten_bad;
            }
          }
        }
    EXPECT_EQ(written_bad, 0) << what << " layer " << l;
    EXPECT_EQ(unwritten_bad, 0) << what << " layer " << l << ": a padding row wrote a real page";
  }
}

class CudaGraphTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    init_cuda_device(0);
    set_cuda_alloc_poison(true);
  }
};

TEST_P(CudaGraphTest, ReplayMatchesEagerDecode) {
  Fixture f = load_fixture(GetParam());
  const int page = 64, steps = 6;
  std::mt19937 rng(4242);
  for (int bs : {3, 5}) {
    const std::vector<int> all_lens = {61, 5, 30, 90, 12};  // 61 crosses a page during decode
    std::vector<int> lens(all_lens.begin(), all_lens.begin() + bs);
    // Pages from a shuffled pool (not the identity); the last page is the graphs' dummy.
    std::vector<std::vector<int32_t>> tables(bs);
    int total = 0;
    for (int b = 0; b < bs; ++b) total += (lens[b] + steps + page - 1) / page;
    std::vector<int32_t> pool(total);
    for (int i = 0; i < total; ++i) pool[i] = i;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int b = 0, k = 0; b < bs; ++b)
      for (int p = 0; p < (lens[b] + steps + page - 1) / page; ++p) tables[b].push_back(pool[k++]);
    KvCache eager = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
    KvCache graphed = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
    prefill_both(f, lens, tables, page, eager, graphed, rng);
    std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(f.cfg.vocab_size) - 1);
    CudaGraphOptions go;
    go.max_bs = 8;
    // Batch 5 runs on an explicit list (--cuda-graph-bs 6 1: the max from its largest), so it pads to 6, a size
    // outside SGLang's list, with one padding row; batch 3 on SGLang's list up to 8.
    if (bs == 5) {
      go.max_bs = 0;
      go.batch_sizes = {6, 1};
    }
    go.max_context = f.cfg.max_position_embeddings;
    go.dummy_page = total;
    go.verbose = false;
    auto g = CudaGraphRunner::create(*f.model, *f.ops, graphed, go);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    CudaGraphRunner& graphs = **g;
    // At batch 5 every capture's first attempt gets a region far too small (test-only DSERVE_GRAPH_ARENA_FIRST_KIB):
    // its allocations miss the arena, so the runner captures again on a region of what that capture needed, and
    // the replays below check the recaptured graphs.
    const bool recapture = bs == 5;
    // At batch 3 every kernel node gets the graph arena's L2 window (DSERVE_L2_PERSIST_ARENA): the replays below check
    // it changes nothing but cache policy.
    const bool l2_window = bs == 3;
    {
      test::ScopedEnv arena("DSERVE_GRAPH_ARENA", "1");  // the graph arena (cuda_runtime.h) under test, whatever the suite sets
      test::ScopedEnv first("DSERVE_GRAPH_ARENA_FIRST_KIB", recapture ? "4" : nullptr);
      test::ScopedEnv l2("DSERVE_L2_PERSIST_ARENA", l2_window ? "1" : "0");
      ASSERT_TRUE(graphs.capture().is_ok());
    }
    EXPECT_EQ(graphs.batch_sizes(), bs == 5 ? (std::vector<int>{1, 6}) : (std::vector<int>{1, 2, 4, 8}));
    // The captures' allocations come from the graph arena: no memory node sits between two kernels (how many edges
    // stay programmatic is CudaGraphArena's check: here the poison fills are plain launches between them).
    const CudaGraphStats& st = graphs.stats();
    std::printf("GRAPHSTATS %-8s bs %d: %lld kernel nodes, %lld memory nodes, %lld other nodes, %lld of %lld "
                "kernel-to-kernel edges programmatic, arena %zu MiB, %lld allocations missed it, %lld recaptures\n",
                GetParam().c_str(), bs, static_cast<long long>(st.kernel_nodes),
                static_cast<long long>(st.memory_nodes), static_cast<long long>(st.other_nodes),
                static_cast<long long>(st.programmatic_edges), static_cast<long long>(st.kernel_edges),
                st.arena_bytes >> 20, static_cast<long long>(st.arena_fallbacks),
                static_cast<long long>(st.arena_recaptures));
    EXPECT_EQ(st.memory_nodes, 0) << "capture allocations outside the graph arena";
    EXPECT_EQ(st.arena_fallbacks, 0);
    EXPECT_GT(st.kernel_nodes, 0);
    if (recapture) {
      EXPECT_EQ(st.arena_recaptures, static_cast<int64_t>(graphs.batch_sizes().size()));
    }
    int max_persist = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, 0), cudaSuccess);
    EXPECT_EQ(st.l2_window_nodes, l2_window && max_persist > 0 ? st.kernel_nodes : 0);

    std::vector<int32_t> next(bs);
    for (auto& t : next) t = tok(rng);
    int clear = 0;
    // Batch 5's inputs go over as a header copy and a 2D copy of the table rows (what a large batch or context
    // does), batch 3's in one copy (write_inputs).
    test::ScopedEnv copies("DSERVE_GRAPH_ONE_COPY", bs == 5 ? "0" : "1");
    for (int s = 0; s < steps; ++s) {
      std::vector<SeqSlice> slices;
      std::vector<DecodeSeq> seqs;
      for (int b = 0; b < bs; ++b) {
        const int32_t p = lens[b] + s;
        slices.push_back(SeqSlice{p, 1, &tables[b]});
        seqs.push_back(DecodeSeq{next[b], p, tables[b][p / page] * page + p % page, tables[b].data(),
                                 static_cast<int32_t>(tables[b].size())});
      }
      AttnMetadata m = build_attn_metadata(slices, page, *f.ops);
      Tensor want = f.ops->to_host(f.model->logits(f.model->forward(upload_ids(*f.ops, next), m, eager,
                                                                     AttnMode::kAbsorbed)));
      Tensor padded = graphs.replay(seqs);
      ASSERT_EQ(padded.dim(0), bs == 3 ? 4 : 6);
      Tensor got = f.ops->to_host(padded.rows(0, bs));
      const std::string what = GetParam() + " graph vs eager bs " + std::to_string(bs) + " step " + std::to_string(s);
      DS_EXPECT_CLOSE(got, want, 3e-2, 1e-2, what);
      const int64_t V = want.dim(1);
      for (int b = 0; b < bs; ++b) {
        const float* w = want.f32() + b * V;
        const float* gr = got.f32() + b * V;
        const int64_t top = std::max_element(w, w + V) - w;
        float second = -INFINITY;
        for (int64_t v = 0; v < V; ++v)
          if (v != top) second = std::max(second, w[v]);
        if (w[top] - second > 0.05f) {
          ++clear;
          EXPECT_EQ(std::max_element(gr, gr + V) - gr, top) << what << " seq " << b;
        }
        next[b] = static_cast<int32_t>(top);  // both paths continue with the eager greedy token
      }
    }
    std::printf("GRAPH %-8s bs %d: %d of %d greedy tokens with a clear margin compared\n", GetParam().c_str(), bs,
                clear, bs * steps);
    EXPECT_GT(clear, 0);
    // Caches: equal on every written slot; never-written slots of real pages still NaN (padding rows used only
    // the dummy page).
    std::vector<int> written(bs);
    for (int b = 0; b < bs; ++b) written[b] = lens[b] + steps;
    expect_caches_agree(eager, graphed, tables, page, written, GetParam());
  }
}

// Verify graphs (speculative decoding, tokens_per_seq 4): three sequences (padded to 4) each add a token and three
// drafts a step at consecutive positions, against the eager absorbed forward of the same rows: logits and hidden
// rows within bf16 tolerance, the caches equal where written and NaN elsewhere (the padding sequence's four rows
// stay on the dummy page, page size 16 < 4 rows never crossing into a real one). Step 2 crosses a page boundary.
TEST_P(CudaGraphTest, VerifyGraphsMatchEagerAbsorbedRows) {
  Fixture f = load_fixture(GetParam());
  const int page = 16, q = 4, steps = 3, bs = 3;
  std::mt19937 rng(99);
  const std::vector<int> lens = {13, 5, 30};
  std::vector<std::vector<int32_t>> tables(bs);
  int total = 0;
  for (int b = 0; b < bs; ++b)
    for (int p = 0; p < (lens[b] + q * steps + page - 1) / page; ++p) tables[b].push_back(total++);
  std::reverse(tables[1].begin(), tables[1].end());  // not the identity
  KvCache eager = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
  KvCache graphed = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
  prefill_both(f, lens, tables, page, eager, graphed, rng);
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(f.cfg.vocab_size) - 1);
  CudaGraphOptions go = small_graph_options(f, total);
  go.tokens_per_seq = q;
  go.batch_sizes = {1, 2, 4};  // (the speculative capture list has 3: three sequences then pad to 4 here)
  auto g = CudaGraphRunner::create(*f.model, *f.ops, graphed, go);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  CudaGraphRunner& graphs = **g;
  {
    test::ScopedEnv arena("DSERVE_GRAPH_ARENA", "1");
    ASSERT_TRUE(graphs.capture().is_ok());
  }
  EXPECT_EQ(graphs.stats().memory_nodes, 0);
  for (int s = 0; s < steps; ++s) {
    std::vector<SeqSlice> slices;
    std::vector<DecodeSeq> seqs;
    std::vector<std::vector<int32_t>> ids(bs), slots(bs);
    std::vector<int32_t> flat;
    for (int b = 0; b < bs; ++b) {
      const int32_t p = lens[b] + q * s;
      slices.push_back(SeqSlice{p, q, &tables[b]});
      for (int j = 0; j < q; ++j) {
        ids[b].push_back(tok(rng));
        slots[b].push_back(tables[b][(p + j) / page] * page + (p + j) % page);
      }
      flat.insert(flat.end(), ids[b].begin(), ids[b].end());
      DecodeSeq d{0, p, 0, tables[b].data(), static_cast<int32_t>(tables[b].size())};
      d.tokens = ids[b].data();
      d.slots = slots[b].data();
      seqs.push_back(d);
    }
    AttnMetadata m = build_attn_metadata(slices, page, *f.ops);
    Tensor h = f.model->forward(upload_ids(*f.ops, flat), m, eager, AttnMode::kAbsorbed);  // [bs * q, d]
    Tensor want = f.ops->to_host(f.model->logits(h));
    Tensor want_h = test::to_host_f32(h);
    Tensor padded = graphs.replay(seqs);
    ASSERT_EQ(padded.dim(0), 4 * q);
    const std::string what = GetParam() + " verify graph vs eager step " + std::to_string(s);
    DS_EXPECT_CLOSE(f.ops->to_host(padded.rows(0, bs * q)), want, 3e-2, 1e-2, what + " logits");
    DS_EXPECT_CLOSE(test::to_host_f32(graphs.hidden().rows(0, bs * q)), want_h, 3e-2, 1e-2, what + " hidden");
  }
  std::vector<int> written(bs);
  for (int b = 0; b < bs; ++b) written[b] = lens[b] + q * steps;
  expect_caches_agree(eager, graphed, tables, page, written, GetParam());
}

// MTP draft graphs (speculative decoding, 3 draft steps over verify graphs of 4 rows): after a verify replay, the
// draft replay's drafts against an eager chain on a second cache given the same verify rows (the eager verify
// forward's hidden), the same accepted rows (1, 3, 4 of 4; sequence 1's draft_steps positions run past its pages into
// the dummy page) and, at every chained step, the graph's own previous draft (so both condition on the same tokens):
// each draft equals the eager greedy token wherever the eager top-2 margin is clear.
TEST(CudaDraftGraphs, DraftsMatchAnEagerChain) {
  init_cuda_device(0);
  set_cuda_alloc_poison(true);
  for (const std::string fx : {"v3", "v3_fp8"}) {
    Fixture f = load_fixture(fx);
    ASSERT_GE(f.model->num_mtp_layers(), 1) << fx;
    const int page = 16, q = 4, S = 3, bs = 3;
    const int L = f.cfg.num_hidden_layers;
    std::mt19937 rng(5);
    const std::vector<int> lens = {9, 28, 14};  // 28 + 4 rows end sequence 1's second page
    const std::vector<int> valid = {1, 3, 4};
    std::vector<std::vector<int32_t>> tables(bs);
    int total = 0;
    for (int b = 0; b < bs; ++b) {
      // Sequence 1 gets pages only up to its verify rows: its chained positions past them go to the dummy page.
      const int need = b == 1 ? lens[b] + q : lens[b] + q + S;
      for (int p = 0; p < (need + page - 1) / page; ++p) tables[b].push_back(total++);
    }
    KvCache eager = make_kv_cache(*f.ops, f.cfg, page, total + 1, 1);
    KvCache graphed = make_kv_cache(*f.ops, f.cfg, page, total + 1, 1);
    std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(f.cfg.vocab_size) - 1);
    // Prompts: target and MTP caches of both filled eagerly (the MTP layer over each prompt's rows).
    for (int b = 0; b < bs; ++b) {
      std::vector<int32_t> ids(lens[b] + 1);
      for (auto& t : ids) t = tok(rng);
      const std::vector<int32_t> in(ids.begin(), ids.end() - 1), nx(ids.begin() + 1, ids.end());
      AttnMetadata m = build_attn_metadata({SeqSlice{0, lens[b], &tables[b]}}, page, *f.ops);
      for (KvCache* c : {&eager, &graphed}) {
        Tensor h = f.model->forward(upload_ids(*f.ops, in), m, *c);
        f.model->mtp_forward(0, upload_ids(*f.ops, nx), h, m, *c);
      }
    }
    CudaGraphOptions go = small_graph_options(f, total);
    go.tokens_per_seq = q;
    auto vg = CudaGraphRunner::create(*f.model, *f.ops, graphed, go);
    ASSERT_TRUE(vg.is_ok()) << vg.status().message();
    ASSERT_TRUE((*vg)->capture().is_ok());
    go.draft_steps = S;
    go.draft_hidden = (*vg)->hidden();
    auto dg = CudaGraphRunner::create(*f.model, *f.ops, graphed, go);
    ASSERT_TRUE(dg.is_ok()) << dg.status().message();
    ASSERT_TRUE((*dg)->capture().is_ok());
    // One verify step: q random rows a sequence on both caches.
    std::vector<std::vector<int32_t>> ids(bs), slots(bs), next(bs);
    std::vector<int32_t> flat;
    std::vector<SeqSlice> slices;
    std::vector<DecodeSeq> vseqs, dseqs;
    for (int b = 0; b < bs; ++b) {
      for (int j = 0; j < q; ++j) {
        ids[b].push_back(tok(rng));
        const int p = lens[b] + j;
        slots[b].push_back(tables[b][p / page] * page + p % page);
      }
      flat.insert(flat.end(), ids[b].begin(), ids[b].end());
      slices.push_back(SeqSlice{lens[b], q, &tables[b]});
      // The MTP layer's next ids: the accepted rows' successors, then the bonus token; rows past it 0.
      next[b].assign(q, 0);
      for (int j = 0; j + 1 < valid[b]; ++j) next[b][j] = ids[b][j + 1];
      next[b][valid[b] - 1] = tok(rng);
      DecodeSeq v{0, lens[b], 0, tables[b].data(), static_cast<int32_t>(tables[b].size())};
      v.tokens = ids[b].data();
      v.slots = slots[b].data();
      vseqs.push_back(v);
      DecodeSeq d = v;
      d.tokens = next[b].data();
      d.valid = valid[b];
      dseqs.push_back(d);
    }
    AttnMetadata m = build_attn_metadata(slices, page, *f.ops);
    Tensor h = f.model->forward(upload_ids(*f.ops, flat), m, eager, AttnMode::kAbsorbed);  // [bs * q, d]
    (void)(*vg)->replay(vseqs);
    const std::vector<std::vector<int32_t>> drafts = (*dg)->replay_drafts(dseqs);
    ASSERT_EQ(drafts.size(), static_cast<size_t>(bs));
    // The eager chain: the MTP layer over each sequence's accepted rows, its last row normed and headed, then one row
    // a step at the positions after it, fed the graph's drafts.
    std::vector<SeqSlice> first;
    std::vector<int32_t> first_ids;
    std::vector<int64_t> first_rows, last_rows;
    for (int b = 0; b < bs; ++b) {
      first.push_back(SeqSlice{lens[b], valid[b], &tables[b]});
      for (int j = 0; j < valid[b]; ++j) {
        first_ids.push_back(next[b][j]);
        first_rows.push_back(b * q + j);
      }
      last_rows.push_back(static_cast<int64_t>(first_ids.size()) - 1);
    }
    Tensor z = f.model->mtp_forward(0, upload_ids(*f.ops, first_ids), f.ops->select_rows(h, first_rows),
                                    build_attn_metadata(first, page, *f.ops), eager, AttnMode::kAbsorbed);
    Tensor zn = f.model->mtp_norm(0, f.ops->select_rows(z, last_rows));  // [bs, d]
    int clear = 0, compared = 0;
    for (int j = 0; j < S; ++j) {
      Tensor logits = f.ops->to_host(f.model->mtp_head(0, zn));  // [bs, vocab]
      const int64_t V = logits.dim(1);
      std::vector<int32_t> fed(bs);
      for (int b = 0; b < bs; ++b) {
        const float* w = logits.f32() + b * V;
        const int64_t top = std::max_element(w, w + V) - w;
        float second = -INFINITY;
        for (int64_t v = 0; v < V; ++v)
          if (v != top) second = std::max(second, w[v]);
        ++compared;
        if (w[top] - second > 0.05f) {
          ++clear;
          EXPECT_EQ(drafts[b][j], top) << fx << " sequence " << b << " draft " << j;
        }
        fed[b] = drafts[b][j];
      }
      if (j + 1 == S) break;
      std::vector<SeqSlice> chain;
      for (int b = 0; b < bs; ++b) chain.push_back(SeqSlice{lens[b] + valid[b] - 1 + j + 1, 1, &tables[b]});
      // Sequence 1's chained positions past its pages: the eager side has no page there either, so it gets the
      // dummy page as the graph does.
      std::vector<std::vector<int32_t>> padded_tables = tables;
      for (auto& t : padded_tables) t.resize(t.size() + 2, total);
      for (int b = 0; b < bs; ++b) chain[b].pages = &padded_tables[b];
      zn = f.model->mtp_norm(0, f.model->mtp_forward(0, upload_ids(*f.ops, fed), zn,
                                                      build_attn_metadata(chain, page, *f.ops), eager,
                                                      AttnMode::kAbsorbed));
    }
    std::printf("DRAFTGRAPH %s: %d of %d drafts with a clear eager margin compared\n", fx.c_str(), clear, compared);
    EXPECT_GT(clear, 0) << fx;
    // The MTP cache rows of the accepted positions agree (written by both first forwards).
    Tensor a = test::to_host_f32(eager.latent[L]), c = test::to_host_f32(graphed.latent[L]);
    const int64_t D = a.dim(1);
    int64_t bad = 0;
    for (int b = 0; b < bs; ++b)
      for (int p = 0; p < lens[b] + valid[b]; ++p) {
        const int64_t slot = static_cast<int64_t>(tables[b][p / page]) * page + p % page;
        for (int64_t k = 0; k < D; ++k) {
          const float x = a.f32()[slot * D + k], y = c.f32()[slot * D + k];
          if (!(std::fabs(x - y) <= 3e-2f * (1.0f + std::fabs(x)))) ++bad;
        }
      }
    EXPECT_EQ(bad, 0) << fx << ": MTP cache rows of accepted positions differ";
  }
}

// greedy_ids graphs (bench-one-batch): each replay writes its rows' greedy tokens into its own ids input and the next
// replay with ids_on_device decodes them. The eager run takes the argmax of the graph's previous logits (the tokens
// the graph must have kept): logits equal within bf16 tolerance at every step, so a token the graph failed to
// keep, or kept for the wrong row, shows. The logits returned stay the graph's output.
TEST(CudaGraphGreedyIds, NextReplayDecodesTheKeptTokens) {
  init_cuda_device(0);
  set_cuda_alloc_poison(true);
  Fixture f = load_fixture("v2_lite");
  const int page = 64, steps = 5, bs = 3;
  std::mt19937 rng(77);
  const std::vector<int> lens = {40, 7, 63};  // 63 crosses a page at the first decode step
  std::vector<std::vector<int32_t>> tables(bs);
  int total = 0;
  for (int b = 0; b < bs; ++b)
    for (int p = 0; p < (lens[b] + steps + page - 1) / page; ++p) tables[b].push_back(total++);
  KvCache eager = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
  KvCache graphed = make_kv_cache(*f.ops, f.cfg, page, total + 1, 0);
  prefill_both(f, lens, tables, page, eager, graphed, rng);
  std::uniform_int_distribution<int32_t> tok(2, static_cast<int32_t>(f.cfg.vocab_size) - 1);
  CudaGraphOptions go = small_graph_options(f, total);
  go.greedy_ids = true;
  auto g = CudaGraphRunner::create(*f.model, *f.ops, graphed, go);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_TRUE((*g)->capture().is_ok());
  std::vector<int32_t> next(bs);
  for (auto& t : next) t = tok(rng);
  for (int s = 0; s < steps; ++s) {
    std::vector<SeqSlice> slices;
    std::vector<DecodeSeq> seqs;
    for (int b = 0; b < bs; ++b) {
      const int32_t p = lens[b] + s;
      slices.push_back(SeqSlice{p, 1, &tables[b]});
      // From the second step the host's tokens are wrong on purpose: the graph must use the ones it kept.
      seqs.push_back(DecodeSeq{s == 0 ? next[b] : 0, p, tables[b][p / page] * page + p % page, tables[b].data(),
                               static_cast<int32_t>(tables[b].size())});
    }
    AttnMetadata m = build_attn_metadata(slices, page, *f.ops);
    Tensor want = f.ops->to_host(f.model->logits(f.model->forward(upload_ids(*f.ops, next), m, eager,
                                                                   AttnMode::kAbsorbed)));
    Tensor got = f.ops->to_host((*g)->replay(seqs, /*ids_on_device=*/s > 0).rows(0, bs));
    (*g)->synchronize();
    DS_EXPECT_CLOSE(got, want, 3e-2, 1e-2, "greedy_ids graph vs eager step " + std::to_string(s));
    const int64_t V = got.dim(1);
    for (int b = 0; b < bs; ++b) {
      const float* gr = got.f32() + b * V;
      next[b] = static_cast<int32_t>(std::max_element(gr, gr + V) - gr);  // what the graph kept (first maximum)
    }
  }
}

// The statistics see memory nodes where there are some: without the arena (DSERVE_GRAPH_ARENA=0) the same
// captures hold the stream-ordered allocator's alloc / free nodes and keep fewer programmatic edges (without
// poisoning, whose fills are plain launches; the share is printed: the rest are edges into plain launches, as
// after a join, and cross-stream ones).
TEST(CudaGraphArena, StatsSeeTheAllocatorsNodes) {
  init_cuda_device(0);
  set_cuda_alloc_poison(false);
  Fixture f = load_fixture("v2_lite");
  KvCache c = make_kv_cache(*f.ops, f.cfg, 64, 4, 0);
  auto capture = [&](bool arena) {
    test::ScopedEnv env("DSERVE_GRAPH_ARENA", arena ? "1" : "0");
    CudaGraphOptions go;
    go.max_bs = 2;
    go.max_context = 128;
    go.dummy_page = 3;
    go.verbose = false;
    CudaGraphStats st;
    auto g = CudaGraphRunner::create(*f.model, *f.ops, c, go);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (g.is_ok()) {
      EXPECT_TRUE((*g)->capture().is_ok());
      st = (*g)->stats();
    }
    return st;
  };
  const CudaGraphStats with = capture(true), without = capture(false);
  std::printf("GRAPHARENA v2_lite bs 1, 2: memory nodes %lld without the arena, %lld with; programmatic edges %lld "
              "of %lld without, %lld of %lld with\n",
              static_cast<long long>(without.memory_nodes), static_cast<long long>(with.memory_nodes),
              static_cast<long long>(without.programmatic_edges), static_cast<long long>(without.kernel_edges),
              static_cast<long long>(with.programmatic_edges), static_cast<long long>(with.kernel_edges));
  EXPECT_GT(without.memory_nodes, 0);
  EXPECT_EQ(with.memory_nodes, 0);
  EXPECT_EQ(with.kernel_nodes, without.kernel_nodes) << "the same kernels either way";
  if (kernels::pdl_enabled()) {
    EXPECT_GT(with.programmatic_edges, without.programmatic_edges);
  }
}

// Through the serving engine (scheduler -> BatchRunner -> graph replay for decode-only steps): greedy
// outputs with graphs equal those without, step by step, until the eager run reaches a near-tie. Both with
// the overlap schedule (decodes planned behind a step in flight read their input token from the device's
// token store, inside the graph when replayed) against the serial eager run.
// The engine with graphs and overlap against eager without: v3, and v32 with prompts past its index_topk of 64 (the
// graphs' indexer then selects).
class CudaGraphEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphEngine, GreedyMatchesEager) {
  const std::string model = GetParam();
  struct Run {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::vector<int32_t>> tokens;
    std::map<std::string, std::vector<TokenLogprob>> lps;
    size_t finished = 0;
    uint64_t planned_ahead = 0;
  };
  auto serve = [&model](bool graphs, bool overlap, const std::vector<std::vector<int32_t>>& prompts, Run& run) {
    BatchEngineOptions o;
    o.model_path = fixture_dir(model);
    o.device = "cuda";
    o.max_total_tokens = 4096;
    o.max_running_requests = 8;
    o.disable_cuda_graph = !graphs;
    o.disable_overlap_schedule = !overlap;
    // As `serve --cuda-graph-bs 1 5 16`: under the 8-request cap the engine captures 1, 5 and 8 (the cap added where
    // the list went past it), so 2-4 running sequences pad to 5.
    o.cuda_graph_bs = {1, 5, 16};
    o.cuda_graph_max_bs = 16;
    o.verbose = false;
    auto e = make_batch_engine(o);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    // Every request queued before the first step, so each run's steps do not depend on when the submits reached the
    // engine thread (a first step with fewer prompts prefills them in other batches: other bf16 roundings, which this
    // chaotic fixture turns into log-prob differences past the bound; s64's first device run saw 0.149 at r1 step 1).
    (*e)->pause(PauseMode::kInPlace);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.rid = "r" + std::to_string(i);
      r.input_ids = prompts[i];
      r.sampling.max_new_tokens = 10;
      r.sampling.temperature = 0;
      r.sampling.ignore_eos = true;
      r.return_logprob = true;
      r.top_logprobs_num = 2;
      ASSERT_TRUE((*e)->submit(r, [&run](EngineEvent ev) {
                     std::lock_guard<std::mutex> lock(run.mu);
                     auto& t = run.tokens[ev.rid];
                     t.insert(t.end(), ev.new_tokens.begin(), ev.new_tokens.end());
                     auto& l = run.lps[ev.rid];
                     l.insert(l.end(), ev.output_logprobs.begin(), ev.output_logprobs.end());
                     if (ev.finished) ++run.finished;
                     run.cv.notify_all();
                   }).is_ok());
    }
    (*e)->resume();
    std::unique_lock<std::mutex> lock(run.mu);
    ASSERT_TRUE(run.cv.wait_for(lock, std::chrono::seconds(120), [&] { return run.finished == prompts.size(); }));
    lock.unlock();
    run.planned_ahead = (*e)->stats().num_steps_planned_ahead;
    (*e)->shutdown();
  };
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> tok(2, 1000);
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int> lens = model == "v32" ? std::vector<int>{7, 90, 20, 70, 3} : std::vector<int>{7, 63, 20, 41, 3};
  for (int len : lens) {  // up to 5 running sequences: decode steps pad to the graph of 5
    prompts.emplace_back(len);
    for (auto& t : prompts.back()) t = tok(rng);
  }
  Run eager, graphed, eager_overlap;
  serve(false, false, prompts, eager);
  serve(true, true, prompts, graphed);
  serve(false, true, prompts, eager_overlap);
  EXPECT_EQ(eager.planned_ahead, 0u);
  EXPECT_GT(graphed.planned_ahead, 5u);
  EXPECT_GT(eager_overlap.planned_ahead, 5u);
  int compared = 0;
  for (Run* other : {&graphed, &eager_overlap})
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string rid = "r" + std::to_string(i);
      const auto& a = eager.tokens[rid];
      const auto& b = other->tokens[rid];
      const auto& la = eager.lps[rid];
      const auto& lb = other->lps[rid];
      ASSERT_EQ(a.size(), 10u);
      ASSERT_EQ(b.size(), 10u);
      ASSERT_EQ(la.size(), 10u);
      ASSERT_EQ(lb.size(), 10u);
      for (size_t s = 0; s < a.size(); ++s) {
        ASSERT_GE(la[s].top.size(), 2u);
        if (la[s].top[0].first - la[s].top[1].first < 0.05f) break;  // near-tie: the runs may part here
        EXPECT_EQ(a[s], b[s]) << rid << " step " << s;
        EXPECT_NEAR(la[s].logprob, lb[s].logprob, 5e-2) << rid << " step " << s;
        if (a[s] != b[s]) break;
        ++compared;
      }
    }
  std::printf("GRAPH engine %s: %d greedy steps compared (graphed + overlap, eager + overlap), identical; "
              "steps planned ahead %llu / %llu\n", model.c_str(), compared, static_cast<unsigned long long>(graphed.planned_ahead),
              static_cast<unsigned long long>(eager_overlap.planned_ahead));
  EXPECT_GT(compared, 20);
}

// The expert distribution recorder through the CUDA graphs: 3 running sequences replay the graph of 5 (two padding
// rows a decode step), and every MoE layer still counts exactly top_k picks for each token forwarded (prompts, and
// outputs but each request's last), eager or graphed; the dense layer none.
TEST(CudaGraphExperts, RecorderLeavesOutThePadding) {
  const auto counts = [](bool graphs) {
    BatchEngineOptions o;
    o.model_path = fixture_dir("v3");
    o.device = "cuda";
    o.max_total_tokens = 4096;
    o.max_running_requests = 8;
    o.disable_cuda_graph = !graphs;
    o.cuda_graph_bs = {1, 5, 16};
    o.cuda_graph_max_bs = 16;
    o.disable_radix_cache = true;
    o.expert_recorder_mode = "stat";
    o.verbose = false;
    auto e = make_batch_engine(o);
    EXPECT_TRUE(e.is_ok()) << e.status().message();
    std::vector<int64_t> sums;
    if (!e.is_ok()) return sums;
    std::string path;
    EXPECT_TRUE((*e)->expert_distribution(ExpertRecordOp::kStart, &path).is_ok());
    std::mutex mu;
    std::condition_variable cv;
    size_t finished = 0;
    const int lens[3] = {7, 30, 12};
    (*e)->pause(PauseMode::kInPlace);
    for (int i = 0; i < 3; ++i) {
      EngineRequest r;
      r.rid = "x" + std::to_string(i);
      r.input_ids.assign(static_cast<size_t>(lens[i]), 5 + i);
      r.sampling.max_new_tokens = 9;
      r.sampling.temperature = 0;
      r.sampling.ignore_eos = true;
      EXPECT_TRUE((*e)->submit(r, [&](EngineEvent ev) {
                       std::lock_guard<std::mutex> lock(mu);
                       if (ev.finished) ++finished;
                       cv.notify_all();
                     }).is_ok());
    }
    (*e)->resume();
    {
      std::unique_lock<std::mutex> lock(mu);
      EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished == 3; }));
    }
    if (graphs) EXPECT_GT((*e)->stats().num_graph_steps, 5u);
    EXPECT_TRUE((*e)->expert_distribution(ExpertRecordOp::kDump, &path).is_ok());
    std::ifstream in(path);
    const nlohmann::json d = nlohmann::json::parse(in);
    std::remove(path.c_str());
    for (const auto& row : d["logical_count"][0]) {
      int64_t sum = 0;
      for (const auto& c : row) sum += c.get<int64_t>();
      sums.push_back(sum);
    }
    return sums;
  };
  const ModelConfig cfg = load_model_config(fixture_dir("v3")).value();
  const int64_t forwarded = 7 + 30 + 12 + 3 * 8;
  std::vector<int64_t> want;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) want.push_back(cfg.is_moe_layer(l) ? forwarded * cfg.num_experts_per_tok : 0);
  EXPECT_EQ(counts(false), want);
  EXPECT_EQ(counts(true), want);
}

// return_hidden_states on the GPU: 4 requests decoding through the graph of 5 (the graphs keep their hidden rows;
// overlap scheduling on), 3 of them asking: every prompt row and one row a fed output token, each the CPU backend's
// row of one prefill of the same tokens up to bf16 (see below); the request that did not ask gets none.
TEST(CudaGraphHidden, RowsMatchTheCpuPrefill) {
  BatchEngineOptions o;
  o.model_path = fixture_dir("v3");
  o.device = "cuda";
  o.max_total_tokens = 4096;
  o.max_running_requests = 8;
  o.cuda_graph_bs = {1, 5, 16};
  o.cuda_graph_max_bs = 16;
  o.enable_return_hidden_states = true;
  o.enable_return_routed_experts = true;
  o.verbose = false;
  auto e = make_batch_engine(o);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  std::map<std::string, std::vector<int32_t>> routed;
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, std::vector<std::vector<float>>> rows;  // prompt rows, then output rows
  std::map<std::string, std::vector<int32_t>> prompts;
  const int lens[4] = {7, 30, 12, 19};
  constexpr int kNew = 9;
  (*e)->pause(PauseMode::kInPlace);
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.rid = "h" + std::to_string(i);
    std::mt19937 rng(40 + i);
    std::uniform_int_distribution<int32_t> tok(2, 1000);
    for (int k = 0; k < lens[i]; ++k) r.input_ids.push_back(tok(rng));
    r.sampling.max_new_tokens = kNew;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.return_hidden_states = i != 3;
    r.return_routed_experts = i != 3;
    ASSERT_TRUE((*e)->submit(r, [&](EngineEvent ev) {
                     std::lock_guard<std::mutex> lock(mu);
                     auto& t = tokens[ev.rid];
                     t.insert(t.end(), ev.new_tokens.begin(), ev.new_tokens.end());
                     auto& h = rows[ev.rid];
                     h.insert(h.end(), ev.hidden_prompt.begin(), ev.hidden_prompt.end());
                     h.insert(h.end(), ev.hidden_output.begin(), ev.hidden_output.end());
                     if (ev.finished) routed[ev.rid] = ev.routed_experts;
                     if (ev.finished) ++finished;
                     cv.notify_all();
                   }).is_ok());
    prompts[r.rid] = r.input_ids;
  }
  (*e)->resume();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished == 4; }));
  }
  EXPECT_GT((*e)->stats().num_graph_steps, 5u);
  (*e)->shutdown();
  EXPECT_TRUE(rows["h3"].empty());
  EXPECT_TRUE(routed["h3"].empty());
  const ModelConfig cfg = load_model_config(fixture_dir("v3")).value();
  auto w = load_weights(fixture_dir("v3"), cfg).value();
  auto cpu = make_cpu_ops();
  DeepseekModel model(cfg, w, *cpu);
  // This random fixture is chaotic under bf16 (a router near-tie picks another expert: s68a saw rows at 0.10 and 0.24
  // relative error among rows at ~1e-2), so the rows are checked by what a mapping or layout bug would break: each row
  // is nearest its own position's reference row (another position's is ~1.4 away), and most rows are close.
  std::vector<double> rels;
  int64_t picks = 0, same_picks = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string rid = "h" + std::to_string(i);
    const std::vector<int32_t>& p = prompts[rid];
    std::vector<int32_t> fed = p;
    ASSERT_EQ(tokens[rid].size(), static_cast<size_t>(kNew));
    fed.insert(fed.end(), tokens[rid].begin(), tokens[rid].end() - 1);
    ASSERT_EQ(rows[rid].size(), fed.size()) << rid;
    const Tensor ref = SequenceRunner(model, *cpu).hidden_states(fed);  // [fed, d]
    const int64_t d = ref.dim(1);
    // Routed experts: each fed token's picks, 0 in the dense layer; agreeing with the CPU's but where bf16 flips one.
    const Tensor ref_ids = SequenceRunner(model, *cpu).routed_experts(fed);  // [fed, layers * top_k]
    const int64_t width = ref_ids.dim(1), k = cfg.num_experts_per_tok;
    ASSERT_EQ(static_cast<int64_t>(routed[rid].size()), static_cast<int64_t>(fed.size()) * width) << rid;
    for (int64_t t = 0; t < static_cast<int64_t>(fed.size()); ++t)
      for (int64_t c0 = 0; c0 < width; c0 += k) {  // a layer's picks, compared as sets (the order is the kernel's)
        std::set<int32_t> want;
        for (int64_t j = 0; j < k; ++j) want.insert(ref_ids.data_as<int32_t>()[t * width + c0 + j]);
        for (int64_t j = 0; j < k; ++j) {
          const int32_t got = routed[rid][static_cast<size_t>(t * width + c0 + j)];
          if (!cfg.is_moe_layer(static_cast<int>(c0 / k))) {
            EXPECT_EQ(got, 0) << rid << " token " << t;
            continue;
          }
          EXPECT_TRUE(got >= 0 && got < cfg.n_routed_experts) << got;
          ++picks;
          same_picks += want.count(got);
        }
      }
    auto dist2 = [&](const std::vector<float>& x, size_t r) {
      double s2 = 0;
      for (int64_t k = 0; k < d; ++k) {
        const double e = x[static_cast<size_t>(k)] - ref.f32()[static_cast<int64_t>(r) * d + k];
        s2 += e * e;
      }
      return s2;
    };
    for (size_t r = 0; r < fed.size(); ++r) {
      ASSERT_EQ(static_cast<int64_t>(rows[rid][r].size()), d);
      double norm2 = 0;
      for (int64_t k = 0; k < d; ++k) norm2 += std::pow(ref.f32()[static_cast<int64_t>(r) * d + k], 2);
      const double own = dist2(rows[rid][r], r);
      rels.push_back(std::sqrt(own / std::max(norm2, 1e-30)));
      for (size_t q = 0; q < fed.size(); ++q)
        if (q != r) EXPECT_LT(own, dist2(rows[rid][r], q)) << rid << " row " << r << " is nearer reference row " << q;
    }
  }
  std::sort(rels.begin(), rels.end());
  const double median = rels[rels.size() / 2], p90 = rels[rels.size() * 9 / 10], worst = rels.back();
  std::printf("GRAPH hidden rows: relative L2 error vs the CPU prefill over %zu rows: median %.2e, p90 %.2e, max %.2e\n",
              rels.size(), median, p90, worst);
  std::printf("GRAPH routed experts: %lld of %lld picks as the CPU's\n", static_cast<long long>(same_picks),
              static_cast<long long>(picks));
  EXPECT_GT(same_picks, picks * 9 / 10);
  EXPECT_LT(median, 1.5e-2);
  EXPECT_LT(p90, 3e-2);
  EXPECT_LT(worst, 0.5);
}

// /update_weights_from_disk on the GPU (bf16, and native FP8 whose weights live in Fp8Gemm's registry with their
// padded copies and scale layouts), under CUDA graphs captured on the old weights: after the update the engine
// decodes what a fresh engine on the new checkpoint does (same batches), and back on the old one what it did before.
class CudaWeightUpdate : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaWeightUpdate, MatchesAFreshEngine) {
  const std::string a = fixture_dir(GetParam());
  const test::ScopedTempDir dir("dserve_gpu_update");
  const std::string b = (dir.path / "reversed").string();
  ASSERT_TRUE(test::write_reversed_checkpoint(a, b));
  struct Out {
    std::map<std::string, std::vector<int32_t>> tokens;
    std::map<std::string, std::vector<TokenLogprob>> lps;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(2, 1000);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {9, 40, 17}) {
    prompts.emplace_back(len);
    for (auto& t : prompts.back()) t = tok(rng);
  }
  int round = 0;
  const auto run = [&](Engine& e) {
    Out out;
    std::mutex mu;
    std::condition_variable cv;
    size_t finished = 0;
    e.pause(PauseMode::kInPlace);  // every prompt in the first step: the same batches in every run
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.rid = "r" + std::to_string(round) + "_" + std::to_string(i);
      r.input_ids = prompts[i];
      r.sampling.max_new_tokens = 8;
      r.sampling.temperature = 0;
      r.sampling.ignore_eos = true;
      r.return_logprob = true;
      r.top_logprobs_num = 2;
      EXPECT_TRUE(e.submit(r, [&, i](EngineEvent ev) {
                     std::lock_guard<std::mutex> lock(mu);
                     const std::string k = std::to_string(i);
                     out.tokens[k].insert(out.tokens[k].end(), ev.new_tokens.begin(), ev.new_tokens.end());
                     out.lps[k].insert(out.lps[k].end(), ev.output_logprobs.begin(), ev.output_logprobs.end());
                     if (ev.finished) ++finished;
                     cv.notify_all();
                   }).is_ok());
    }
    ++round;
    e.resume();
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished == prompts.size(); }));
    return out;
  };
  BatchEngineOptions o;
  o.device = "cuda";
  o.max_total_tokens = 4096;
  o.max_running_requests = 8;
  o.cuda_graph_bs = {1, 4, 8};
  o.cuda_graph_max_bs = 8;
  o.verbose = false;
  const auto fresh = [&](const std::string& model) {
    BatchEngineOptions f = o;
    f.model_path = model;
    auto e = make_batch_engine(f);
    EXPECT_TRUE(e.is_ok()) << e.status().message();
    return e.is_ok() ? run(**e) : Out{};
  };
  const Out on_a = fresh(a), on_b = fresh(b);
  o.model_path = a;
  auto e = make_batch_engine(o);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const Out first = run(**e);
  ASSERT_TRUE((*e)->update_weights_from_disk(b, true, false).is_ok());
  const Out updated = run(**e);
  ASSERT_TRUE((*e)->update_weights_from_disk(a, true, false).is_ok());
  const Out back = run(**e);
  EXPECT_GT((*e)->stats().num_graph_steps, 10u);
  int compared = 0, differ = 0;
  for (auto [got, want] : {std::pair{&first, &on_a}, {&updated, &on_b}, {&back, &on_a}})
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string k = std::to_string(i);
      const auto& g = got->tokens.at(k);
      const auto& w = want->tokens.at(k);
      const auto& gl = got->lps.at(k);
      const auto& wl = want->lps.at(k);
      ASSERT_EQ(g.size(), 8u);
      ASSERT_EQ(w.size(), 8u);
      for (size_t s = 0; s < w.size(); ++s) {
        EXPECT_EQ(g[s], w[s]) << GetParam() << " prompt " << i << " step " << s;
        EXPECT_NEAR(gl[s].logprob, wl[s].logprob, 1e-3) << GetParam() << " prompt " << i << " step " << s;
        ++compared;
        if (g[s] != w[s] || wl[s].top.size() < 2 || wl[s].top[0].first - wl[s].top[1].first < 0.05f) break;
      }
    }
  for (size_t i = 0; i < prompts.size(); ++i) differ += on_a.tokens.at(std::to_string(i)) != on_b.tokens.at(std::to_string(i));
  std::printf("WEIGHT UPDATE %s: %d steps compared with fresh engines, %d of %zu prompts differ between the checkpoints\n",
              GetParam().c_str(), compared, differ, prompts.size());
  EXPECT_GT(differ, 0) << "the reversed checkpoint must be another model";
  EXPECT_GT(compared, 30);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaWeightUpdate, ::testing::Values("v3", "v3_fp8", "v3_fp8_h256"));

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGraphEngine, ::testing::Values("v3", "v32"));

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGraphTest, ::testing::Values("v2_lite", "v2", "v3", "v3_fp8", "v32"));

}  // namespace
}  // namespace ds

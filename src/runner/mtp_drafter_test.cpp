// MtpDrafter against an independent recompute: the drafts it chains over the paged MTP cache (prompt in one
// step or in chunks) are the argmaxes of the MTP layer run afresh in one pass over the whole sequence, whose
// slots past the prompt take the previous slot's shared_head.norm output as their hidden.
#include "runner/mtp_drafter.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "runner/attn_metadata.h"
#include "runner/batch_runner.h"

namespace ds {
namespace {

constexpr int kPage = 16;

struct Loaded {
  ModelConfig cfg;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<DeepseekModel> model;
};

Loaded load(const std::string& name) {
  Loaded l;
  const std::string dir = std::string(DSERVE_SOURCE_DIR) + "/tests/fixtures/" + name;
  l.cfg = load_model_config(dir).value();
  auto w = load_weights(dir, l.cfg).value();
  // The fixture's norms are ones, under which shared_head.norm's output and its input give the same drafts
  // (hnorm is scale-invariant): random gains tell which one a draft step takes as its hidden.
  std::mt19937 rng(9);
  for (auto& m : w.mtp) {
    Tensor g = Tensor::empty({l.cfg.hidden_size}, DType::kF32);
    for (int64_t i = 0; i < l.cfg.hidden_size; ++i) g.f32()[i] = 0.25f + static_cast<float>(rng() % 1000) / 500.0f;
    m.shared_head_norm = g;
  }
  l.ops = make_cpu_ops();
  l.model = std::make_unique<DeepseekModel>(l.cfg, w, *l.ops);
  return l;
}

Tensor ids_tensor(const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::kI32);
  std::copy(ids.begin(), ids.end(), t.data_as<int32_t>());
  return t;
}

// [a; r] for host F32 tensors (the CPU backend's activations).
Tensor append_row(const Tensor& a, const Tensor& r) {
  EXPECT_EQ(a.dtype(), DType::kF32);
  Tensor t = Tensor::empty({a.dim(0) + 1, a.dim(1)}, DType::kF32);
  std::copy(a.f32(), a.f32() + a.numel(), t.f32());
  std::copy(r.f32(), r.f32() + a.dim(1), t.f32() + a.numel());
  return t;
}

int32_t argmax_row(const Tensor& logits, int64_t row, int64_t vocab) {
  const float* p = logits.f32() + row * logits.dim(1);
  return static_cast<int32_t>(std::max_element(p, p + vocab) - p);
}

// One sequence's step over pages 0, 1, ...: tokens [start, start + ids.size()).
StepPlan one_seq_plan(const std::vector<int32_t>& ids, int32_t start, bool sample, int32_t draft_steps, int pages) {
  StepPlan p;
  p.page_size = kPage;
  StepPlan::SeqStep s;
  s.num_tokens = static_cast<int32_t>(ids.size());
  s.start_pos = start;
  s.num_pages = pages;
  s.needs_sample = sample;
  s.draft_steps = draft_steps;
  p.seqs.push_back(s);
  p.input_ids = ids;
  for (int32_t i = 0; i < s.num_tokens; ++i) {
    p.positions.push_back(start + i);
    p.slot_mapping.push_back(start + i);  // page k is page id k
  }
  for (int i = 0; i < pages; ++i) p.page_table.push_back(i);
  return p;
}

TEST(MtpDrafter, DraftsEqualAFreshRecomputeOfTheChain) {
  Loaded l = load("v3");
  ASSERT_GE(l.model->num_mtp_layers(), 1);
  const int64_t vocab = l.cfg.vocab_size;
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(37);
  for (auto& t : prompt) t = static_cast<int32_t>(2 + rng() % 1000);
  const int n = static_cast<int>(prompt.size()), kSteps = 3, kPages = 4;

  // Reference: target hidden states of the prompt, its greedy next token, then the chain recomputed afresh.
  std::vector<int32_t> pages(kPages);
  for (int i = 0; i < kPages; ++i) pages[i] = i;
  KvCache ref_cache = make_kv_cache(*l.ops, l.cfg, kPage, kPages, 1);
  AttnMetadata meta = build_attn_metadata({SeqSlice{0, n, &pages}}, kPage, *l.ops);
  Tensor hidden = l.model->forward(ids_tensor(prompt), meta, ref_cache);  // [n, d]
  const int32_t first = argmax_row(l.model->logits(l.ops->select_rows(hidden, {n - 1})), 0, vocab);
  std::vector<int32_t> want;
  {
    std::vector<int64_t> rows;
    for (int i = 0; i < n; ++i) rows.push_back(i);
    Tensor h = l.ops->select_rows(hidden, rows);  // slots 0..n-1: target hidden; then the chain's normed outputs
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    next.push_back(first);
    for (int k = 0; k < kSteps; ++k) {
      KvCache c = make_kv_cache(*l.ops, l.cfg, kPage, kPages, 1);
      const int64_t len = h.dim(0);
      AttnMetadata m = build_attn_metadata({SeqSlice{0, len, &pages}}, kPage, *l.ops);
      Tensor z = l.model->mtp_forward(0, ids_tensor(next), h, m, c, AttnMode::kMha);  // [len, d]
      Tensor zn = l.model->mtp_norm(0, l.ops->select_rows(z, {len - 1}));        // [1, d]
      want.push_back(argmax_row(l.model->mtp_head(0, zn), 0, vocab));
      h = append_row(h, zn);
      next.push_back(want.back());
    }
  }

  for (int chunk : {n, 20, 7}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    KvCache cache = make_kv_cache(*l.ops, l.cfg, kPage, kPages, 1);
    MtpDrafter drafter(*l.model, *l.ops, cache);
    std::vector<std::vector<int32_t>> got;
    for (int start = 0; start < n; start += chunk) {
      const int len = std::min(chunk, n - start);
      const bool last = start + len == n;
      std::vector<int32_t> ids(prompt.begin() + start, prompt.begin() + start + len);
      StepPlan plan = one_seq_plan(ids, start, last, last ? kSteps : 0, kPages);
      Tensor h = l.model->forward(ids_tensor(ids), build_attn_metadata(plan, *l.ops), cache);  // [len, d]
      const int32_t next = last ? first : prompt[start + len];
      got = drafter.run(plan, h, {DraftSeq{len, next, last ? kSteps : 0}});
      ASSERT_EQ(got.size(), 1u);
      if (!last) {
        EXPECT_TRUE(got[0].empty());
      }
    }
    EXPECT_EQ(got[0], want);
  }
}

}  // namespace
}  // namespace ds

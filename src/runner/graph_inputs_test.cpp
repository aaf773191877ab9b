// CUDA-graph inputs on the host (graph_inputs.h): the layout's regions, verify rows (q a sequence), the draft
// runners' last rows and chained steps (the dummy page past a sequence's pages), padding sequences and the real
// row count before them.
#include "runner/graph_inputs.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(GraphInputs, LayoutRegionsAreDisjoint) {
  for (int steps : {0, 3}) {
    const GraphInputLayout l = GraphInputLayout::make(8, 4, steps, 10);
    std::vector<std::pair<int64_t, int64_t>> regions = {
        {0, 32}, {l.pos_off, l.pos_off + 32}, {l.slot_off, l.slot_off + 32}, {l.len_off, l.len_off + 8},
        {l.q_off, l.q_off + 9}, {l.real_off, l.real_off + 1}, {l.table_off, l.table_off + 80}};
    if (steps > 0)
      for (auto r : std::vector<std::pair<int64_t, int64_t>>{{l.last_off, l.last_off + 8}, {l.cpos_off, l.cpos_off + 16},
                                                           {l.cslot_off, l.cslot_off + 16}, {l.clen_off, l.clen_off + 16},
                                                           {l.cq_off, l.cq_off + 9}})
        regions.push_back(r);
    std::sort(regions.begin(), regions.end());
    for (size_t i = 1; i < regions.size(); ++i) EXPECT_LE(regions[i - 1].second, regions[i].first) << steps;
    EXPECT_EQ(l.table_off % 64, 0);
    EXPECT_EQ(l.size, l.table_off + 80);
    std::vector<int32_t> buf(l.size, 7);
    l.init(buf.data());
    for (int i = 0; i <= 8; ++i) {
      EXPECT_EQ(buf[l.q_off + i], 4 * i);
      if (steps > 0) EXPECT_EQ(buf[l.cq_off + i], i);
    }
    EXPECT_EQ(buf[l.table_off], 0);
  }
}

// Verify rows: two sequences (q 3) padded to 4, page size 4, dummy page 99.
TEST(GraphInputs, VerifyRowsAndPadding) {
  const GraphInputLayout l = GraphInputLayout::make(4, 3, 0, 6);
  std::vector<int32_t> buf(l.size);
  l.init(buf.data());
  const std::vector<int32_t> pages_a = {5, 2, 9}, pages_b = {7};
  const std::vector<int32_t> tok_a = {11, 12, 13}, slot_a = {2 * 4 + 2, 2 * 4 + 3, 9 * 4 + 0};
  const std::vector<int32_t> tok_b = {21, 22, 23}, slot_b = {7 * 4 + 0, 7 * 4 + 1, 7 * 4 + 2};
  DecodeSeq a{0, 6, 0, pages_a.data(), 3};
  a.tokens = tok_a.data();
  a.slots = slot_a.data();
  DecodeSeq b{0, 0, 0, pages_b.data(), 1};
  b.tokens = tok_b.data();
  b.slots = slot_b.data();
  const int64_t width = l.fill(buf.data(), {a, b}, 4, 4, 99);
  EXPECT_EQ(width, 3);
  EXPECT_EQ(buf[l.real_off], 6);  // two sequences of 3 rows before the padding
  EXPECT_EQ(std::vector<int32_t>(buf.begin(), buf.begin() + 6), (std::vector<int32_t>{11, 12, 13, 21, 22, 23}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.pos_off, buf.begin() + l.pos_off + 6),
            (std::vector<int32_t>{6, 7, 8, 0, 1, 2}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.slot_off, buf.begin() + l.slot_off + 6),
            (std::vector<int32_t>{10, 11, 36, 28, 29, 30}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.len_off, buf.begin() + l.len_off + 4),
            (std::vector<int32_t>{9, 3, 3, 3}));
  const int32_t* t = buf.data() + l.table_off;
  EXPECT_EQ(std::vector<int32_t>(t, t + 3), (std::vector<int32_t>{5, 2, 9}));
  EXPECT_EQ(std::vector<int32_t>(t + 6, t + 9), (std::vector<int32_t>{7, 99, 99}));
  for (int i = 2; i < 4; ++i) {  // padding: positions 0..2 on the dummy page only
    EXPECT_EQ(t[i * 6], 99);
    EXPECT_EQ(t[i * 6 + 2], 99);
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(buf[l.pos_off + i * 3 + j], j);
      EXPECT_EQ(buf[l.slot_off + i * 3 + j], 99 * 4 + j);
    }
  }
}

// Draft runners (q 4, 3 steps, page size 4): the last accepted row of each sequence, its chained positions after
// it; where those pass the sequence's pages, slots and table columns are the dummy page, and the table is written
// as far as any chain reaches.
TEST(GraphInputs, DraftChainsUseTheDummyPagePastASequencesPages) {
  const GraphInputLayout l = GraphInputLayout::make(4, 4, 3, 8);
  std::vector<int32_t> buf(l.size);
  l.init(buf.data());
  const std::vector<int32_t> pages_a = {3, 1};     // positions 0..7
  const std::vector<int32_t> pages_b = {6, 4, 2};  // positions 0..11
  const std::vector<int32_t> next = {0, 0, 0, 0}, slots_a = {16, 17, 18, 19}, slots_b = {34, 35, 8, 9};
  DecodeSeq a{0, 3, 0, pages_a.data(), 2};  // rows at 3..6, 4 accepted: last row 3 at 6, chain 7, 8
  a.tokens = next.data();
  a.slots = slots_a.data();
  a.valid = 4;
  DecodeSeq b{0, 6, 0, pages_b.data(), 3};  // rows at 6..9, 1 accepted: last row 0 at 6, chain 7, 8
  b.tokens = next.data();
  b.slots = slots_b.data();
  b.valid = 1;
  const int64_t width = l.fill(buf.data(), {a, b}, 3, 4, 50);
  EXPECT_EQ(width, 3);
  EXPECT_EQ(buf[l.real_off], 8);
  EXPECT_EQ(buf[l.last_off + 0], 3);
  EXPECT_EQ(buf[l.last_off + 1], 4 + 0);
  EXPECT_EQ(buf[l.last_off + 2], 8 + 0);  // padding: its first row
  // Chain step 1 then 2 ([steps - 1, max_bs]).
  EXPECT_EQ(buf[l.cpos_off + 0], 7);
  EXPECT_EQ(buf[l.cslot_off + 0], 1 * 4 + 3);
  EXPECT_EQ(buf[l.cpos_off + 4], 8);
  EXPECT_EQ(buf[l.cslot_off + 4], 50 * 4 + 0);  // past sequence a's two pages
  EXPECT_EQ(buf[l.clen_off + 4], 9);
  EXPECT_EQ(buf[l.cpos_off + 1], 7);
  EXPECT_EQ(buf[l.cslot_off + 1], 4 * 4 + 3);
  EXPECT_EQ(buf[l.cslot_off + 5], 2 * 4 + 0);  // within sequence b's pages
  EXPECT_EQ(buf[l.cpos_off + 2], 1);           // padding chain from position 0, on the dummy page
  EXPECT_EQ(buf[l.cslot_off + 2], 50 * 4 + 1);
  const int32_t* t = buf.data() + l.table_off;
  EXPECT_EQ(std::vector<int32_t>(t, t + 3), (std::vector<int32_t>{3, 1, 50}));  // a's chain reaches page 2
  EXPECT_EQ(std::vector<int32_t>(t + 8, t + 11), (std::vector<int32_t>{6, 4, 2}));
  EXPECT_EQ(std::vector<int32_t>(t + 16, t + 19), (std::vector<int32_t>{50, 50, 50}));
}

}  // namespace
}  // namespace ds

// The vocabulary trie and the per-state allowed sets: a walk of the trie beside the automaton, pruned where the
// automaton dies (a state's set costs the trie nodes its language reaches, once).
#include "text/token_fsm.h"

#include <algorithm>
#include <numeric>

#include "text/tokenizer.h"

namespace ds {

VocabTrie::VocabTrie(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < num_ids(); ++id)
    if (!bytes_[static_cast<size_t>(id)].empty()) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  nodes_.emplace_back();  // root
  // Insert in sorted order: the path of the previous token is the only one a new token can share.
  std::vector<int32_t> path = {0};  // nodes along the previous token's bytes
  std::string prev;
  std::vector<std::vector<int32_t>> ends(1);
  for (int32_t id : order) {
    const std::string& b = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < b.size() && common < prev.size() && b[common] == prev[common]) ++common;
    path.resize(common + 1);
    for (size_t k = common; k < b.size(); ++k) {
      const int32_t parent = path.back();
      Node n;
      n.byte = static_cast<uint8_t>(b[k]);
      // Children are appended in byte order: link after the parent's last child.
      const int32_t me = static_cast<int32_t>(nodes_.size());
      int32_t c = nodes_[static_cast<size_t>(parent)].first_child;
      if (c < 0) {
        nodes_[static_cast<size_t>(parent)].first_child = me;
      } else {
        while (nodes_[static_cast<size_t>(c)].next_sibling >= 0) c = nodes_[static_cast<size_t>(c)].next_sibling;
        nodes_[static_cast<size_t>(c)].next_sibling = me;
      }
      nodes_.push_back(n);
      ends.emplace_back();
      path.push_back(me);
    }
    ends[static_cast<size_t>(path.back())].push_back(id);
    prev = b;
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    nodes_[n].ids_begin = static_cast<int32_t>(ids_.size());
    ids_.insert(ids_.end(), ends[n].begin(), ends[n].end());
    nodes_[n].ids_end = static_cast<int32_t>(ids_.size());
  }
}

std::shared_ptr<const VocabTrie> VocabTrie::from_tokenizer(const Tokenizer& tok, int32_t num_ids,
                                                           const std::vector<std::string>& added) {
  std::vector<std::string> bytes(static_cast<size_t>(std::max(num_ids, 0)));
  for (int32_t id = 0; id < num_ids && id < tok.vocab_size(); ++id) {
    if (!tok.has_id(id)) continue;
    if (!tok.is_added(id)) {
      bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
    } else if (const std::string* content = tok.id_to_token(id);
               content && std::find(added.begin(), added.end(), *content) != added.end()) {
      bytes[static_cast<size_t>(id)] = *content;
    }
  }
  return std::make_shared<const VocabTrie>(std::move(bytes));
}

TokenFsm::TokenFsm(ByteDfa dfa, std::shared_ptr<const VocabTrie> vocab) : dfa_(std::move(dfa)), vocab_(std::move(vocab)) {}

const std::vector<uint64_t>& TokenFsm::allowed(int s) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = allowed_[s];
  if (slot) return *slot;
  auto bits = std::make_unique<std::vector<uint64_t>>((static_cast<size_t>(num_ids()) + 63) / 64, 0);
  if (s != ByteDfa::kDead) {
    const auto& nodes = vocab_->nodes();
    const auto& ids = vocab_->ids();
    std::vector<std::pair<int32_t, int>> stack;  // (node, state on reaching it)
    for (int32_t c = nodes[0].first_child; c >= 0; c = nodes[static_cast<size_t>(c)].next_sibling)
      stack.emplace_back(c, s);
    while (!stack.empty()) {
      const auto [n, from] = stack.back();
      stack.pop_back();
      const VocabTrie::Node& node = nodes[static_cast<size_t>(n)];
      const int at = dfa_.next(from, node.byte);
      if (at == ByteDfa::kDead) continue;
      for (int32_t k = node.ids_begin; k < node.ids_end; ++k) {
        const int32_t id = ids[static_cast<size_t>(k)];
        (*bits)[static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63);
      }
      for (int32_t c = node.first_child; c >= 0; c = nodes[static_cast<size_t>(c)].next_sibling) stack.emplace_back(c, at);
    }
  }
  slot = std::move(bits);
  return *slot;
}

int TokenFsm::advance(int s, int32_t id) const {
  if (s == ByteDfa::kDead || id < 0 || id >= num_ids() || vocab_->bytes(id).empty()) return ByteDfa::kDead;
  return dfa_.walk(s, vocab_->bytes(id));
}

}  // namespace ds

// RadixTree: page-aligned prefix cache with node splitting, path locks and LRU leaf eviction.
#include "cache/radix_tree.h"

#include <algorithm>
#include <map>
#include <queue>

#include "core/check.h"

namespace ds {

namespace {
// Orders children by their first page's tokens; transparent so lookups take a span without copying.
struct PageLess {
  using is_transparent = void;
  static bool less(std::span<const TokenId> a, std::span<const TokenId> b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  bool operator()(const std::vector<TokenId>& a, const std::vector<TokenId>& b) const { return less(a, b); }
  bool operator()(std::span<const TokenId> a, const std::vector<TokenId>& b) const { return less(a, b); }
  bool operator()(const std::vector<TokenId>& a, std::span<const TokenId> b) const { return less(a, b); }
};
}  // namespace

struct RadixNode {
  std::vector<TokenId> key;   // whole pages of tokens
  std::vector<PageId> pages;  // key.size() / page_size
  RadixNode* parent = nullptr;
  std::map<std::vector<TokenId>, std::unique_ptr<RadixNode>, PageLess> children;
  int32_t lock_ref = 0;
  uint64_t last_access = 0;

  std::vector<TokenId> first_page(int32_t page_size) const {
    return std::vector<TokenId>(key.begin(), key.begin() + page_size);
  }
};

namespace {
// Number of whole pages on which node->key and tokens agree (tokens may be shorter than the key).
int32_t common_pages(const RadixNode& node, std::span<const TokenId> tokens, int32_t page_size) {
  size_t n = std::min(node.key.size(), tokens.size());
  size_t i = 0;
  while (i < n && node.key[i] == tokens[i]) ++i;
  return static_cast<int32_t>(i / page_size);
}
}  // namespace

RadixTree::RadixTree(PagePool* pool) : pool_(pool), page_size_(pool->page_size()), root_(new RadixNode) {}

RadixTree::~RadixTree() = default;  // pages still cached stay referenced; the pool dies with the scheduler

void RadixTree::touch(RadixNode* node) {
  ++clock_;
  for (; node != nullptr; node = node->parent) node->last_access = clock_;
}

// Splits `node` after keep_pages pages: a new node takes the front part and its place under the parent;
// `node` keeps the tail (and its identity, so handles held by requests still end at the same token).
RadixNode* RadixTree::split(RadixNode* node, int32_t keep_pages) {
  DS_CHECK(keep_pages > 0 && keep_pages < static_cast<int32_t>(node->pages.size()));
  RadixNode* parent = node->parent;
  auto slot = parent->children.find(std::span<const TokenId>(node->key.data(), page_size_));
  DS_CHECK(slot != parent->children.end() && slot->second.get() == node);
  std::unique_ptr<RadixNode> owned = std::move(slot->second);

  auto front = std::make_unique<RadixNode>();
  size_t cut = static_cast<size_t>(keep_pages) * page_size_;
  front->key.assign(node->key.begin(), node->key.begin() + cut);
  front->pages.assign(node->pages.begin(), node->pages.begin() + keep_pages);
  front->parent = parent;
  front->lock_ref = node->lock_ref;  // every lock through `node` also covered this prefix
  front->last_access = node->last_access;
  node->key.erase(node->key.begin(), node->key.begin() + cut);
  node->pages.erase(node->pages.begin(), node->pages.begin() + keep_pages);
  node->parent = front.get();
  RadixNode* front_ptr = front.get();
  front->children.emplace(node->first_page(page_size_), std::move(owned));
  slot->second = std::move(front);  // same first page, so the parent's map key is unchanged
  ++num_nodes_;
  return front_ptr;
}

RadixNode* RadixTree::add_leaf(RadixNode* parent, std::span<const TokenId> key, std::span<const PageId> pages) {
  auto leaf = std::make_unique<RadixNode>();
  leaf->key.assign(key.begin(), key.end());
  leaf->pages.assign(pages.begin(), pages.end());
  leaf->parent = parent;
  for (PageId p : pages) pool_->ref(p);
  RadixNode* ptr = leaf.get();
  parent->children.emplace(leaf->first_page(page_size_), std::move(leaf));
  cached_pages_ += static_cast<int32_t>(pages.size());
  evictable_pages_ += static_cast<int32_t>(pages.size());
  ++num_nodes_;
  return ptr;
}

RadixTree::Match RadixTree::match_prefix(std::span<const TokenId> tokens) {
  Match m;
  RadixNode* node = root_.get();
  size_t pos = 0;
  while (pos + page_size_ <= tokens.size()) {
    auto it = node->children.find(tokens.subspan(pos, page_size_));
    if (it == node->children.end()) break;
    RadixNode* child = it->second.get();
    int32_t same = common_pages(*child, tokens.subspan(pos), page_size_);
    bool partial = same < static_cast<int32_t>(child->pages.size());
    if (partial) child = split(child, same);
    m.pages.insert(m.pages.end(), child->pages.begin(), child->pages.end());
    pos += child->key.size();
    node = child;
    if (partial) break;
  }
  m.num_tokens = static_cast<int32_t>(pos);
  m.node = node;
  touch(node);
  return m;
}

int32_t RadixTree::match_length(std::span<const TokenId> tokens) const {
  const RadixNode* node = root_.get();
  size_t pos = 0;
  while (pos + page_size_ <= tokens.size()) {
    auto it = node->children.find(tokens.subspan(pos, page_size_));
    if (it == node->children.end()) break;
    const RadixNode* child = it->second.get();
    int32_t same = common_pages(*child, tokens.subspan(pos), page_size_);
    pos += static_cast<size_t>(same) * page_size_;
    if (same < static_cast<int32_t>(child->pages.size())) break;
    node = child;
  }
  return static_cast<int32_t>(pos);
}

RadixTree::Insertion RadixTree::insert(std::span<const TokenId> tokens, std::span<const PageId> pages) {
  DS_CHECK(tokens.size() >= pages.size() * page_size_, "insert: ", tokens.size(), " tokens for ",
           pages.size(), " pages");
  tokens = tokens.first(pages.size() * page_size_);
  Insertion ins;
  RadixNode* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens.subspan(pos, page_size_));
    if (it == node->children.end()) {
      size_t first_page = pos / page_size_;
      node = add_leaf(node, tokens.subspan(pos), pages.subspan(first_page));
      ins.pages.insert(ins.pages.end(), pages.begin() + first_page, pages.end());
      pos = tokens.size();
      break;
    }
    RadixNode* child = it->second.get();
    int32_t same = common_pages(*child, tokens.subspan(pos), page_size_);
    if (same < static_cast<int32_t>(child->pages.size())) child = split(child, same);
    ins.pages.insert(ins.pages.end(), child->pages.begin(), child->pages.end());
    pos += child->key.size();
    ins.num_existing_tokens = static_cast<int32_t>(pos);
    node = child;
  }
  ins.node = node;
  touch(node);
  return ins;
}

void RadixTree::lock(RadixNode* node) {
  for (; node != nullptr && node != root_.get(); node = node->parent) {
    if (node->lock_ref++ == 0) evictable_pages_ -= static_cast<int32_t>(node->pages.size());
  }
}

void RadixTree::unlock(RadixNode* node) {
  for (; node != nullptr && node != root_.get(); node = node->parent) {
    DS_CHECK(node->lock_ref > 0, "unlock of an unlocked radix node");
    if (--node->lock_ref == 0) evictable_pages_ += static_cast<int32_t>(node->pages.size());
  }
}

int32_t RadixTree::evict(int32_t num_pages) {
  // Candidates are recollected on every call: O(nodes), cheap next to a model step, and it needs no
  // bookkeeping on lock/unlock. The heap pops the least recently used leaf first.
  auto older = [](const RadixNode* a, const RadixNode* b) { return a->last_access > b->last_access; };
  std::priority_queue<RadixNode*, std::vector<RadixNode*>, decltype(older)> heap(older);
  std::vector<RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    RadixNode* n = stack.back();
    stack.pop_back();
    for (auto& [k, c] : n->children) stack.push_back(c.get());
    if (n != root_.get() && n->children.empty() && n->lock_ref == 0) heap.push(n);
  }
  int32_t dropped = 0;
  while (dropped < num_pages && !heap.empty()) {
    RadixNode* leaf = heap.top();
    heap.pop();
    RadixNode* parent = leaf->parent;
    int32_t n = static_cast<int32_t>(leaf->pages.size());
    pool_->unref(leaf->pages);
    dropped += n;
    cached_pages_ -= n;
    evictable_pages_ -= n;
    --num_nodes_;
    auto slot = parent->children.find(std::span<const TokenId>(leaf->key.data(), page_size_));
    DS_CHECK(slot != parent->children.end() && slot->second.get() == leaf);
    parent->children.erase(slot);  // destroys leaf
    if (parent != root_.get() && parent->children.empty() && parent->lock_ref == 0) heap.push(parent);
  }
  return dropped;
}

void RadixTree::clear() {
  DS_CHECK(evictable_pages_ == cached_pages_, "clear() with locked radix nodes");
  evict(cached_pages_);
  DS_CHECK(cached_pages_ == 0 && num_nodes_ == 0);
}

}  // namespace ds

// SessionStore (sessions.h).
#include "http/sessions.h"

#include "http/api_request.h"  // random_hex

namespace ds {

Result<std::string> SessionStore::open(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.size() >= kMaxSessions)
    return Status::error("too many open sessions (" + std::to_string(kMaxSessions) + "); close some first");
  std::string sid = id;
  if (sid.empty()) {
    do sid = random_hex(32);
    while (sessions_.count(sid));
  } else if (sessions_.count(sid)) {
    return Status::error("session '" + sid + "' is already open");
  }
  sessions_.emplace(sid, Session{});
  return sid;
}

bool SessionStore::close(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  for (const auto& [r, n] : it->second.nodes) ids_ -= held(n);
  sessions_.erase(it);
  return true;
}

bool SessionStore::is_open(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.count(id) > 0;
}

void SessionStore::drop(Session& s, const std::string& rid, std::vector<std::string>* aborted) {
  auto it = s.nodes.find(rid);
  if (it == s.nodes.end()) return;
  const std::vector<std::string> children = it->second.children;
  if (!it->second.finished) aborted->push_back(rid);
  ids_ -= held(it->second);
  s.nodes.erase(it);
  for (const std::string& c : children) drop(s, c, aborted);
}

Result<SessionPlan> SessionStore::begin(const SessionParams& p, const std::string& rid,
                                        const std::vector<int32_t>& input, int32_t bos) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = sessions_.find(p.id);
  if (sit == sessions_.end()) return Status::error("session '" + p.id + "' is not open (open it with /open_session)");
  Session& s = sit->second;
  if (s.nodes.count(rid)) return Status::error("request '" + rid + "' is already in session '" + p.id + "'");
  SessionPlan plan;
  Node* parent = nullptr;
  if (p.rid) {
    auto pit = s.nodes.find(*p.rid);
    if (pit == s.nodes.end())
      return Status::error("session '" + p.id + "' has no request '" + *p.rid + "' (to continue)");
    parent = &pit->second;
    if (!parent->finished)
      return Status::error("request '" + *p.rid + "' of session '" + p.id +
                           "' is still running; continue it once it has finished");
    std::vector<int32_t> ids = parent->prompt;
    if (!p.drop_previous_output) ids.insert(ids.end(), parent->output.begin(), parent->output.end());
    if (p.offset > static_cast<int64_t>(ids.size()))
      return Status::error("session_params.offset " + std::to_string(p.offset) + " is past the " +
                           std::to_string(ids.size()) + " ids of request '" + *p.rid + "'");
    if (p.offset > 0) ids.resize(static_cast<size_t>(p.offset));
    const size_t skip = !input.empty() && bos >= 0 && input[0] == bos ? 1 : 0;
    ids.insert(ids.end(), input.begin() + static_cast<std::ptrdiff_t>(skip), input.end());
    plan.prompt_ids = std::move(ids);
  } else {
    plan.prompt_ids = input;
  }
  // (A replace without a rid empties the session once accepted: it may go past the caps by itself.)
  if (s.nodes.size() >= kMaxRequestsPerSession && !(p.replace && !p.rid))
    return Status::error("session '" + p.id + "' holds " + std::to_string(kMaxRequestsPerSession) +
                         " requests, its most; open another (or replace without a rid)");
  if (ids_ + plan.prompt_ids.size() > kMaxIds && !(p.replace && !p.rid))
    return Status::error("the open sessions hold " + std::to_string(ids_) + " token ids, their most; close some");
  ids_ += plan.prompt_ids.size();
  Node n;
  n.prompt = plan.prompt_ids;
  if (parent) {
    n.parent = *p.rid;
    parent->children.push_back(rid);
  }
  s.nodes.emplace(rid, std::move(n));
  return plan;
}

std::vector<std::string> SessionStore::accept(const SessionParams& p, const std::string& rid) {
  std::vector<std::string> aborted;
  if (!p.replace) return aborted;
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = sessions_.find(p.id);
  if (sit == sessions_.end()) return aborted;
  Session& s = sit->second;
  if (p.rid) {
    auto pit = s.nodes.find(*p.rid);
    if (pit == s.nodes.end()) return aborted;
    const std::vector<std::string> children = pit->second.children;
    for (const std::string& c : children)
      if (c != rid) drop(s, c, &aborted);
    pit->second.children = {rid};
  } else {
    auto keep = s.nodes.find(rid);
    if (keep == s.nodes.end()) return aborted;
    Node mine = std::move(keep->second);
    s.nodes.erase(keep);
    for (auto& [r, n] : s.nodes) {
      if (!n.finished) aborted.push_back(r);
      ids_ -= held(n);
    }
    s.nodes.clear();
    s.nodes.emplace(rid, std::move(mine));
  }
  return aborted;
}

void SessionStore::cancel(const std::string& session_id, const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = sessions_.find(session_id);
  if (sit == sessions_.end()) return;
  Session& s = sit->second;
  auto it = s.nodes.find(rid);
  if (it == s.nodes.end()) return;
  if (!it->second.parent.empty()) {
    auto pit = s.nodes.find(it->second.parent);
    if (pit != s.nodes.end()) std::erase(pit->second.children, rid);
  }
  std::vector<std::string> ignored;
  drop(s, rid, &ignored);
}

void SessionStore::finish(const std::string& session_id, const std::string& rid, std::vector<int32_t> output) {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = sessions_.find(session_id);
  if (sit == sessions_.end()) return;
  auto it = sit->second.nodes.find(rid);
  if (it == sit->second.nodes.end()) return;
  ids_ -= held(it->second);
  it->second.output = std::move(output);
  it->second.finished = true;
  ids_ += held(it->second);
}

size_t SessionStore::requests(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto sit = sessions_.find(session_id);
  return sit == sessions_.end() ? 0 : sit->second.nodes.size();
}

size_t SessionStore::ids_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_;
}

}  // namespace ds

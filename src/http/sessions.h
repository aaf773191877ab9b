// SGLang's sessions (/open_session, /close_session, /generate's session_params): each request's prompt and output
// ids, so a later request continues one of them without the client sending the conversation again (the radix cache
// finds the continued prefix's KV). Thread-safe; ids only, never engine state.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds {

// /generate's "session_params" (SGLang's SessionParams).
struct SessionParams {
  std::string id;                  // the session
  std::optional<std::string> rid;  // the request continued (none: a new root, or with replace every request cleared)
  int64_t offset = 0;              // > 0: the continued ids cut to their first `offset` before the new input
  bool replace = false;            // the continued request's later branches (its children) are dropped
  bool drop_previous_output = false;  // continue the request's prompt without its output
};

// What a session request starts from: the prompt to submit.
struct SessionPlan {
  std::vector<int32_t> prompt_ids;
};

class SessionStore {
 public:
  // Caps: open sessions, requests a session keeps and ids all keep (each request holds its prompt and output ids
  // until the session closes or a replace drops it).
  static constexpr size_t kMaxSessions = 4096;
  static constexpr size_t kMaxRequestsPerSession = 4096;
  static constexpr size_t kMaxIds = size_t{1} << 26;  // token ids kept by all sessions together (256 MB)

  // Opens `id` (empty: a fresh random one) and returns it; an error when it is already open or too many are.
  Result<std::string> open(const std::string& id);
  // Closes `id`: its requests' ids go; requests still running finish without being recorded. False: not open.
  bool close(const std::string& id);
  bool is_open(const std::string& id) const;

  // Starts request `rid` of session p.id with `input` (its own tokenized input): the prompt is the continued
  // request's ids (its prompt and output ids, cut to p.offset, or its prompt alone with drop_previous_output) then
  // `input` less a leading `bos` (an appended turn's BOS, as SGLang trims it); without p.rid, `input` alone. Records
  // the request as the continued one's child. Errors name the problem: session not open, unknown rid, rid already in
  // the session, the continued request still running, offset past its ids, the session full.
  Result<SessionPlan> begin(const SessionParams& p, const std::string& rid, const std::vector<int32_t>& input,
                            int32_t bos);
  // The server accepted request `rid` (begun with p): with p.replace, the continued request's other branches (without
  // p.rid, every other request of the session) are dropped; returns the unfinished ones among them (to abort).
  std::vector<std::string> accept(const SessionParams& p, const std::string& rid);
  // Forgets a request begun but never submitted (its prompt failed the server's checks).
  void cancel(const std::string& session_id, const std::string& rid);
  // Request `rid` ended with `output` (the ids it generated, at most its max_new_tokens): later requests may continue
  // it. Ignored when the session closed or dropped the request meanwhile.
  void finish(const std::string& session_id, const std::string& rid, std::vector<int32_t> output);

  size_t requests(const std::string& session_id) const;  // recorded in the session (tests)
  size_t ids_held() const;                                // by every open session (tests)

 private:
  struct Node {
    std::vector<int32_t> prompt, output;
    bool finished = false;
    std::string parent;                 // "" for a root
    std::vector<std::string> children;
  };
  struct Session {
    std::map<std::string, Node> nodes;
  };
  // Drops `rid` and its descendants from `s`, listing the unfinished ones in *aborted.
  void drop(Session& s, const std::string& rid, std::vector<std::string>* aborted);
  static size_t held(const Node& n) { return n.prompt.size() + n.output.size(); }

  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
  size_t ids_ = 0;  // held() over every node of every session
};

}  // namespace ds

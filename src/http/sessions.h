// SGLang's sessions (/open_session, /close_session, /generate's session_params): a session keeps each of its
// requests' prompt and output ids, so a later request continues one of them (its ids, a prefix of them, or its
// prompt alone, then the new input) without the client sending the conversation again; the radix cache finds the
// continued prefix's KV. Thread-safe; the store holds ids only, never engine state.
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

// What a session request starts from: the prompt to submit, and the unfinished requests the replace dropped (the
// server aborts them).
struct SessionPlan {
  std::vector<int32_t> prompt_ids;
  std::vector<std::string> to_abort;
};

class SessionStore {
 public:
  // Caps: open sessions, and requests a session keeps (each holds its ids until the session closes).
  static constexpr size_t kMaxSessions = 4096;
  static constexpr size_t kMaxRequestsPerSession = 4096;

  // Opens `id` (empty: a fresh random one) and returns it; an error when it is already open or too many are.
  Result<std::string> open(const std::string& id);
  // Closes `id`: its requests' ids go; requests still running finish without being recorded. False: not open.
  bool close(const std::string& id);
  bool is_open(const std::string& id) const;

  // Starts request `rid` of session p.id with `input` (its own tokenized input): the prompt is the continued
  // request's ids (its prompt and output ids, cut to p.offset, or its prompt alone with drop_previous_output) then
  // `input` less a leading `bos` (an appended turn's BOS, as SGLang trims it); without p.rid, `input` alone. Records
  // the request as the continued one's child (replace: after dropping that one's children; with no rid, every
  // request of the session). Errors name the problem: session not open, unknown rid, rid already in the session,
  // the continued request still running (without replace), offset past its ids, the session full.
  Result<SessionPlan> begin(const SessionParams& p, const std::string& rid, const std::vector<int32_t>& input,
                            int32_t bos);
  // Forgets a request begun but never submitted (its prompt failed the server's checks).
  void cancel(const std::string& session_id, const std::string& rid);
  // Request `rid` ended with `output` (the ids it generated, at most its max_new_tokens): later requests may continue
  // it. Ignored when the session closed or dropped the request meanwhile.
  void finish(const std::string& session_id, const std::string& rid, std::vector<int32_t> output);

  size_t requests(const std::string& session_id) const;  // recorded in the session (tests)

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
  static void drop(Session& s, const std::string& rid, std::vector<std::string>* aborted);

  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
};

}  // namespace ds

// User and environment errors: a Status (ok or a one-line message naming the problem) and Result<T>.
// These map to CLI messages and HTTP statuses; DS_CHECK (check.h) is for internal invariants.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace ds {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) {
    Status s;
    s.msg_ = std::move(msg);
    s.failed_ = true;
    return s;
  }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return msg_; }

 private:
  std::string msg_;
  bool failed_ = false;
};

template <class... Args>
Status error(const Args&... args) {
  return Status::error(detail::concat(args...));
}

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {                  // NOLINT
    DS_CHECK(!std::get<Status>(v_).is_ok(), "Result built from an ok Status without a value");
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    DS_CHECK(is_ok(), std::get<Status>(v_).message());
    return std::get<T>(v_);
  }
  const T& value() const& {
    DS_CHECK(is_ok(), std::get<Status>(v_).message());
    return std::get<T>(v_);
  }
  T&& value() && {
    DS_CHECK(is_ok(), std::get<Status>(v_).message());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ds

// Propagate a failed Status / Result from the enclosing function.
#define DS_RETURN_IF_ERROR(expr)              \
  do {                                        \
    auto ds_status_ = (expr);                 \
    if (!ds_status_.is_ok()) return ds_status_; \
  } while (0)

#define DS_CONCAT_INNER(a, b) a##b
#define DS_CONCAT(a, b) DS_CONCAT_INNER(a, b)
// DS_ASSIGN_OR_RETURN(auto x, make_x()); returns the error Status of a failed Result.
#define DS_ASSIGN_OR_RETURN(lhs, rexpr)                                   \
  auto DS_CONCAT(ds_result_, __LINE__) = (rexpr);                         \
  if (!DS_CONCAT(ds_result_, __LINE__).is_ok())                           \
    return DS_CONCAT(ds_result_, __LINE__).status();                      \
  lhs = std::move(DS_CONCAT(ds_result_, __LINE__)).value()

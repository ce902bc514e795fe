// Status and StatusOr<T>: how fieldprof reports errors across module boundaries.
//
// Every function that can fail returns a Status (or StatusOr<T> when it also
// produces a value). Both are [[nodiscard]]; an error that is deliberately
// ignored is spelled `IgnoreError(f())` so it can be found.
//
//   FP_ASSIGN_OR_RETURN(Batch b, DecodeBatch(bytes));  // returns the error
//   FP_RETURN_IF_ERROR(Use(b));
//
// Codes are few and coarse; the message says what exactly was wrong. Mapping a
// Status to an HTTP code happens in exactly one place
// (aggregator/http/http_status.h).
#ifndef FIELDPROF_COMMON_BASE_STATUS_H_
#define FIELDPROF_COMMON_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fieldprof {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input from a client or a config file
  kNotFound,           // the thing asked for does not exist
  kTooLarge,           // input over a size limit
  kUnsupported,        // e.g. wrong content type, unknown schema version
  kResourceExhausted,  // overloaded: try again later
  kUnavailable,        // shutting down, or a dependency is down
  kIOError,            // the disk or the network failed
  kNoSpace,            // the disk is full (or under its reserve): try again later
  kDataLoss,           // stored data is corrupt
  kInternal,           // a bug
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: bucket 3: sum out of range".
  std::string ToString() const;

  // Prefixes the message with context: "reading config: " + message.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status TooLarge(std::string m) { return {StatusCode::kTooLarge, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
inline Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Marks an error that is ignored on purpose.
inline void IgnoreError(const Status&) {}

// A value or the error that prevented it. Holding an OK status without a value
// is impossible by construction.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok());
    if (status_.ok()) status_ = Internal("StatusOr built from OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace fieldprof

// Returns the status of `expr` (a Status) from the enclosing function when
// it is an error.
#define FP_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::fieldprof::Status fp_status_ = (expr); \
    if (!fp_status_.ok()) return fp_status_; \
  } while (0)

// Evaluates `rexpr`, a StatusOr<T>: an error is returned from the enclosing
// function (which returns a Status or a StatusOr), else the value is moved
// into `lhs`, which may declare a variable:
//   FP_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
//   FP_ASSIGN_OR_RETURN(options.os, ParseOs(text));
// It expands to several statements: give it braces under an if.
#define FP_ASSIGN_OR_RETURN(lhs, rexpr) \
  FP_ASSIGN_OR_RETURN_IMPL_(FP_STATUS_CONCAT_(fp_statusor_, __LINE__), lhs, rexpr)
#define FP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(*statusor)
#define FP_STATUS_CONCAT_(a, b) FP_STATUS_CONCAT_INNER_(a, b)
#define FP_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // FIELDPROF_COMMON_BASE_STATUS_H_

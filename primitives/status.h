// Error values for the non-actor layers (primitives/, components/).
//
// Nothing below actors/ throws across a public function: every fallible call returns a
// `Status` or a `Result<T>` whose error carries an `ErrorCode` (what kind of failure, for code to
// branch on) and a message with the context a person needs (call, device, QP number, buffer,
// sizes, errno or work-completion status string). actors/ maps these onto `caf::error`. The one
// exception is a programming error: taking the value of a Result that holds an error (or the
// error of one that holds a value) throws BadResultAccess, whose what() is that error.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace caf_rdma {

/// What kind of failure an `Error` reports. Stable numbering: it crosses process boundaries.
enum class ErrorCode : uint8_t {
  /// No RDMA device exists on this host.
  kNoDevice = 1,
  /// A named device, port or GID index does not exist or is not usable.
  kDeviceNotFound,
  /// A caller passed a value that is out of its documented range.
  kInvalidArgument,
  /// An ibverbs call failed; the message names the call and the errno string.
  kIbverbsCall,
  /// A work request completed with an error status (message has `ibv_wc_status_str`).
  kWorkCompletion,
  /// An operation or handshake did not finish within its timeout.
  kTimeout,
  /// An offset/length does not fit the registered region.
  kOutOfBounds,
  /// The buffer or region was released/deregistered before the operation.
  kReleased,
  /// A peer is gone or unreachable.
  kPeerUnavailable,
  /// The CUDA driver or a CUDA call failed.
  kCuda,
  /// A buffer id that this manager never handed out.
  kUnknownBuffer,
  /// Transfer sizes that do not match (e.g. a read whose local span is smaller than the remote).
  kSizeMismatch,
  /// Anything that does not fit the codes above (message explains).
  kInternal,
  /// A named thing (key, peer rank, ...) that does not exist.
  kNotFound,
  /// A pool, queue or limit has no room left (message names it and its size).
  kResourceExhausted,
  /// Verification found different bytes on the two sides of a completed transfer.
  kDataMismatch,
  /// The sender may not do this: a request that only the node's own actors may make, or a
  /// buffer handle whose secret is not the one its owner issued.
  kPermissionDenied,
  /// The program cancelled the transfer (its CancelToken) before it ended; no byte of it
  /// touches either side's memory after this answer (the message says what had landed).
  kCancelled,
};

/// The highest code: a number above it from another process reads as kInternal.
inline constexpr ErrorCode kLastErrorCode = ErrorCode::kCancelled;

/// Short stable name of an error code, e.g. "no_device".
const char* to_string(ErrorCode code);

/// The text of an errno value ("Connection refused"), from any thread (strerror_r, not the
/// shared buffer of strerror).
std::string errno_string(int err);

/// An error: a code plus a message with context.
class Error {
public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// "<code name>: <message>".
  std::string to_string() const;

  /// A copy with `prefix + ": "` put in front of the message (adds context on the way up).
  Error with_context(const std::string& prefix) const;

private:
  ErrorCode code_;
  std::string message_;
};

/// Thrown when a Result's value is taken while it holds an error (what(): "caf-rdma: no value:
/// <the error>"), or its error while it holds a value: never a bare std::bad_variant_access.
class BadResultAccess : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// Throws BadResultAccess naming `error` (null: the Result held a value, not an error).
[[noreturn]] void throw_bad_result_access(const Error* error);

/// Success, or an `Error`.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    if (!error_)
      throw_bad_result_access(nullptr);
    return *error_;
  }

private:
  std::optional<Error> error_;
};

/// A value of type T, or an `Error`.
template <class T>
class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : value_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return ok(); }

  const Error& error() const {
    if (ok())
      throw_bad_result_access(nullptr);
    return std::get<Error>(value_);
  }
  Status status() const { return ok() ? Status{} : Status{error()}; }

  T& value() & {
    check();
    return std::get<T>(value_);
  }
  const T& value() const& {
    check();
    return std::get<T>(value_);
  }
  T&& value() && {
    check();
    return std::get<T>(std::move(value_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

private:
  void check() const {
    if (!ok())
      throw_bad_result_access(&std::get<Error>(value_));
  }

  std::variant<T, Error> value_;
};

}  // namespace caf_rdma

#define CAF_RDMA_CONCAT_INNER(a, b) a##b
#define CAF_RDMA_CONCAT(a, b) CAF_RDMA_CONCAT_INNER(a, b)

/// Returns the error of a failed `Status` / `Result` expression from the enclosing function.
#define CAF_RDMA_RETURN_IF_ERROR(expr) \
  do {                                 \
    auto&& caf_rdma_status_ = (expr);  \
    if (!caf_rdma_status_.ok())        \
      return caf_rdma_status_.error(); \
  } while (false)

/// `CAF_RDMA_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a `Result`, or returns its error.
#define CAF_RDMA_ASSIGN_OR_RETURN(lhs, expr) \
  CAF_RDMA_ASSIGN_OR_RETURN_IMPL(CAF_RDMA_CONCAT(caf_rdma_result_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `tmp` names a variable and `lhs` is a declaration
// ("auto x"), neither can be parenthesized.
#define CAF_RDMA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok())                                       \
    return tmp.error();                                \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

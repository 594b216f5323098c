#pragma once
// Result<T>: environment errors as values (a vanished file, a refused attach,
// an unreachable API). Exceptions are kept for misconfiguration at startup.

#include <cerrno>
#include <system_error>
#include <string>
#include <utility>
#include <variant>

namespace pressured {

/// An error: an errno-style code (0 when none applies) and a message for humans.
struct Error {
  int code = 0;
  std::string message;

  static Error from_errno(int err, std::string what);
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}     // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation that yields nothing but may fail.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error Error::from_errno(int err, std::string what) {
  return Error{err, std::move(what) + ": " + std::generic_category().message(err)};
}

}  // namespace pressured

// Status and Expected<T>: errors at module boundaries carry a message a user can act on.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace folio {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// A value or the Status that explains why there is none. Never both, never neither.
template <typename T>
class Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Status status) : state_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(state_).is_ok() && "Expected built from an ok Status");
  }

  bool has_value() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Status& status() const {
    static const Status kOk;
    return has_value() ? kOk : std::get<Status>(state_);
  }
  const std::string& error() const { return status().message(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace folio

// Early-return helpers for Expected/Status inside the Jinja interpreter, whose recursive
// functions would otherwise be mostly error plumbing.
#pragma once

#include <utility>

#include "core/status.h"

#define JINJA_CONCAT_INNER_(a, b) a##b
#define JINJA_CONCAT_(a, b) JINJA_CONCAT_INNER_(a, b)

// JINJA_ASSIGN_OR_RETURN(Value v, evaluate(x)); declares v or returns the error.
#define JINJA_ASSIGN_OR_RETURN(lhs, expr) \
  JINJA_ASSIGN_OR_RETURN_IMPL_(JINJA_CONCAT_(jinja_expected_, __LINE__), lhs, expr)
#define JINJA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp) return tmp.status();                     \
  lhs = std::move(*tmp)

#define JINJA_RETURN_IF_ERROR(expr)                                                   \
  do {                                                                                \
    if (::folio::Status jinja_status_ = (expr); !jinja_status_) return jinja_status_; \
  } while (0)

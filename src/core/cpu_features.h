// CPU feature checks that every compiler folio builds with understands (clang 14's
// __builtin_cpu_supports does not know "f16c", so that one is read from CPUID).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace folio {

inline bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
#else
  return false;
#endif
}

}  // namespace folio

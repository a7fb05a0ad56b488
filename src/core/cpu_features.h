// CPU feature checks that every compiler folio builds with understands (clang 14's
// __builtin_cpu_supports does not know "f16c", so that one is read from CPUID; nor do GCC 12's
// and clang 14's know AMX).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
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

// AMX tiles with their 8-bit dot products (CPUID.(7,0):EDX bits 24 and 25), usable by this
// process: the OS must save the tile state (XCR0 bits 17 and 18) and Linux hands it out only
// on request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18; without it the first
// tile instruction raises SIGILL). The request is made here, once, for the whole process.
inline bool cpu_has_amx_int8() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace folio

#include "core/peak_memory.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace folio {

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      if (status >> kib) return kib * 1024;
      break;
    }
    status.ignore(1 << 20, '\n');
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace folio

// folio_cuda_check: runs every CUDA kernel on random inputs against the CPU backend / float64
// references and prints one line per check (shape, max abs/rel error, worst index, time).
//   folio_cuda_check [--quick] [--filter NAME] [--bench] [--seed N] [--list]
// Exit code: 0 when every check passed, 1 when any failed, 2-3 on CUDA errors.
#include <cstdio>
#include <cstring>
#include <string>

#include "check_util.h"

namespace folio::cuda::check {
void run_benchmarks(const Options& opt, std::mt19937_64& rng);
}

int main(int argc, char** argv) {
  using namespace folio::cuda::check;
  Options opt;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") opt.quick = true;
    else if (arg == "--bench") opt.bench = true;
    else if (arg == "--list") list = true;
    else if (arg == "--filter" && i + 1 < argc) opt.filter = argv[++i];
    else if (arg == "--seed" && i + 1 < argc) opt.seed = std::stoull(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--filter NAME] [--bench] [--seed N] [--list]\n", argv[0]);
      return 2;
    }
  }
  if (list) {
    for (const Check& c : registry()) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  int device = 0;
  cudaDeviceProp prop{};
  FOLIO_CUDA_OK(cudaGetDevice(&device));
  FOLIO_CUDA_OK(cudaGetDeviceProperties(&prop, device));
  opt.sm_count = prop.multiProcessorCount;
  std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block optin %zu KiB; seed %llu%s\n",
              device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / double(1 << 30), prop.l2CacheSize >> 20,
              prop.sharedMemPerBlockOptin >> 10, static_cast<unsigned long long>(opt.seed),
              opt.quick ? " (quick)" : "");
  int ran = 0;
  for (const Check& c : registry()) {
    if (!opt.filter.empty() && c.name.find(opt.filter) == std::string::npos) continue;
    std::printf("== %s\n", c.name.c_str());
    std::fflush(stdout);
    std::mt19937_64 rng(opt.seed ^ std::hash<std::string>{}(c.name));
    c.run(opt, rng);
    sync_or_die(c.name.c_str());
    ++ran;
  }
  if (opt.bench) {
    std::mt19937_64 rng(opt.seed);
    run_benchmarks(opt, rng);
  }
  const int failures = failures_so_far();
  std::printf("\n%d check groups run, %d failed checks: %s\n", ran, failures, failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}

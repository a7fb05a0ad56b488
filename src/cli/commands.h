// The subcommands of the `folio` binary. Each registers its options on the CLI11 app and
// returns the process exit code when run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace folio::cli {

using CommandRunner = std::function<int()>;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_perplexity_command(CLI::App& app);
CommandRunner add_serve_command(CLI::App& app);
CommandRunner add_synth_command(CLI::App& app);
CommandRunner add_quantize_command(CLI::App& app);
CommandRunner add_tokenize_command(CLI::App& app);
// Also registers `bench batch` (add_bench_batch_command), `bench spec` (add_bench_spec_command),
// `bench verify` (add_bench_verify_command), `bench host` (add_bench_host_command) and `bench
// serve` (add_bench_serve_command, only with the server built) and runs the one given.
CommandRunner add_bench_command(CLI::App& app);
CommandRunner add_bench_batch_command(CLI::App& bench);
CommandRunner add_bench_spec_command(CLI::App& bench);
CommandRunner add_bench_verify_command(CLI::App& bench);
CommandRunner add_bench_host_command(CLI::App& bench);
CommandRunner add_bench_serve_command(CLI::App& bench);

}  // namespace folio::cli

// The subcommands of the `folio` binary. Each registers its options on the CLI11 app and
// returns the process exit code when run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace folio::cli {

using CommandRunner = std::function<int()>;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_perplexity_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);

}  // namespace folio::cli

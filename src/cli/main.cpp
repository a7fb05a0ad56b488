// folio: one binary, subcommands run | perplexity | bench [batch].
#include <cstdio>
#include <exception>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"folio: LLM inference and serving engine"};
  app.require_subcommand(1);
  std::map<std::string, folio::cli::CommandRunner> runners;
  runners["run"] = folio::cli::add_run_command(app);
  runners["perplexity"] = folio::cli::add_perplexity_command(app);
  runners["serve"] = folio::cli::add_serve_command(app);
  runners["bench"] = folio::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // usage message; non-zero for real errors
  }
  try {
    for (auto& [name, runner] : runners) {
      if (app.got_subcommand(name)) return runner();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio: error: %s\n", e.what());
    return 1;
  }
  return 1;
}

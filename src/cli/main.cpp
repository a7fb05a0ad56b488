// folio: one binary, subcommands run | perplexity | serve | bench [batch | serve] | synth | quantize | tokenize.
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
#ifdef FOLIO_HAS_SERVER
  runners["serve"] = folio::cli::add_serve_command(app);
#else
  // Built with FOLIO_SERVER=OFF (no Boost): say so rather than "unknown subcommand".
  app.add_subcommand("serve", "HTTP server (not built: configure with -DFOLIO_SERVER=ON)")->allow_extras();
  runners["serve"] = [] {
    std::fprintf(stderr, "folio: error: this folio was built without the server (FOLIO_SERVER=OFF)\n");
    return 1;
  };
#endif
  runners["bench"] = folio::cli::add_bench_command(app);
  runners["synth"] = folio::cli::add_synth_command(app);
  runners["quantize"] = folio::cli::add_quantize_command(app);
  runners["tokenize"] = folio::cli::add_tokenize_command(app);
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

// cpullm: one program, one subcommand per job. Errors about user input end in one line on
// stderr and exit status 1.
#include <cstdio>
#include <new>
#include <string>

#include "cli/commands.hpp"
#include "cli/python_command.hpp"
#include "engine/util/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cpullm: CPU-only LLaMA inference, benchmarking and tuning"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cpullm 0.1");
  cpullm::cli::register_generate(app);
  cpullm::cli::register_logits(app);
  cpullm::cli::register_info(app);
  cpullm::cli::register_gen_model(app);
  cpullm::cli::register_quantize(app);
  cpullm::cli::register_eval_quant(app);
  cpullm::cli::register_topo(app);
  cpullm::cli::register_bench(app);
  cpullm::cli::register_profile(app);
  cpullm::cli::register_db(app);
  cpullm::cli::register_python_command(app, "report", "One self-contained HTML report from the results database", "reports/report.py");
  cpullm::cli::register_python_command(app, "sweep", "Measure a model over a space of configurations; write the best as config files", "tuning/sweep.py");
  cpullm::cli::register_python_command(app, "tune", "Tune a model for a hardware profile: OS checklist, plans, roofline predictions, a sweep", "tuning/tune.py");
  try {
    const std::vector<std::string> args = cpullm::cli::prepare_arguments(argc, argv);
    std::vector<const char*> arg_pointers;
    for (const std::string& arg : args) arg_pointers.push_back(arg.c_str());
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const cpullm::Error& e) {
    std::fprintf(stderr, "cpullm: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "cpullm: error: out of memory\n");
    return 1;
  }
  return 0;
}

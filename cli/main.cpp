// cpullm: one program, one subcommand per job. Errors about user input end in one line on
// stderr and exit status 1.
#include <omp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>

#include "cli/commands.hpp"
#include "cli/python_command.hpp"
#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {

CLI::Option* add_seed_option(CLI::App& command, const std::string& flags, uint64_t& seed, const std::string& help) {
  // CLI11 reads an unsigned number with strtoull and no range check: "-1" and 2^64 would both
  // become 2^64 - 1. Only decimal digits whose value fits are taken.
  const CLI::Validator fits_64_bits(
      [](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        std::strtoull(text.c_str(), &end, 10);
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || errno == ERANGE || *end != '\0') return "Value " + text + " is not a whole number from 0 to 2^64-1";
        return "";
      },
      "UINT64");
  return command.add_option(flags, seed, help)->check(fits_64_bits);
}

// One line, whatever the message holds (CLI11's can span several), and the file's bytes as they
// can be shown: the README's rule for every error.
int print_error(const std::string& message) {
  std::string line = printable(message, false);
  std::fprintf(stderr, "cpullm: error: %s\n", line.c_str());
  return 1;
}

}  // namespace cpullm::cli

int main(int argc, char** argv) {
  CLI::App app{"cpullm: CPU-only LLaMA inference, benchmarking and tuning"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cpullm 0.1");
  cpullm::cli::register_generate(app);
  cpullm::cli::register_logits(app);
  cpullm::cli::register_info(app);
  cpullm::cli::register_tokenize(app);
  cpullm::cli::register_gen_model(app);
  cpullm::cli::register_quantize(app);
  cpullm::cli::register_eval_quant(app);
  cpullm::cli::register_topo(app);
  cpullm::cli::register_bench(app);
  cpullm::cli::register_profile(app);
  cpullm::cli::register_db(app);
  cpullm::cli::register_serve(app);
  cpullm::cli::register_python_command(app, "report", "One self-contained HTML report from the results database", "reports.report");
  cpullm::cli::register_python_command(app, "sweep", "Measure a model over a space of configurations; write the best as config files", "tuning.sweep");
  cpullm::cli::register_python_command(app, "tune", "Tune a model for a hardware profile: OS checklist, plans, roofline predictions, a sweep", "tuning.tune");
  try {
    const std::vector<std::string> args = cpullm::cli::prepare_arguments(argc, argv);
    std::vector<const char*> arg_pointers;
    for (const std::string& arg : args) arg_pointers.push_back(arg.c_str());
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return cpullm::cli::print_error(e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return cpullm::cli::print_error(e.path1().string() + ": " + e.code().message());
  } catch (const std::bad_alloc&) {
    return cpullm::cli::print_error("out of memory");
  } catch (const std::exception& e) {  // cpullm::Error, and the last line of defence for the rest
    return cpullm::cli::print_error(e.what());
  } catch (...) {
    return cpullm::cli::print_error("an unexpected error that is not a std::exception");
  }
  return 0;
}

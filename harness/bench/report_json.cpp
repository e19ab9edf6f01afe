// JSON (an array of objects, printed one by one as points finish) and JSON Lines (one object
// a line), with llama-bench's field names.
#include "harness/bench/reporters.hpp"

namespace cpullm {
namespace {

class JsonReporter : public Reporter {
 public:
  JsonReporter(std::FILE* out, bool lines) : out_(out), lines_(lines) {}

  void add(const Record& record) override {
    if (lines_) {
      std::fprintf(out_, "%s\n", record.dump().c_str());
    } else {
      std::fprintf(out_, "%s\n%s", count_ ? "," : "[", record.dump(2).c_str());
    }
    ++count_;
    std::fflush(out_);
  }

  void finish() override {
    if (!lines_) std::fputs(count_ ? "\n]\n" : "[]\n", out_);
  }

 private:
  std::FILE* out_;
  bool lines_;     // JSON Lines: no enclosing array
  int count_ = 0;  // records printed
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter(std::FILE* out, bool lines) { return std::make_unique<JsonReporter>(out, lines); }

}  // namespace cpullm

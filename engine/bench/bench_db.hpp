// A bench Record as the results database stores it (engine/results): the summary row, its
// configuration as JSON and one sample per repetition.
#pragma once
#include "engine/bench/reporters.hpp"
#include "engine/results/results_db.hpp"

namespace cpullm {

// `test` is the schema's kind of point: pp, tg, pg, load or multiproc.
ResultRecord result_record(const Record& record, const std::string& test);

}  // namespace cpullm

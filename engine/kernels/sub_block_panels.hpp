// The GEMM's sub-block panels for the formats whose values are scale * q + offset per sub-block
// (gemm.hpp gives the layout): one packer per format, which the format registry names.
#pragma once
#include "engine/kernels/weight_formats.hpp"

namespace cpullm {

extern const PackIntegerPanel pack_q4_1_panel, pack_q5_0_panel, pack_q5_1_panel;
extern const PackIntegerPanel pack_q2_k_panel, pack_q3_k_panel, pack_q4_k_panel, pack_q5_k_panel, pack_q6_k_panel;

}  // namespace cpullm

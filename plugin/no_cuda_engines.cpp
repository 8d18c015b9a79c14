// The CUDA side of the plugin's roles in a build without CUDA: every GPU
// request is refused with the same reason.
#include "plugin/engine_roles.hpp"

namespace mambarl {

namespace {
constexpr const char* kNoCuda = "this build of mambarl_policies has no CUDA engine (built without CUDA)";
}  // namespace

std::string cuda_unavailable_reason() { return kNoCuda; }

std::unique_ptr<LearnerRole> make_gpu_learner(const PolicyConfig&, int, const HeadSpec&, const PpoLossConfig&,
                                              const AdamWConfig&, uint64_t, Precision, Allreduce*) {
  MAMBARL_FAIL(kNoCuda);
}

std::unique_ptr<ActorRole> make_gpu_actor(std::shared_ptr<const ActorCritic<float>>, const PolicyConfig&, int,
                                          uint64_t, bool) {
  MAMBARL_FAIL(kNoCuda);
}

}  // namespace mambarl

// make_gpu_mixer: one table row per mixer type with a GPU training engine.
// Adding one is one row: {"<type>", &make_as<GpuXMixer, XMixer<float>>}
// where GpuXMixer(const XMixer<float>&, const ParamLayout&, int layer).
#include "policy/gpu_mixer.hpp"

#include <iterator>

#include "policy/gpu_gru_mixer.hpp"
#include "policy/gpu_mamba1_mixer.hpp"
#include "policy/gpu_mamba3_mixer.hpp"
#include "policy/gpu_mlp_mixer.hpp"

namespace mambarl {

namespace {

using Maker = std::unique_ptr<GpuMixer> (*)(const Mixer<float>&, const ParamLayout&, int);

template <class Gpu, class Cpu>
std::unique_ptr<GpuMixer> make_as(const Mixer<float>& mixer, const ParamLayout& layout, int layer) {
  const auto* cpu = dynamic_cast<const Cpu*>(&mixer);
  MAMBARL_CHECK(cpu, "make_gpu_mixer: layer " << layer << " says type '" << mixer.type()
                                              << "' but is not that mixer's CPU class");
  return std::make_unique<Gpu>(*cpu, layout, layer);
}

struct Entry {
  const char* type;
  Maker make;
};

const Entry kEngines[] = {
    {"mamba1", &make_as<GpuMamba1Mixer, Mamba1Mixer<float>>},
    {"mamba3", &make_as<GpuMamba3Mixer, Mamba3Mixer<float>>},
    {"gru", &make_as<GpuGruMixer, GruMixer<float>>},
    {"mlp", &make_as<GpuMlpMixer, MlpMixer<float>>},
};

}  // namespace

std::vector<std::string> gpu_mixer_types() {
  std::vector<std::string> out;
  for (const Entry& e : kEngines) out.emplace_back(e.type);
  return out;
}

std::unique_ptr<GpuMixer> make_gpu_mixer(const Mixer<float>& mixer, const ParamLayout& layout, int layer) {
  const std::string type = mixer.type();
  for (const Entry& e : kEngines)
    if (type == e.type) return e.make(mixer, layout, layer);
  std::string known;
  for (const Entry& e : kEngines) known += (known.empty() ? "" : ", ") + std::string(e.type);
  MAMBARL_FAIL("make_gpu_mixer: no GPU training engine for mixer type '"
               << type << "' in this build (GPU engines: " << known << ")");
}

}  // namespace mambarl

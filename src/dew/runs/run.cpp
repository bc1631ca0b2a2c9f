#include "dew/runs/run.h"

#include "dew/core/error.h"

namespace dew::runs {

SampleResult Run::sample(const SampleRequest&) const {
  fail("run '", dir().string(), "' is a ", kind(), " run; `dew sample` draws images from a diffusion run",
       kind() == "classifier" ? "" : " (use `dew generate` for text)");
}

ProbeResult Run::probe(const ProbeRequest&) const {
  fail("run '", dir().string(), "' is a ", kind(), " run; `dew probe` measures the encoder of a jepa run");
}

LoraAdapters Run::lora_adapters(const ModelLoadOptions&) const {
  fail("--format peft writes a LoRA run's adapters, but run '", dir().string(), "' is a ", kind(),
       " run without adapters; export a decoder run with --format hf or gguf");
}

}  // namespace dew::runs

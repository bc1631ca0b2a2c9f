#include "dew/data/prompt_rows.h"

#include <ATen/ATen.h>

#include <cmath>

#include "dew/core/error.h"

namespace dew::data {

std::int64_t prompt_val_count(std::int64_t records, double val_fraction, const std::string& field) {
  if (records < 1) fail("the prompt file holds no prompts");
  if (val_fraction < 0) return records >= 10 ? std::llround(0.1 * static_cast<double>(records)) : 0;
  if (!(val_fraction < 1)) fail(field, " must lie in [0, 1) (a negative value = the default), got ", val_fraction);
  const std::int64_t val = std::llround(val_fraction * static_cast<double>(records));
  if (val >= records) {
    fail(field, " = ", val_fraction, " puts all ", records, " prompts in the validation split and leaves none to train on; "
         "lower it");
  }
  return val;
}

namespace {

std::int64_t split_records(std::int64_t records, std::int64_t val_count, Split split) {
  if (val_count < 0 || val_count > records) fail("validation prompts ", val_count, " must lie in [0, ", records, "]");
  return split == Split::val ? val_count : records - val_count;
}

}  // namespace

PromptRows::PromptRows(std::int64_t records, std::int64_t val_count, TokenLoaderOptions options)
    : first_(options.split == Split::val ? 0 : val_count),
      schedule_(split_records(records, val_count, options.split), options.seed, options.shuffled(), options.rank,
                options.world, dew::str(options.split == Split::val ? "validation" : "training", " prompts")) {}

Batch PromptRows::next_batch(std::int64_t rows) {
  const std::vector<std::int64_t> records = schedule_.next(rows);
  at::Tensor index = at::empty({static_cast<std::int64_t>(records.size())}, at::kLong);
  auto* p = index.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < records.size(); ++i) p[i] = first_ + records[i];
  Batch batch;
  batch.set("prompt_index", index);
  return batch;
}

}  // namespace dew::data

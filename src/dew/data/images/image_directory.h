#pragma once
// A directory of PNG/JPEG images as an ImageSet: labelled by subdirectory, by DIR/labels.txt, or not at
// all (image_set.h describes the layouts).
#include <filesystem>

#include "dew/data/images/image_set.h"

namespace dew::data::images {

ImageSet read_image_directory(const std::filesystem::path& dir, const ImageReadOptions& options);

}  // namespace dew::data::images

#pragma once
// What every picture dew draws needs, in one place that owns the stb headers: PNG encoding of interleaved
// 8-bit pixels, and the rectangles of stb_easy_font's text (for loss plots and labelled image grids).
#include <cstdint>
#include <string>
#include <vector>

namespace dew {

// A PNG of `height` rows of `width` pixels of `channels` (1 grey .. 4 RGBA) bytes each, interleaved [H, W, C].
// Throws dew::Error when the sizes are out of range or the encoder fails; `what` names the picture.
std::string encode_png_bytes(const std::uint8_t* pixels, int width, int height, int channels, const std::string& what);

// One filled rectangle of drawn text, in font units (capitals are 7 units tall) from the text's top-left.
struct TextQuad {
  float x0, y0, x1, y1;
};
// The rectangles that draw `text` (characters outside printable ASCII are drawn as '?').
std::vector<TextQuad> text_quads(const std::string& text);
// The width of `text` in font units.
int text_width(const std::string& text);

}  // namespace dew

#include "dew/telemetry/plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/raster.h"

namespace dew::telemetry {
namespace {

using Color = std::array<std::uint8_t, 3>;
constexpr Color kWhite{255, 255, 255}, kBlack{30, 30, 30}, kGrid{225, 225, 225};
constexpr std::array<Color, 4> kLineColors{{{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}}};
constexpr float kTextScale = 2.0f;  // stb_easy_font draws ~7 px high capitals; doubled for legibility

class Canvas {
 public:
  Canvas(int width, int height) : width_(width), height_(height), pixels_(static_cast<std::size_t>(width * height * 3), 255) {}

  void set(int x, int y, Color c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    auto* p = &pixels_[static_cast<std::size_t>((y * width_ + x) * 3)];
    p[0] = c[0];
    p[1] = c[1];
    p[2] = c[2];
  }
  void fill(int x0, int y0, int x1, int y1, Color c) {
    for (int y = std::max(0, y0); y < std::min(height_, y1); ++y) {
      for (int x = std::max(0, x0); x < std::min(width_, x1); ++x) set(x, y, c);
    }
  }
  // A line `thickness` pixels wide (Bresenham with a square pen).
  void line(double fx0, double fy0, double fx1, double fy1, Color c, int thickness = 1) {
    int x0 = static_cast<int>(std::lround(fx0)), y0 = static_cast<int>(std::lround(fy0));
    int x1 = static_cast<int>(std::lround(fx1)), y1 = static_cast<int>(std::lround(fy1));
    int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1, err = dx + dy;
    const int lo = -(thickness - 1) / 2, hi = thickness / 2;
    for (;;) {
      for (int oy = lo; oy <= hi; ++oy) {
        for (int ox = lo; ox <= hi; ++ox) set(x0 + ox, y0 + oy, c);
      }
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  static int text_width(const std::string& text) {
    return static_cast<int>(static_cast<float>(dew::text_width(text)) * kTextScale);
  }
  static int text_height() { return static_cast<int>(7 * kTextScale); }
  // Text with its top-left corner at (x, y); rotated a quarter turn counter-clockwise when `vertical`
  // (reading upwards, for the y-axis label), then (x, y) is the bottom-left of the rotated text.
  void text(double x, double y, const std::string& text, Color c, bool vertical = false) {
    for (const TextQuad& q : text_quads(text)) {
      float qx0 = q.x0 * kTextScale, qy0 = q.y0 * kTextScale;
      float qx1 = q.x1 * kTextScale, qy1 = q.y1 * kTextScale;
      if (!vertical) {
        fill(static_cast<int>(std::lround(x + qx0)), static_cast<int>(std::lround(y + qy0)),
             static_cast<int>(std::lround(x + qx1)), static_cast<int>(std::lround(y + qy1)), c);
      } else {  // (u, v) -> (x + v, y - u)
        fill(static_cast<int>(std::lround(x + qy0)), static_cast<int>(std::lround(y - qx1)),
             static_cast<int>(std::lround(x + qy1)), static_cast<int>(std::lround(y - qx0)), c);
      }
    }
  }
  const std::vector<std::uint8_t>& pixels() const { return pixels_; }

 private:
  int width_, height_;
  std::vector<std::uint8_t> pixels_;
};

std::string tick_label(double value, double spacing) {
  if (std::fabs(value) < spacing * 1e-9) value = 0;
  char buf[32];
  double magnitude = std::max(std::fabs(value), spacing);
  if (magnitude >= 1e5 || magnitude < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.2g", value);
  } else {
    int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(spacing) + 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  }
  return buf;
}

}  // namespace

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(high > low)) return {low};
  double raw = (high - low) / std::max(1, target - 1);
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;  // in [1, 10): round to the nearest of 1, 2, 5, 10 (geometrically)
  const double step = magnitude * (r < 1.5 ? 1.0 : r < 3.0 ? 2.0 : r < 7.0 ? 5.0 : 10.0);
  std::vector<double> ticks;
  for (double t = std::ceil(low / step - 1e-9) * step; t <= high + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

void write_line_plot(const std::filesystem::path& path, const std::vector<PlotSeries>& series, const PlotOptions& options) {
  if (options.width < 200 || options.height < 150 || options.width > 8000 || options.height > 8000) {
    fail("plot '", path.string(), "': size ", options.width, "x", options.height, " is outside 200x150 .. 8000x8000");
  }
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  }
  if (!std::isfinite(x_min)) x_min = 0, x_max = 1, y_min = 0, y_max = 1;  // nothing to draw: empty axes
  if (x_max == x_min) x_min -= 0.5, x_max += 0.5;
  if (y_max == y_min) y_min -= std::max(0.5, std::fabs(y_min) * 0.05), y_max += std::max(0.5, std::fabs(y_max) * 0.05);
  const double y_pad = (y_max - y_min) * 0.05;
  y_min -= y_pad, y_max += y_pad;

  Canvas canvas(options.width, options.height);
  const int th = Canvas::text_height();
  const int left = 30 + 8 * th / 2 * 2, right = options.width - 40, top = 20 + 2 * th, bottom = options.height - 20 - 3 * th;
  auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * (right - left); };
  auto py = [&](double y) { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); };

  auto x_ticks = nice_ticks(x_min, x_max), y_ticks = nice_ticks(y_min, y_max);
  const double x_spacing = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1.0;
  const double y_spacing = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1.0;
  for (double t : x_ticks) {
    canvas.line(px(t), top, px(t), bottom, kGrid);
    canvas.line(px(t), bottom, px(t), bottom + 5, kBlack);
    auto label = tick_label(t, x_spacing);
    canvas.text(px(t) - Canvas::text_width(label) / 2.0, bottom + 8, label, kBlack);
  }
  for (double t : y_ticks) {
    canvas.line(left, py(t), right, py(t), kGrid);
    canvas.line(left - 5, py(t), left, py(t), kBlack);
    auto label = tick_label(t, y_spacing);
    canvas.text(left - 8 - Canvas::text_width(label), py(t) - th / 2.0, label, kBlack);
  }
  canvas.line(left, top, left, bottom, kBlack);
  canvas.line(left, bottom, right, bottom, kBlack);
  canvas.line(right, top, right, bottom, kBlack);
  canvas.line(left, top, right, top, kBlack);

  for (std::size_t i = 0; i < series.size(); ++i) {
    const Color color = kLineColors[i % kLineColors.size()];
    const auto& points = series[i].points;
    for (std::size_t k = 0; k < points.size(); ++k) {
      auto [x, y] = points[k];
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      bool joined = k > 0 && std::isfinite(points[k - 1].first) && std::isfinite(points[k - 1].second);
      if (joined) {
        canvas.line(px(points[k - 1].first), py(points[k - 1].second), px(x), py(y), color, 2);
      } else {
        canvas.fill(static_cast<int>(px(x)) - 2, static_cast<int>(py(y)) - 2, static_cast<int>(px(x)) + 3,
                    static_cast<int>(py(y)) + 3, color);
      }
    }
    if (series.size() > 1) {
      int ly = top + 8 + static_cast<int>(i) * (th + 6);
      canvas.fill(right - 160, ly + th / 2 - 1, right - 140, ly + th / 2 + 2, color);
      canvas.text(right - 134, ly, series[i].label, kBlack);
    }
  }
  canvas.text((left + right) / 2.0 - Canvas::text_width(options.title) / 2.0, 10, options.title, kBlack);
  canvas.text((left + right) / 2.0 - Canvas::text_width(options.x_label) / 2.0, options.height - 10 - th, options.x_label, kBlack);
  canvas.text(8, (top + bottom) / 2.0 + Canvas::text_width(options.y_label) / 2.0, options.y_label, kBlack, true);

  write_file_atomic(path, encode_png_bytes(canvas.pixels().data(), options.width, options.height, 3, "plot '" + path.string() + "'"));
}

}  // namespace dew::telemetry

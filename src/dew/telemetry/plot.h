#pragma once
// Small line plots as PNG files (loss and validation perplexity against step, written when a run ends):
// axes with "nice" tick values and labels, one polyline per series, a title. Text is drawn with
// stb_easy_font's built-in bitmap font; the PNG is encoded by stb_image_write and written atomically.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace dew::telemetry {

struct PlotSeries {
  std::string label;                             // shown in the legend when there are several series
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points break the line
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  int width = 800;
  int height = 500;
};

// Draws the series into a width x height RGB PNG at `path`. Refuses sizes under 200 x 150.
void write_line_plot(const std::filesystem::path& path, const std::vector<PlotSeries>& series, const PlotOptions& options);

// Tick values covering [low, high] at a 1-2-5 spacing with about `target` ticks.
std::vector<double> nice_ticks(double low, double high, int target = 6);

}  // namespace dew::telemetry

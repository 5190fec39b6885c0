// A small SVG line chart, written by hand (no plotting library): panels side by side, each with log or
// linear axes, tick labels, a legend, and series drawn as lines (solid or dashed) with optional markers.
// `plumb roofline --svg` draws decode tok/s against batch and against context with the ceilings.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace plumb::roofline {

struct ChartSeries {
  std::string label;
  std::string color;  // any SVG colour, e.g. "#1f77b4"
  bool dashed = false;
  bool markers = false;
  std::vector<std::pair<double, double>> points;  // (x, y); points with y ≤ 0 on a log axis are left out
};

struct ChartPanel {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = true;
  bool log_y = true;
  bool x_powers_of_two = false;  // log x ticks at 1, 2, 4, 8, ... instead of 1, 2, 5, 10, ...
  std::vector<ChartSeries> series;
};

// The SVG document (UTF-8 text). Throws plumb::Error for a panel with nothing drawable.
std::string RenderSvg(const std::string& title, const std::vector<ChartPanel>& panels);

}  // namespace plumb::roofline

// The SVG chart writer (include/plumb/roofline/svg_chart.h).
#include "plumb/roofline/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "plumb/core/error.h"

namespace plumb::roofline {
namespace {

constexpr double kPanelWidth = 480, kPanelHeight = 360;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;  // plot margins inside a panel

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

// A tick label: 1, 20, 500, 4k, 1.5M.
std::string TickLabel(double v) {
  char text[32];
  if (v >= 1e6)
    std::snprintf(text, sizeof text, "%gM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(text, sizeof text, "%gk", v / 1e3);
  else
    std::snprintf(text, sizeof text, "%g", v);
  return text;
}

struct Axis {
  bool log = true;
  bool base2 = false;
  double lo = 0, hi = 1;  // data range (log: both > 0)
  double Fraction(double v) const {
    return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
  }
  std::vector<double> Ticks() const {
    std::vector<double> ticks;
    if (log && base2) {
      for (double v = std::pow(2, std::ceil(std::log2(lo) - 1e-9)); v <= hi * 1.001; v *= 2)
        ticks.push_back(v);
    } else if (log) {
      const bool few = hi / lo < 100;  // under two decades: 1-2-5 steps
      for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi; decade *= 10) {
        for (double m : {1.0, 2.0, 5.0}) {
          if ((m == 1.0 || few) && decade * m >= lo * 0.999 && decade * m <= hi * 1.001)
            ticks.push_back(decade * m);
        }
      }
    } else {
      const double raw = (hi - lo) / 5;
      const double step = std::pow(10, std::floor(std::log10(raw)));
      const double nice = raw / step < 2 ? step : raw / step < 5 ? 2 * step : 5 * step;
      for (double v = std::ceil(lo / nice) * nice; v <= hi + nice * 1e-9; v += nice) ticks.push_back(v);
    }
    return ticks;
  }
};

Axis MakeAxis(bool log, double lo, double hi) {
  Axis a;
  a.log = log;
  if (log) {
    // Whole powers of two or ten around the data, so the ends carry ticks.
    a.lo = std::pow(10, std::floor(std::log10(lo) * 4) / 4);
    a.hi = std::pow(10, std::ceil(std::log10(hi) * 4) / 4);
    if (a.hi <= a.lo) a.hi = a.lo * 10;
  } else {
    a.lo = std::min(0.0, lo);
    a.hi = hi > a.lo ? hi * 1.05 : a.lo + 1;
  }
  return a;
}

void DrawPanel(std::ostringstream& svg, const ChartPanel& panel, double x0) {
  double xlo = std::numeric_limits<double>::max(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const ChartSeries& s : panel.series) {
    for (const auto& [x, y] : s.points) {
      if ((panel.log_x && x <= 0) || (panel.log_y && y <= 0) || !std::isfinite(x) || !std::isfinite(y))
        continue;
      xlo = std::min(xlo, x), xhi = std::max(xhi, x), ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  }
  if (xlo > xhi) throw MakeError("svg chart: panel '", panel.title, "' has no point to draw");
  Axis ax = MakeAxis(panel.log_x, xlo, xhi);
  const Axis ay = MakeAxis(panel.log_y, ylo, yhi);
  if (panel.log_x && panel.x_powers_of_two) {
    ax.base2 = true;
    ax.lo = std::pow(2, std::floor(std::log2(xlo)));
    ax.hi = std::max(ax.lo * 2, std::pow(2, std::ceil(std::log2(xhi))));
  }
  const double pw = kPanelWidth - kLeft - kRight, ph = kPanelHeight - kTop - kBottom;
  auto px = [&](double x) { return x0 + kLeft + ax.Fraction(x) * pw; };
  auto py = [&](double y) { return kTop + (1 - ay.Fraction(y)) * ph + 30; };
  const double top = kTop + 30, bottom = kTop + 30 + ph;
  svg << "<text x=\"" << Num(x0 + kPanelWidth / 2) << "\" y=\"" << Num(top - 14)
      << "\" text-anchor=\"middle\" font-size=\"14\">" << Escape(panel.title) << "</text>\n";
  svg << "<rect x=\"" << Num(x0 + kLeft) << "\" y=\"" << Num(top) << "\" width=\"" << Num(pw)
      << "\" height=\"" << Num(ph) << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double t : ax.Ticks()) {
    svg << "<line x1=\"" << Num(px(t)) << "\" y1=\"" << Num(top) << "\" x2=\"" << Num(px(t)) << "\" y2=\""
        << Num(bottom) << "\" stroke=\"#ddd\"/>\n<text x=\"" << Num(px(t)) << "\" y=\"" << Num(bottom + 16)
        << "\" text-anchor=\"middle\" font-size=\"11\">" << TickLabel(t) << "</text>\n";
  }
  for (double t : ay.Ticks()) {
    svg << "<line x1=\"" << Num(x0 + kLeft) << "\" y1=\"" << Num(py(t)) << "\" x2=\"" << Num(x0 + kLeft + pw)
        << "\" y2=\"" << Num(py(t)) << "\" stroke=\"#ddd\"/>\n<text x=\"" << Num(x0 + kLeft - 6) << "\" y=\""
        << Num(py(t) + 4) << "\" text-anchor=\"end\" font-size=\"11\">" << TickLabel(t) << "</text>\n";
  }
  svg << "<text x=\"" << Num(x0 + kLeft + pw / 2) << "\" y=\"" << Num(bottom + 36)
      << "\" text-anchor=\"middle\" font-size=\"12\">" << Escape(panel.x_label) << "</text>\n";
  svg << "<text transform=\"translate(" << Num(x0 + 18) << "," << Num(top + ph / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << Escape(panel.y_label) << "</text>\n";
  int legend = 0;
  for (const ChartSeries& s : panel.series) {
    std::string path;
    for (const auto& [x, y] : s.points) {
      if ((panel.log_x && x <= 0) || (panel.log_y && y <= 0) || !std::isfinite(x) || !std::isfinite(y))
        continue;
      if (!path.empty()) path += ' ';
      path += Num(px(x));
      path += ',';
      path += Num(py(y));
    }
    if (path.empty()) continue;
    svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << path << "\"/>\n";
    if (s.markers) {
      for (const auto& [x, y] : s.points) {
        if ((panel.log_x && x <= 0) || (panel.log_y && y <= 0)) continue;
        svg << "<circle cx=\"" << Num(px(x)) << "\" cy=\"" << Num(py(y)) << "\" r=\"3.5\" fill=\"" << s.color
            << "\"/>\n";
      }
    }
    const double ly = top + 14 + 15 * legend++;
    svg << "<line x1=\"" << Num(x0 + kLeft + 8) << "\" y1=\"" << Num(ly - 4) << "\" x2=\""
        << Num(x0 + kLeft + 30) << "\" y2=\"" << Num(ly - 4) << "\" stroke=\"" << s.color
        << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n<text x=\""
        << Num(x0 + kLeft + 35) << "\" y=\"" << Num(ly) << "\" font-size=\"11\">" << Escape(s.label)
        << "</text>\n";
  }
}

}  // namespace

std::string RenderSvg(const std::string& title, const std::vector<ChartPanel>& panels) {
  std::ostringstream svg;
  const double width = kPanelWidth * static_cast<double>(std::max<std::size_t>(1, panels.size()));
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(width) << "\" height=\""
      << Num(kPanelHeight + 30) << "\" viewBox=\"0 0 " << Num(width) << " " << Num(kPanelHeight + 30)
      << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << Num(width / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
      << "font-weight=\"bold\">" << Escape(title) << "</text>\n";
  for (std::size_t i = 0; i < panels.size(); ++i)
    DrawPanel(svg, panels[i], kPanelWidth * static_cast<double>(i));
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace plumb::roofline

// A small SVG line chart (no dependencies, header-only) for `frost bench capsule`: TTFT against
// prefix length, one polyline per series, linear axes with ticks, and a legend.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace frost::cli {

struct PlotSeries {
    std::string name;
    std::string color;       // CSS colour, e.g. "#d62728"
    std::vector<double> x, y;
};

}  // namespace frost::cli

// svg_line_chart(title, x_label, y_label, series): the SVG document. Axes start at 0 and end at
// the largest value rounded up to 1, 2 or 5 times a power of ten.
namespace frost::cli {
namespace plot_detail {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 60;  // margins; legend on the right
constexpr int kTicks = 5;

// A "nice" upper bound (1, 2 or 5 times a power of ten) at or above v.
inline double nice_ceil(double v) {
    if (v <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * p >= v) return m * p;
    return 10 * p;
}

inline std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

inline std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else o += c;
    }
    return o;
}

}  // namespace plot_detail

inline std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<PlotSeries>& series) {
    using namespace plot_detail;
    double xmax = 0, ymax = 0;
    for (const auto& s : series) {
        for (double v : s.x) xmax = std::max(xmax, v);
        for (double v : s.y) ymax = std::max(ymax, v);
    }
    xmax = nice_ceil(xmax);
    ymax = nice_ceil(ymax);
    const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
    auto X = [&](double v) { return kLeft + pw * v / xmax; };
    auto Y = [&](double v) { return kTop + ph * (1 - v / ymax); };
    std::string o;
    o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    o += "<text x=\"" + num(kLeft) + "\" y=\"24\" font-size=\"15\">" + escape(title) + "</text>\n";
    for (int i = 0; i <= kTicks; ++i) {
        const double xv = xmax * i / kTicks, yv = ymax * i / kTicks;
        o += "<line x1=\"" + num(X(xv)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(X(xv)) + "\" y2=\"" +
             num(kTop + ph) + "\" stroke=\"#eee\"/>\n";
        o += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(Y(yv)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" +
             num(Y(yv)) + "\" stroke=\"#eee\"/>\n";
        o += "<text x=\"" + num(X(xv)) + "\" y=\"" + num(kTop + ph + 18) + "\" text-anchor=\"middle\">" + num(xv) +
             "</text>\n";
        o += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(Y(yv) + 4) + "\" text-anchor=\"end\">" + num(yv) +
             "</text>\n";
    }
    o += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
    o += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kHeight - 18) + "\" text-anchor=\"middle\">" +
         escape(x_label) + "</text>\n";
    o += "<text transform=\"translate(18," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape(y_label) + "</text>\n";
    for (size_t k = 0; k < series.size(); ++k) {
        const auto& s = series[k];
        std::string pts;
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) pts += num(X(s.x[i])) + "," + num(Y(s.y[i])) + " ";
        o += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + s.color + "\" points=\"" + pts + "\"/>\n";
        for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
            o += "<circle r=\"3\" fill=\"" + s.color + "\" cx=\"" + num(X(s.x[i])) + "\" cy=\"" + num(Y(s.y[i])) +
                 "\"/>\n";
        const double ly = kTop + 10 + 20 * double(k);
        o += "<line x1=\"" + num(kLeft + pw + 14) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(kLeft + pw + 40) +
             "\" y2=\"" + num(ly) + "\" stroke-width=\"2\" stroke=\"" + s.color + "\"/>\n";
        o += "<text x=\"" + num(kLeft + pw + 46) + "\" y=\"" + num(ly + 4) + "\">" + escape(s.name) + "</text>\n";
    }
    o += "</svg>\n";
    return o;
}

}  // namespace frost::cli

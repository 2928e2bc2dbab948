// plot.cpp — `gearbx run --plot`: a self-contained SVG of one generation's
// gear routing. x = decode step, y = entropy in bits: raw entropy (thin line
// and dots), the monitor's smoothed entropy (thick line), the thresholds in
// force as dashed step-lines, background bands coloured by the gear each step
// used, shift markers, axes and a legend. Only generic font families; every
// number is printed with a fixed format, so the same steps give the same
// bytes. Written to PATH.tmp, then renamed over PATH.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <string>

#include "cli.h"

namespace {

// Canvas and plot area (pixels).
constexpr double kW = 1000, kH = 500;
constexpr double kX0 = 66, kX1 = 914;  // plot area left / right (labels of the thresholds right of it)
constexpr double kY0 = 66, kY1 = 404;  // plot area top / bottom

struct GearStyle {
  const char *band, *dark;
};
// low / mid / high / f32 (by gb_gear value): light band colours and a dark
// tone for markers.
const GearStyle kGear[GB_GEAR_COUNT] = {
    {"#d6e9f8", "#2a6db0"},
    {"#fbe7b5", "#b07a12"},
    {"#f7d0cd", "#b3312c"},
    {"#e3daf3", "#6a4fa3"},
};
const char *gear_label(int g) { return gb_gear_name((gb_gear)g); }
const char *const kRawColor = "#5f6f86";
const char *const kSmoothColor = "#14284b";
const char *const kThetaLowColor = "#1e7b3c";
const char *const kThetaHighColor = "#b3312c";
const char *const kCatColor = "#d00000";

int gear_index(int g) { return g >= 0 && g < GB_GEAR_COUNT ? g : GB_GEAR_HIGH; }
double finite_or0(float v) { return isfinite(v) ? (double)v : 0.0; }

// 1, 2, 2.5, 5 x 10^k: the smallest at least `raw`.
double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double p = pow(10.0, floor(log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// Integer tick step for steps: 1, 2, 5 x 10^k.
size_t nice_int_step(double raw) {
  size_t p = 1;
  for (;;) {
    for (size_t m : {1u, 2u, 5u})
      if ((double)(m * p) >= raw) return m * p;
    p *= 10;
  }
}

std::string xml_escape(const char *s) {
  std::string r;
  for (; s && *s; s++) {
    switch (*s) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n') r += ' ';
        else r += *s;
    }
  }
  return r;
}

class Plot {
 public:
  Plot(FILE *f, const CliPlotStep *steps, size_t n) : f_(f), s_(steps), n_(n) {
    ymax_ = 0;
    for (size_t i = 0; i < n; i++) {
      ymax_ = fmax(ymax_, finite_or0(steps[i].entropy));
      ymax_ = fmax(ymax_, finite_or0(steps[i].entropy_smoothed));
      ymax_ = fmax(ymax_, finite_or0(steps[i].theta_high));
    }
    ymax_ = fmax(ymax_ * 1.06, 1.0);
    ystep_ = nice_step(ymax_ / 6);
    ymax_ = ceil(ymax_ / ystep_ - 1e-9) * ystep_;
  }

  // Step i is drawn at X(i); its band spans X(i - 0.5) .. X(i + 0.5).
  double X(double i) const { return kX0 + (i + 0.5) / (double)(n_ ? n_ : 1) * (kX1 - kX0); }
  double Y(double v) const { return kY1 - fmin(fmax(v, 0.0), ymax_) / ymax_ * (kY1 - kY0); }

  void write(const char *title) {
    uint32_t used[GB_GEAR_COUNT] = {0};
    uint32_t shifts = 0, cats = 0;
    double mean = 0;
    for (size_t i = 0; i < n_; i++) {
      used[gear_index(s_[i].gear)]++;
      shifts += s_[i].shifted ? 1 : 0;
      cats += s_[i].catastrophic ? 1 : 0;
      mean += finite_or0(s_[i].entropy);
    }
    if (n_) mean /= (double)n_;
    const std::string t = xml_escape(title);

    fprintf(f_,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            kW, kH, kW, kH);
    fprintf(f_, "<title>%s</title>\n", t.c_str());
    fprintf(f_, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", kW, kH);

    // Title and a one-line summary.
    fprintf(f_, "<text x=\"%.1f\" y=\"26\" font-size=\"17\" font-weight=\"bold\" fill=\"#111111\">%s</text>\n", kX0, t.c_str());
    fprintf(f_, "<text x=\"%.1f\" y=\"47\" font-size=\"12.5\" fill=\"#444444\">", kX0);
    if (n_) {
      fprintf(f_, "gear use:");
      bool first = true;
      for (int g = 0; g < GB_GEAR_COUNT; g++) {
        if (!used[g] && g == GB_GEAR_F32) continue;
        fprintf(f_, "%s %s %.0f%%", first ? "" : ",", gear_label(g), 100.0 * used[g] / (double)n_);
        first = false;
      }
      const CliPlotStep &last = s_[n_ - 1];
      fprintf(f_,
              " &#183; %u shift%s &#183; mean entropy %.2f bits &#183; &#952; low %.2f / high %.2f bits",
              shifts, shifts == 1 ? "" : "s", mean, finite_or0(last.theta_low), finite_or0(last.theta_high));
      if (cats) fprintf(f_, " &#183; %u catastrophic", cats);
    } else {
      fprintf(f_, "no decode steps");
    }
    fprintf(f_, "</text>\n");

    bands();
    grid_and_axes();
    if (n_) {
      shift_markers();
      theta_line("theta-low", kThetaLowColor, true);
      theta_line("theta-high", kThetaHighColor, false);
      entropy_lines();
      catastrophic_markers();
    }
    legend(used[GB_GEAR_F32] != 0, cats != 0);
    fprintf(f_, "</svg>\n");
  }

 private:
  void bands() {
    fprintf(f_, "<g id=\"gear-bands\" stroke=\"none\">\n");
    for (size_t a = 0; a < n_;) {
      const int g = gear_index(s_[a].gear);
      size_t b = a;
      while (b + 1 < n_ && gear_index(s_[b + 1].gear) == g) b++;
      const double xa = X((double)a - 0.5), xb = X((double)b + 0.5);
      fprintf(f_, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>steps %zu-%zu: %s</title></rect>\n",
              xa, kY0, xb - xa, kY1 - kY0, kGear[g].band, a, b, gear_label(g));
      a = b + 1;
    }
    fprintf(f_, "</g>\n");
  }

  void grid_and_axes() {
    // Horizontal grid and y ticks.
    fprintf(f_, "<g id=\"y-axis\" font-size=\"11\" fill=\"#333333\" text-anchor=\"end\">\n");
    const int ny = (int)lround(ymax_ / ystep_);
    // Decimals the tick step needs: 1 -> 0, 0.5 -> 1, 0.25 -> 2.
    const int decimals = fabs(ystep_ - round(ystep_)) < 1e-9 ? 0 : fabs(ystep_ * 10 - round(ystep_ * 10)) < 1e-9 ? 1 : 2;
    for (int k = 0; k <= ny; k++) {
      const double v = k * ystep_, y = Y(v);
      if (k > 0)
        fprintf(f_, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#000000\" stroke-opacity=\"0.12\"/>\n", kX0, y,
                kX1, y);
      fprintf(f_, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#333333\"/>\n", kX0 - 5, y, kX0, y);
      fprintf(f_, "<text x=\"%.1f\" y=\"%.2f\">%.*f</text>\n", kX0 - 8, y + 4, decimals, v);
    }
    fprintf(f_, "</g>\n");
    fprintf(f_,
            "<text x=\"20\" y=\"%.1f\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 20 %.1f)\">entropy (bits)</text>\n",
            (kY0 + kY1) / 2, (kY0 + kY1) / 2);

    // x ticks at whole steps.
    fprintf(f_, "<g id=\"x-axis\" font-size=\"11\" fill=\"#333333\" text-anchor=\"middle\">\n");
    if (n_) {
      const size_t xs = nice_int_step((double)n_ / 12.0);
      for (size_t i = 0; i < n_; i += xs) {
        const double x = X((double)i);
        fprintf(f_, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333333\"/>\n", x, kY1, x, kY1 + 5);
        fprintf(f_, "<text x=\"%.2f\" y=\"%.1f\">%zu</text>\n", x, kY1 + 18, i);
      }
    }
    fprintf(f_, "</g>\n");
    fprintf(f_, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\">decode step</text>\n",
            (kX0 + kX1) / 2, kY1 + 38);
    // Frame.
    fprintf(f_, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333333\"/>\n", kX0, kY0,
            kX1 - kX0, kY1 - kY0);
    if (!n_)
      fprintf(f_, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" fill=\"#666666\" text-anchor=\"middle\">no decode steps</text>\n",
              (kX0 + kX1) / 2, (kY0 + kY1) / 2);
  }

  // A faint boundary line where the gear changes, and a triangle at the top
  // of the plot: up for a shift to more precision, down for less, in the
  // colour of the gear shifted to.
  void shift_markers() {
    fprintf(f_, "<g id=\"shifts\">\n");
    for (size_t i = 0; i < n_; i++) {
      if (!s_[i].shifted) continue;
      const int to = gear_index(s_[i].next_gear), from = gear_index(s_[i].gear);
      const double x = X((double)i + 0.5);
      fprintf(f_,
              "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333333\" stroke-opacity=\"0.45\" "
              "stroke-dasharray=\"2 3\"/>\n",
              x, kY0, x, kY1);
      const double top = kY0 + 3, h = 8, w = 5;
      if (to > from)
        fprintf(f_, "<path d=\"M%.2f %.1fL%.2f %.1fL%.2f %.1fZ\" fill=\"%s\"><title>step %zu: %s -&gt; %s</title></path>\n", x,
                top, x + w, top + h, x - w, top + h, kGear[to].dark, i, gear_label(from), gear_label(to));
      else
        fprintf(f_, "<path d=\"M%.2f %.1fL%.2f %.1fL%.2f %.1fZ\" fill=\"%s\"><title>step %zu: %s -&gt; %s</title></path>\n", x,
                top + h, x + w, top, x - w, top, kGear[to].dark, i, gear_label(from), gear_label(to));
    }
    fprintf(f_, "</g>\n");
  }

  // The threshold in force at each step, as a step-line (it can change once,
  // when the monitor calibrates).
  void theta_line(const char *id, const char *color, bool low) {
    auto th = [&](size_t i) { return finite_or0(low ? s_[i].theta_low : s_[i].theta_high); };
    fprintf(f_, "<path id=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" stroke-dasharray=\"7 4\" d=\"M%.2f %.2f", id, color,
            X(-0.5), Y(th(0)));
    for (size_t i = 1; i < n_; i++)
      if (th(i) != th(i - 1)) fprintf(f_, "H%.2fV%.2f", X((double)i - 0.5), Y(th(i)));
    fprintf(f_, "H%.2f\"/>\n", X((double)n_ - 0.5));
    // Label right of the plot at the line's last value: name and value on
    // two lines, the two labels kept at least 30 px apart.
    const double yl = Y(finite_or0(s_[n_ - 1].theta_low)), yh = Y(finite_or0(s_[n_ - 1].theta_high));
    double y = low ? yl : yh;
    if (yl - yh < 30) y = low ? (yl + yh) / 2 + 15 : (yl + yh) / 2 - 15;
    fprintf(f_,
            "<text x=\"%.1f\" y=\"%.2f\" font-size=\"11\" fill=\"%s\">&#952; %s</text>\n"
            "<text x=\"%.1f\" y=\"%.2f\" font-size=\"11\" fill=\"%s\">%.2f bits</text>\n",
            kX1 + 6, y - 2, color, low ? "low" : "high", kX1 + 6, y + 11, color, th(n_ - 1));
  }

  void entropy_lines() {
    fprintf(f_, "<polyline id=\"entropy-raw\" fill=\"none\" stroke=\"%s\" stroke-width=\"1\" stroke-opacity=\"0.7\" points=\"",
            kRawColor);
    for (size_t i = 0; i < n_; i++) fprintf(f_, "%s%.2f,%.2f", i ? " " : "", X((double)i), Y(finite_or0(s_[i].entropy)));
    fprintf(f_, "\"/>\n");
    if (n_ <= 400) {
      fprintf(f_, "<g id=\"entropy-raw-dots\" fill=\"%s\">\n", kRawColor);
      for (size_t i = 0; i < n_; i++)
        fprintf(f_, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"1.8\"/>\n", X((double)i), Y(finite_or0(s_[i].entropy)));
      fprintf(f_, "</g>\n");
    }
    fprintf(f_,
            "<polyline id=\"entropy-smoothed\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.6\" stroke-linejoin=\"round\" "
            "stroke-linecap=\"round\" points=\"",
            kSmoothColor);
    for (size_t i = 0; i < n_; i++)
      fprintf(f_, "%s%.2f,%.2f", i ? " " : "", X((double)i), Y(finite_or0(s_[i].entropy_smoothed)));
    fprintf(f_, "\"/>\n");
  }

  void catastrophic_markers() {
    bool any = false;
    for (size_t i = 0; i < n_; i++) {
      if (!s_[i].catastrophic) continue;
      if (!any) fprintf(f_, "<g id=\"catastrophic\" stroke=\"%s\" stroke-width=\"2\">\n", kCatColor);
      any = true;
      const double x = X((double)i), y = Y(finite_or0(s_[i].entropy)), r = 4;
      fprintf(f_, "<path d=\"M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f\"/>\n", x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r);
    }
    if (any) fprintf(f_, "</g>\n");
  }

  void legend(bool f32, bool cats) {
    const double y = kH - 24;  // text baseline
    double x = kX0;
    // Advance past a label: entities (&#952;) count as one character.
    auto advance = [&](const char *label) {
      size_t chars = 0;
      for (const char *c = label; *c; c++, chars++)
        if (*c == '&') c = strchr(c, ';') ? strchr(c, ';') : c;
      x += 26 + 6.8 * (double)chars + 18;
    };
    auto text = [&](const char *label) { fprintf(f_, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 26, y, label); };
    fprintf(f_, "<g id=\"legend\" font-size=\"12\" fill=\"#222222\">\n");
    for (int g = 0; g < GB_GEAR_COUNT; g++) {
      if (g == GB_GEAR_F32 && !f32) continue;
      char label[32];
      snprintf(label, sizeof label, "%s gear", gear_label(g));
      fprintf(f_, "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"12\" fill=\"%s\" stroke=\"#888888\" stroke-width=\"0.5\"/>\n",
              x, y - 10, kGear[g].band);
      text(label);
      advance(label);
    }
    auto line = [&](const char *label, const char *color, double width, const char *dash) {
      fprintf(f_, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s/>\n", x, y - 4,
              x + 20, y - 4, color, width, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
      text(label);
      advance(label);
    };
    fprintf(f_, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.8\" fill=\"%s\"/>\n", x + 10, y - 4, kRawColor);
    line("entropy", kRawColor, 1, nullptr);
    line("smoothed", kSmoothColor, 2.6, nullptr);
    line("&#952; low", kThetaLowColor, 1.6, "7 4");
    line("&#952; high", kThetaHighColor, 1.6, "7 4");
    fprintf(f_, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"#444444\"/>\n", x + 5, y - 1, x + 9, y - 9, x + 13, y - 1);
    fprintf(f_, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" fill=\"#444444\"/>\n", x + 14, y - 9, x + 18, y - 1, x + 22, y - 9);
    text("gear shift up / down");
    advance("gear shift up / down");
    if (cats) {
      const double cx = x + 10, cy = y - 4;
      fprintf(f_, "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", cx - 4, cy - 4,
              cx + 4, cy + 4, cx - 4, cy + 4, cx + 4, cy - 4, kCatColor);
      text("catastrophic fallback");
    }
    fprintf(f_, "</g>\n");
  }

  FILE *f_;
  const CliPlotStep *s_;
  size_t n_;
  double ymax_, ystep_;
};

}  // namespace

bool cli_write_plot_svg(const char *path, const char *title, const CliPlotStep *steps, size_t n) {
  if (!path || (n && !steps)) return errno = EINVAL, false;
  const std::string tmp = std::string(path) + ".tmp";
  FILE *f = fopen(tmp.c_str(), "w");
  if (!f) return false;
  Plot(f, steps, n).write(title ? title : "gearbx run");
  const bool wrote = !ferror(f);
  const bool closed = fclose(f) == 0;
  if (!wrote || !closed) {
    const int e = errno ? errno : EIO;
    remove(tmp.c_str());
    errno = e;
    return false;
  }
  if (rename(tmp.c_str(), path) != 0) {
    const int e = errno;
    remove(tmp.c_str());
    errno = e;
    return false;
  }
  return true;
}

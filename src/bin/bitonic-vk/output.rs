//! Output files, written as `sink` says (a regular file whole or not at all, anything else in
//! place), their errors mapped to exit codes, and the JSON, CSV and SVG they hold.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;

use crate::failure::Failure;
use crate::sink::{self, Sink};

/// An output path as messages show it: `-` is named as standard output.
pub fn shown(path: &Path) -> String {
    if sink::is_stdio(path) {
        "- (standard output)".to_owned()
    } else {
        path.display().to_string()
    }
}

/// An output being written. Opened before long work starts, so that an unwritable path fails
/// at once (exit code 2); a failed write is a failure of the run (exit code 1).
pub struct Output {
    sink: Sink,
    path: PathBuf,
}

impl Output {
    /// Opens the output `path`: `-` for standard output.
    pub fn open(path: &Path) -> Result<Output, Failure> {
        let sink = Sink::open(path).map_err(|e| Failure::Input(anyhow!("cannot write output {}: {e}", shown(path))))?;
        Ok(Output { sink, path: path.to_owned() })
    }

    /// Writes `bytes`: a regular file's are synced to disk, anything else's flushed.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.sink
            .write_all(bytes)
            .and_then(|()| self.sink.sync())
            .map_err(|e| Failure::Run(anyhow!("cannot write output {}: {e}", shown(&self.path))))
    }

    /// Renames a regular file's complete temporary file over its target.
    pub fn persist(self) -> Result<(), Failure> {
        let path = self.path;
        self.sink.persist().map_err(|e| Failure::Run(anyhow!("cannot write output {}: {e}", shown(&path))))
    }

    /// Writes `bytes` and renames a regular file's temporary file over its target.
    pub fn finish(mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.write(bytes)?;
        self.persist()
    }
}

/// The identity of a file (device and inode) through links, and of standard output for `-`.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = if sink::is_stdio(path) {
        use std::os::fd::AsFd as _;
        let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
        std::fs::File::from(fd).metadata().ok()?
    } else {
        std::fs::metadata(path).ok()?
    };
    Some((metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn identity(_: &Path) -> Option<(u64, u64)> {
    None
}

/// Whether two output paths name one file: both `-`; the same path once links (the path's own
/// and its directories') are resolved; or, where both exist, one file through a link, symbolic or
/// hard, or `-` and a path to what standard output is.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if sink::is_stdio(a) || sink::is_stdio(b) {
        return (sink::is_stdio(a) && sink::is_stdio(b)) || identity(a).zip(identity(b)).is_some_and(|(x, y)| x == y);
    }
    // A path that does not exist yet: its directory resolved, and its own name.
    let resolve = |p: &Path| {
        let p = sink::resolve_links(p).ok()?;
        std::fs::canonicalize(&p).ok().or_else(|| {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
        })
    };
    if let (Some(x), Some(y)) = (resolve(a), resolve(b)) {
        if x == y {
            return true;
        }
    }
    identity(a).zip(identity(b)).is_some_and(|(x, y)| x == y)
}

/// Opens the optional output of `flag` (`--json`, `--csv`, `--plot`) of a command that prints its
/// table on standard output, which therefore cannot take `-`.
pub fn open_beside_table(flag: &str, path: Option<&PathBuf>) -> Result<Option<Output>, Failure> {
    match path {
        Some(p) if sink::is_stdio(p) => Err(Failure::Input(anyhow!(
            "{flag} -: standard output carries the table this command prints: give {flag} a file"
        ))),
        Some(p) => Output::open(p).map(Some),
        None => Ok(None),
    }
}

/// Rows as a JSON array.
pub fn json<T: serde::Serialize>(rows: &[T]) -> Result<Vec<u8>, Failure> {
    let mut bytes = serde_json::to_vec_pretty(rows).map_err(|e| Failure::Run(anyhow!("cannot encode JSON: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Rows as CSV with a header line.
pub fn csv<T: serde::Serialize>(rows: &[T]) -> Result<Vec<u8>, Failure> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row).map_err(|e| Failure::Run(anyhow!("cannot encode CSV: {e}")))?;
    }
    writer.into_inner().map_err(|e| Failure::Run(anyhow!("cannot encode CSV: {e}")))
}

/// One line of a log-log plot.
pub struct Series {
    pub label: String,
    /// (x, y) points, both positive.
    pub points: Vec<(f64, f64)>,
    /// Dashed lines for baselines.
    pub dashed: bool,
}

/// A log-log panel.
pub struct Panel<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
}

fn plot_error(e: impl std::fmt::Display) -> Failure {
    Failure::Run(anyhow!("cannot draw the plot: {e}"))
}

/// The range of positive values, widened a little so that lines do not touch the frame.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) =
        values.filter(|v| v.is_finite() && *v > 0.0).fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return 1.0..10.0;
    }
    (lo / 1.5)..(hi * 1.5)
}

/// The most labels on an x axis: fewer than a panel's width holds whatever their text.
const MAX_X_LABELS: usize = 8;
/// The most labels on the pass axis of a bar chart.
const MAX_BAR_LABELS: usize = 16;

/// Every `stride`-th of `count` labels, the stride the least that leaves at most `most`.
fn stride(count: usize, most: usize) -> usize {
    count.div_ceil(most).max(1)
}

/// The x axis's ticks over a range of counts: the powers of two inside it (counts are swept in
/// powers of two), every one or every second, fourth, ... exponent, so that labels never overlap.
fn power_of_two_ticks(range: &std::ops::Range<f64>) -> Vec<f64> {
    let (lo, hi) = (range.start.log2().ceil() as i32, range.end.log2().floor() as i32);
    let every = stride((hi - lo + 1).max(0) as usize, MAX_X_LABELS) as i32;
    (lo..=hi).filter(|k| k.rem_euclid(every) == 0).map(|k| 2f64.powi(k)).collect()
}

/// The y axis's ticks over a log range: its powers of ten, and 2 and 5 times them where fewer
/// than three powers of ten fall inside, thinned as the x axis's are.
fn decade_ticks(range: &std::ops::Range<f64>) -> Vec<f64> {
    let (lo, hi) = (range.start.log10().floor() as i32, range.end.log10().ceil() as i32);
    let inside = |v: &f64| range.contains(v);
    let decades: Vec<f64> = (lo..=hi).map(|k| 10f64.powi(k)).filter(inside).collect();
    let ticks: Vec<f64> = if decades.len() >= 3 {
        decades
    } else {
        (lo..=hi).flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k))).filter(inside).collect()
    };
    let every = stride(ticks.len(), MAX_X_LABELS);
    ticks.into_iter().step_by(every).collect()
}

/// A y tick (1, 2 or 5 times a power of ten) as it reads best: 0.005, 20, 1e6.
fn format_tick(v: f64) -> String {
    let exponent = (v.abs().log10() + 1e-9).floor() as i32;
    if !(-4..6).contains(&exponent) {
        format!("{v:e}")
    } else {
        format!("{v:.*}", (-exponent).max(0) as usize)
    }
}

/// The pass axis of a bar chart: linear over [0, bars), bar i over [i, i + 1), ticks under the
/// middle of every bar or of every second, fourth, ... one. A coordinate of its own because
/// plotters' f64 axis, given key points, no longer takes a label formatter.
struct PassAxis {
    bars: usize,
}

impl Ranged for PassAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = value / self.bars.max(1) as f64;
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        (0..self.bars).step_by(stride(self.bars, MAX_BAR_LABELS)).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.bars.max(1) as f64
    }
}

/// Panels side by side, log-log, as SVG.
pub fn log_log_svg(panels: &[Panel<'_>]) -> Result<Vec<u8>, Failure> {
    let mut svg = String::new();
    {
        let width = 640 * panels.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (width, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let areas = root.split_evenly((1, panels.len()));
        for (panel, area) in panels.iter().zip(&areas) {
            let x = log_range(panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
            let y = log_range(panel.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
            let mut chart = ChartBuilder::on(area)
                .caption(panel.title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(
                    x.clone().log_scale().with_key_points(power_of_two_ticks(&x)),
                    y.clone().log_scale().with_key_points(decade_ticks(&y)),
                )
                .map_err(plot_error)?;
            // The ticks alone, with no minor grid: a log axis's own light lines, nine a decade,
            // ran together into a grey band.
            chart
                .configure_mesh()
                .x_desc(panel.x_label)
                .y_desc(panel.y_label)
                .x_label_formatter(&|v| format_count(*v))
                .y_label_formatter(&|v| format_tick(*v))
                .draw()
                .map_err(plot_error)?;
            for (i, series) in panel.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let style = ShapeStyle { color, filled: false, stroke_width: 2 };
                let points: Vec<(f64, f64)> =
                    series.points.iter().copied().filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite()).collect();
                if series.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(points.iter().copied(), 6, 4, style))
                        .map_err(plot_error)?
                        .label(series.label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                } else {
                    chart
                        .draw_series(LineSeries::new(points.iter().copied(), style))
                        .map_err(plot_error)?
                        .label(series.label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                    chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(plot_error)?;
                }
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg.into_bytes())
}

/// One bar per item, coloured by its category, with a legend of the categories.
pub fn bars_svg(title: &str, y_label: &str, bars: &[(String, f64)]) -> Result<Vec<u8>, Failure> {
    let mut categories: Vec<&str> = Vec::new();
    for (c, _) in bars {
        if !categories.contains(&c.as_str()) {
            categories.push(c);
        }
    }
    let top = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let mut svg = String::new();
    {
        // Wide enough for the bars and for the title (about 10 pixels a character at 20 points).
        let width = (200 + 14 * bars.len() as u32).max(40 + 10 * title.chars().count() as u32).clamp(640, 2400);
        let root = SVGBackend::with_string(&mut svg, (width, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(PassAxis { bars: bars.len() }, 0f64..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_max_light_lines(0)
            .x_desc("pass")
            .y_desc(y_label)
            .x_label_formatter(&|v| format!("{:.0}", v - 0.5))
            .draw()
            .map_err(plot_error)?;
        for (ci, category) in categories.iter().enumerate() {
            let color = Palette99::pick(ci).to_rgba();
            chart
                .draw_series(
                    bars.iter().enumerate().filter(|(_, (c, _))| c == category).map(|(i, (_, v))| {
                        Rectangle::new([(i as f64 + 0.1, 0.0), (i as f64 + 0.9, *v)], color.filled())
                    }),
                )
                .map_err(plot_error)?
                .label(*category)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg.into_bytes())
}

/// A count as a power of two where it is one (2^20), else as a number.
pub fn format_count(v: f64) -> String {
    let n = v.round() as u64;
    if n > 0 && n.is_power_of_two() && (v - n as f64).abs() < 1e-6 {
        format!("2^{}", n.trailing_zeros())
    } else if v >= 1e4 {
        format!("{v:.1e}")
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The x ticks' exponents over a sweep of 2^a..2^b, widened as `log_log_svg` widens it.
    fn exponents(a: i32, b: i32) -> Vec<i32> {
        let range = log_range([2f64.powi(a), 2f64.powi(b)].into_iter());
        power_of_two_ticks(&range).iter().map(|t| t.log2().round() as i32).collect()
    }

    #[test]
    fn every_sweep_gets_a_few_power_of_two_ticks_evenly_spaced() {
        for a in 0..=40 {
            for b in a..=40 {
                let e = exponents(a, b);
                assert!((1..=MAX_X_LABELS).contains(&e.len()), "2^{a}..2^{b}: {e:?}");
                assert!(e.windows(2).all(|w| w[1] - w[0] == e[1] - e[0]), "2^{a}..2^{b}: {e:?}");
                assert!(e.iter().all(|k| (a - 1..=b + 1).contains(k)), "2^{a}..2^{b}: {e:?}");
            }
        }
        assert_eq!(exponents(10, 14), [10, 11, 12, 13, 14]);
        assert_eq!(exponents(10, 24), [10, 12, 14, 16, 18, 20, 22, 24]);
        assert_eq!(exponents(0, 30), [0, 4, 8, 12, 16, 20, 24, 28]);
    }

    #[test]
    fn y_ticks_read_as_plain_numbers() {
        let labels = |lo: f64, hi: f64| {
            decade_ticks(&log_range([lo, hi].into_iter())).into_iter().map(format_tick).collect::<Vec<_>>()
        };
        assert_eq!(labels(0.03, 5.0), ["0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5"]);
        assert_eq!(labels(0.001, 100.0), ["0.001", "0.01", "0.1", "1", "10", "100"]);
        assert_eq!(labels(1e-6, 1e9).len(), 8);
    }

    #[test]
    fn a_sweep_from_2_to_2_30_labels_its_axis_in_powers_of_two() {
        let points: Vec<(f64, f64)> = (1..=30).map(|k| (2f64.powi(k), 1e-3 * 1.6f64.powi(k))).collect();
        let series = [Series { label: "u32 keys".to_owned(), points, dashed: false }];
        let panel = Panel { title: "time", x_label: "n", y_label: "ms", series: &series };
        let Ok(bytes) = log_log_svg(&[panel]) else { panic!("the plot was not drawn") };
        let svg = String::from_utf8(bytes).expect("UTF-8");
        // Each label: its x and its text.
        let labels: Vec<(f64, &str)> = svg
            .split("<text x=\"")
            .skip(1)
            .filter_map(|t| {
                let (x, rest) = t.split_once('"')?;
                Some((x.parse().ok()?, rest.split_once('>')?.1.split_once("</text>")?.0.trim()))
            })
            .filter(|(_, text)| text.starts_with("2^"))
            .collect();
        let texts: Vec<&str> = labels.iter().map(|l| l.1).collect();
        assert_eq!(texts, ["2^4", "2^8", "2^12", "2^16", "2^20", "2^24", "2^28"]);
        // Far enough apart for labels of 4 characters at the axis's font (10 pixels).
        assert!(labels.windows(2).all(|w| w[1].0 - w[0].0 > 40.0), "{labels:?}");
    }
}

//! Output files: written whole or not at all (a temporary file beside the target, renamed over it
//! once complete), and the SVG plots.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use plotters::prelude::*;

use crate::Failure;

/// An output file being written: a temporary file beside `path`, renamed over it by `persist`.
/// Created before long work starts, so that an unwritable path fails at once.
pub struct Staged {
    file: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Staged {
    /// Creates the temporary file for `path`.
    pub fn new(path: &Path) -> Result<Staged, Failure> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if path.is_dir() {
            return Err(Failure::Input(anyhow!("cannot write output {}: it is a directory", path.display())));
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix(".bitonic-vk-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Results, not secrets: the mode `File::create` gives (0666 less the umask), not the
            // owner-only 0600 of a temporary file.
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let file = builder
            .tempfile_in(dir)
            .map_err(|e| Failure::Input(anyhow!("cannot write output {}: {e}", path.display())))?;
        Ok(Staged { file, path: path.to_owned() })
    }

    /// Writes `bytes` and syncs them to disk.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.file
            .write_all(bytes)
            .and_then(|()| self.file.as_file().sync_all())
            .map_err(|e| Failure::Run(anyhow!("cannot write output {}: {e}", self.path.display())))
    }

    /// Renames the complete file over its target.
    pub fn persist(self) -> Result<(), Failure> {
        let path = self.path;
        self.file
            .persist(&path)
            .map_err(|e| Failure::Run(anyhow!("cannot write output {}: {}", path.display(), e.error)))?;
        Ok(())
    }

    /// Writes `bytes` and renames the file over its target.
    pub fn finish(mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.write(bytes)?;
        self.persist()
    }
}

/// Whether two output paths name one file: the same path once the directories' links are
/// resolved, or (where both exist) one file through a link, symbolic or hard.
pub fn same_file(a: &Path, b: &Path) -> bool {
    // A path that does not exist yet: its directory resolved, and its own name.
    let resolve = |p: &Path| {
        std::fs::canonicalize(p).ok().or_else(|| {
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
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// Staged files for an optional output path.
pub fn stage(path: Option<&PathBuf>) -> Result<Option<Staged>, Failure> {
    path.map(|p| Staged::new(p)).transpose()
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
                .build_cartesian_2d(x.log_scale(), y.log_scale())
                .map_err(plot_error)?;
            chart
                .configure_mesh()
                .x_desc(panel.x_label)
                .y_desc(panel.y_label)
                .x_label_formatter(&|v| format_count(*v))
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
        let width = (200 + 14 * bars.len() as u32).clamp(640, 2400);
        let root = SVGBackend::with_string(&mut svg, (width, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("pass")
            .y_desc(y_label)
            .x_label_formatter(&|v| format!("{v:.0}"))
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

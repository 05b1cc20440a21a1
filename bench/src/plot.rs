//! PNG plots of a run: grouped bar charts drawn with plotters' bitmap
//! backend; the text is rasterised with ab_glyph from the bundled DejaVu
//! Sans, so no system font is needed.

use std::path::Path;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters::prelude::*;

use crate::report::Results;
use crate::stats::Summary;
use crate::workload::Kind;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const W: u32 = 960;
const H: u32 = 520;
const LEFT: i32 = 90;
const RIGHT: i32 = 20;
const TOP: i32 = 70;
const BOTTOM: i32 = 70;
const PALETTE: [RGBColor; 4] = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xff, 0x7f, 0x0e), RGBColor(0x2c, 0xa0, 0x2c), RGBColor(0x94, 0x67, 0xbd)];

/// One bar: the median and, when known, the p10–p90 whisker.
#[derive(Clone, Copy)]
struct Bar {
    value: f64,
    whisker: Option<(f64, f64)>,
}

impl From<&Summary> for Bar {
    fn from(s: &Summary) -> Bar {
        Bar { value: s.median, whisker: Some((s.p10, s.p90)) }
    }
}

impl From<f64> for Bar {
    fn from(value: f64) -> Bar {
        Bar { value, whisker: None }
    }
}

struct Chart {
    title: String,
    unit: String,
    groups: Vec<String>,
    /// (name, one bar per group)
    series: Vec<(String, Vec<Bar>)>,
    goal: Option<(f64, String)>,
    log: bool,
}

struct Text<'a> {
    font: FontRef<'a>,
}

impl Text<'_> {
    fn width(&self, size: f32, s: &str) -> f32 {
        let f = self.font.as_scaled(PxScale::from(size));
        s.chars().map(|c| f.h_advance(f.glyph_id(c))).sum()
    }

    /// Draws `s` with its top-left at (x, y) into an RGB buffer.
    fn draw(&self, buf: &mut [u8], x: f32, y: f32, size: f32, s: &str, color: RGBColor) {
        let f = self.font.as_scaled(PxScale::from(size));
        let mut pen = x;
        for c in s.chars() {
            let id = f.glyph_id(c);
            let glyph = id.with_scale_and_position(PxScale::from(size), point(pen, y + f.ascent()));
            pen += f.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else { continue };
            let b = outline.px_bounds();
            outline.draw(|gx, gy, cov| {
                let (px, py) = (b.min.x as i32 + gx as i32, b.min.y as i32 + gy as i32);
                if px < 0 || py < 0 || px >= W as i32 || py >= H as i32 {
                    return;
                }
                let i = (py as usize * W as usize + px as usize) * 3;
                for (k, ch) in [color.0, color.1, color.2].into_iter().enumerate() {
                    buf[i + k] = (buf[i + k] as f32 * (1.0 - cov) + ch as f32 * cov) as u8;
                }
            });
        }
    }

    fn centered(&self, buf: &mut [u8], cx: f32, y: f32, size: f32, s: &str, color: RGBColor) {
        self.draw(buf, cx - self.width(size, s) / 2.0, y, size, s, color);
    }
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    fn render(&self, path: &Path) -> anyhow::Result<()> {
        let mut buf = vec![255u8; (W * H * 3) as usize];
        let values = self.series.iter().flat_map(|(_, bars)| bars.iter().flat_map(|b| [Some(b.value), b.whisker.map(|w| w.1)]).flatten());
        let max = values.chain(self.goal.as_ref().map(|g| g.0)).fold(0.0f64, f64::max).max(1e-9) * 1.15;
        let min_log = self.series.iter().flat_map(|(_, b)| b.iter().map(|b| b.value)).filter(|v| *v > 0.0).fold(f64::MAX, f64::min).max(1e-3);
        // Linear axes end on a round step (1, 2 or 5 × 10^k) so ticks read well.
        let step = {
            let raw = max / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(raw)
        };
        let (lo, hi) = if self.log { ((min_log / 2.0).log10().floor(), max.log10().ceil()) } else { (0.0, (max / step).ceil() * step) };
        let plot_h = (H as i32 - TOP - BOTTOM) as f64;
        let y_of = |v: f64| -> i32 {
            let t = if self.log { (v.max(10f64.powf(lo)).log10() - lo) / (hi - lo) } else { v / hi };
            H as i32 - BOTTOM - (t * plot_h) as i32
        };
        let plot_w = W as i32 - LEFT - RIGHT;
        let group_w = plot_w / self.groups.len().max(1) as i32;
        let bar_w = (group_w * 8 / 10) / self.series.len().max(1) as i32;
        let ticks: Vec<f64> = if self.log {
            (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect()
        } else {
            (0..=(hi / step).round() as i32).map(|i| step * i as f64).collect()
        };
        let mut labels: Vec<(f32, f32, f32, String, RGBColor, bool)> = Vec::new();
        {
            let root = BitMapBackend::with_buffer(&mut buf, (W, H)).into_drawing_area();
            let grey = RGBColor(0xdd, 0xdd, 0xdd);
            for t in &ticks {
                let y = y_of(*t);
                root.draw(&PathElement::new(vec![(LEFT, y), (W as i32 - RIGHT, y)], grey))?;
                labels.push((LEFT as f32 - 8.0, y as f32 - 8.0, 13.0, fmt(*t), BLACK, false));
            }
            root.draw(&PathElement::new(vec![(LEFT, TOP), (LEFT, H as i32 - BOTTOM), (W as i32 - RIGHT, H as i32 - BOTTOM)], BLACK))?;
            for (g, name) in self.groups.iter().enumerate() {
                let gx = LEFT + g as i32 * group_w + group_w / 10;
                for (s, (_, bars)) in self.series.iter().enumerate() {
                    let Some(bar) = bars.get(g) else { continue };
                    let x0 = gx + s as i32 * bar_w;
                    let color = PALETTE[s % PALETTE.len()];
                    root.draw(&Rectangle::new([(x0 + 2, y_of(bar.value)), (x0 + bar_w - 2, H as i32 - BOTTOM)], color.filled()))?;
                    if let Some((p10, p90)) = bar.whisker {
                        let cx = x0 + bar_w / 2;
                        root.draw(&PathElement::new(vec![(cx, y_of(p10)), (cx, y_of(p90))], BLACK.stroke_width(2)))?;
                        root.draw(&PathElement::new(vec![(cx - 5, y_of(p90)), (cx + 5, y_of(p90))], BLACK.stroke_width(2)))?;
                        root.draw(&PathElement::new(vec![(cx - 5, y_of(p10)), (cx + 5, y_of(p10))], BLACK.stroke_width(2)))?;
                    }
                    let top = bar.whisker.map_or(bar.value, |w| w.1.max(bar.value));
                    labels.push(((x0 + bar_w / 2) as f32, y_of(top) as f32 - 17.0, 12.0, fmt(bar.value), BLACK, true));
                }
                labels.push(((LEFT + g as i32 * group_w + group_w / 2) as f32, (H as i32 - BOTTOM + 8) as f32, 14.0, name.clone(), BLACK, true));
            }
            if let Some((goal, label)) = &self.goal {
                let y = y_of(*goal);
                root.draw(&PathElement::new(vec![(LEFT, y), (W as i32 - RIGHT, y)], RED.stroke_width(2)))?;
                labels.push(((W as i32 - RIGHT) as f32 - 6.0, y as f32 - 18.0, 13.0, label.clone(), RED, false));
            }
            root.present()?;
        }
        let text = Text { font: FontRef::try_from_slice(FONT)? };
        text.centered(&mut buf, W as f32 / 2.0, 10.0, 20.0, &self.title, BLACK);
        text.draw(&mut buf, 10.0, (TOP - 24) as f32, 14.0, &self.unit, BLACK);
        for (x, y, size, s, color, centered) in labels {
            if centered {
                text.centered(&mut buf, x, y, size, &s, color);
            } else {
                // Right-aligned at x.
                text.draw(&mut buf, x - text.width(size, &s), y, size, &s, color);
            }
        }
        // Legend, left to right under the title.
        let mut x = LEFT as f32 + 10.0;
        for (s, (name, _)) in self.series.iter().enumerate() {
            let c = PALETTE[s % PALETTE.len()];
            for dy in 0..12 {
                for dx in 0..12 {
                    let i = (((40 + dy) * W as usize) + x as usize + dx) * 3;
                    buf[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
                }
            }
            text.draw(&mut buf, x + 16.0, 37.0, 13.0, name, BLACK);
            x += 16.0 + text.width(13.0, name) + 24.0;
        }
        let file = std::fs::File::create(path)?;
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), W, H);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header()?.write_image_data(&buf)?;
        Ok(())
    }
}

/// Renders every plot the results allow into `dir`; returns (file, alt text).
pub fn all(r: &Results, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    std::fs::create_dir_all(dir)?;
    let mut charts: Vec<(&str, Chart)> = Vec::new();
    if !r.reconcile.is_empty() {
        let sizes: Vec<usize> = crate::reconcile::SIZES.to_vec();
        let groups: Vec<String> = sizes.iter().map(|n| format!("{n} children")).collect();
        let of = |kind: Kind, f: &dyn Fn(&crate::reconcile::Row) -> Bar| -> Vec<Bar> {
            sizes.iter().filter_map(|n| r.reconcile.iter().find(|x| x.kind == kind && x.children == *n)).map(f).collect()
        };
        charts.push((
            "reconcile-ratio.png",
            Chart {
                title: "One reconcile: Wasm time / native time, native with the same or an ordinary build (lower is better)".into(),
                unit: "ratio (×)".into(),
                groups: groups.clone(),
                series: Kind::ALL
                    .iter()
                    .flat_map(|k| {
                        [
                            (format!("{} (same build)", k.plugin()), of(*k, &|x| x.ratio().into())),
                            (format!("{} (ordinary build)", k.plugin()), of(*k, &|x| x.ratio_default().into())),
                        ]
                    })
                    .collect(),
                goal: Some((1.3, "goal ≤ 1.3× at 10 children".into())),
                log: false,
            },
        ));
        charts.push((
            "reconcile-latency.png",
            Chart {
                title: "One reconcile: median latency, p10–p90 whiskers (log scale)".into(),
                unit: "µs".into(),
                groups,
                series: Kind::ALL
                    .iter()
                    .flat_map(|k| {
                        [
                            (format!("{} Wasm", k.plugin()), of(*k, &|x| (&x.wasm).into())),
                            (format!("{} native", k.plugin()), of(*k, &|x| (&x.native).into())),
                        ]
                    })
                    .collect(),
                goal: None,
                log: true,
            },
        ));
    }
    if !r.hook.is_empty() {
        charts.push((
            "hook.png",
            Chart {
                title: "Wasm call vs the same logic behind a loopback HTTP hook".into(),
                unit: "µs per call".into(),
                groups: r.hook.iter().map(|x| format!("{} {} {}", x.kind.plugin(), x.children, x.kind.child())).collect(),
                series: vec![
                    ("Wasm (fresh instance)".into(), r.hook.iter().map(|x| (&x.wasm).into()).collect()),
                    ("HTTP hook (keep-alive)".into(), r.hook.iter().map(|x| (&x.hook).into()).collect()),
                ],
                goal: None,
                log: false,
            },
        ));
    }
    if !r.e2e.is_empty() {
        charts.push((
            "e2e.png",
            Chart {
                title: "End to end over HTTP: host start → goal".into(),
                unit: "ms".into(),
                groups: r
                    .e2e
                    .iter()
                    .map(|x| match x.kind {
                        Kind::CronJob => format!("{} CronJobs → Jobs", x.count),
                        Kind::MyDeployment => format!("{} MyDeployments → Pods Ready", x.count),
                    })
                    .collect(),
                series: vec![
                    ("Wasm".into(), r.e2e.iter().map(|x| (&x.wasm).into()).collect()),
                    ("native in-host".into(), r.e2e.iter().map(|x| (&x.native).into()).collect()),
                ],
                goal: None,
                log: false,
            },
        ));
    }
    if let Some(m) = &r.memory {
        let mut groups: Vec<String> = m.idle.iter().map(|(n, _)| format!("{n} objects")).collect();
        groups
            .extend(m.per_plugin.iter().map(|(l, _)| l.replace("hello+cronjob+mydeployment", "+mydeployment").replace("hello+cronjob", "+cronjob")));
        let bars: Vec<Bar> = m.idle.iter().map(|(_, v)| (*v).into()).chain(m.per_plugin.iter().map(|(_, v)| (*v).into())).collect();
        charts.push((
            "memory.png",
            Chart {
                title: "host run RSS, idle (cached objects with both plugins; plugins one by one)".into(),
                unit: "MiB".into(),
                groups,
                series: vec![("VmRSS".into(), bars)],
                goal: Some((150.0, "goal < 150 MiB with 100k objects".into())),
                log: false,
            },
        ));
        if let Some(t) = &m.ten {
            charts.push((
                "ten-controllers.png",
                Chart {
                    title: "Ten controllers: one host with ten plugins vs ten hosts with one each (idle RSS)".into(),
                    unit: "MiB".into(),
                    groups: vec!["one host, ten plugins".into(), "ten hosts, one plugin each (sum)".into()],
                    series: vec![("VmRSS".into(), vec![t.one_host.into(), t.ten_hosts_total().into()])],
                    goal: Some((0.2 * t.ten_hosts_total(), "goal: one host ≤ 20% of the ten".into())),
                    log: false,
                },
            ));
        }
    }
    if let Some(s) = &r.startup {
        charts.push((
            "startup.png",
            Chart {
                title: "Hot swap and cold start".into(),
                unit: "ms".into(),
                groups: vec!["hot swap".into(), "cold start, cache".into(), "cold start, no cache".into()],
                series: vec![("median, p10–p90".into(), vec![(&s.hot_swap).into(), (&s.cold_cached).into(), (&s.cold_uncached).into()])],
                goal: None,
                log: false,
            },
        ));
    }
    let mut written = Vec::new();
    for (file, chart) in charts {
        chart.render(&dir.join(file))?;
        written.push((file.to_string(), chart.title.clone()));
    }
    Ok(written)
}

/// Workload 1 of the head-to-head: seconds from the due instant (p50, p99,
/// last Job) per contestant, medians over the rounds; returns (file, alt text).
pub fn head_to_head_cronjobs(rows: &[crate::head_to_head::report::Row], count: usize, dir: &Path) -> anyhow::Result<(String, String)> {
    std::fs::create_dir_all(dir)?;
    let pick = |f: fn(&crate::head_to_head::report::Row) -> f64| rows.iter().map(|r| Bar::from(f(r))).collect::<Vec<_>>();
    let chart = Chart {
        title: format!("Head to head: {count} CronJobs due at once, real kube-apiserver"),
        unit: "seconds from the due instant (lower is better)".into(),
        groups: rows.iter().map(|r| r.contestant.short().to_string()).collect(),
        series: vec![("p50 Job".into(), pick(|r| r.p50)), ("p99 Job".into(), pick(|r| r.p99)), ("all Jobs".into(), pick(|r| r.wall))],
        goal: None,
        log: false,
    };
    let file = "cronjobs.png".to_string();
    chart.render(&dir.join(&file))?;
    Ok((file, format!("Seconds from the due instant until the Jobs of {count} CronJobs exist, per contestant")))
}

/// Workload 2 of the head to head: idle VmRSS and PSS of each configuration.
pub fn head_to_head_idle(idle: &crate::head_to_head::idle::Idle, dir: &Path) -> anyhow::Result<(String, String)> {
    std::fs::create_dir_all(dir)?;
    let sides = [idle.host_one, idle.manager_one, idle.host_ten, idle.managers_ten];
    let chart = Chart {
        title: format!("Head to head: idle memory, {} CronJobs + Jobs cached", idle.cronjobs),
        unit: "MiB (lower is better)".into(),
        groups: vec!["host, 1 plugin".into(), "1 c-r manager".into(), "host, 10 plugins".into(), "10 c-r managers".into()],
        series: vec![
            ("VmRSS".into(), sides.iter().map(|m| Bar::from(m.rss_mib)).collect()),
            ("PSS".into(), sides.iter().map(|m| Bar::from(m.pss_mib)).collect()),
        ],
        goal: None,
        log: false,
    };
    let file = "idle.png".to_string();
    chart.render(&dir.join(&file))?;
    Ok((file, format!("Idle memory with {} CronJobs and their Jobs cached", idle.cronjobs)))
}

/// Workload 3 of the head to head: seconds to roll, per run.
pub fn head_to_head_rollout(runs: &[crate::head_to_head::rollout::Rollout], parents: usize, dir: &Path) -> anyhow::Result<(String, String)> {
    std::fs::create_dir_all(dir)?;
    let chart = Chart {
        title: format!("Head to head: {parents} parents × 10 replicas rolled to a new image"),
        unit: "seconds (lower is better)".into(),
        groups: runs.iter().map(|r| format!("{} r{}", r.side.short(), r.round)).collect(),
        series: vec![
            ("first rollout".into(), runs.iter().map(|r| Bar::from(r.create_s)).collect()),
            ("new image".into(), runs.iter().map(|r| Bar::from(r.roll_s)).collect()),
        ],
        goal: None,
        log: false,
    };
    let file = "rollout.png".to_string();
    chart.render(&dir.join(&file))?;
    Ok((file, format!("Seconds until {parents} parents of 10 replicas are rolled")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_renders_to_a_png_with_its_text_and_bars() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.png");
        let chart = Chart {
            title: "Title".into(),
            unit: "ms".into(),
            groups: vec!["a".into(), "b".into()],
            series: vec![("one".into(), vec![1.0.into(), 2.0.into()])],
            goal: Some((1.5, "goal".into())),
            log: false,
        };
        chart.render(&path).unwrap();
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (W, H));
        // The title row has dark (text) pixels; the plot has the bar colour.
        let dark_in_title = buf[..(30 * W as usize * 3)].chunks(3).any(|p| p.iter().all(|c| *c < 100));
        assert!(dark_in_title, "no text drawn in the title row");
        let bar = PALETTE[0];
        assert!(buf.chunks(3).any(|p| p == [bar.0, bar.1, bar.2]), "no bar drawn");
    }
}

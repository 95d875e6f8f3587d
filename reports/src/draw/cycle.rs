//! A dependency cycle as an SVG drawing: its operations as nodes on a circle, in cycle order
//! clockwise from the top, and each step as a curved arrow to the next node, coloured and
//! dashed by its kind (ww, wr, rw) and labelled with its key and the values and offsets it
//! rests on. Plain SVG text written here (no plotters, no fonts: text names a generic family
//! and the browser picks the font), with a `<title>` tooltip on every node and arrow and a
//! link from every node to the operation's history line.
//!
//! Arrows bend to the left of their direction of travel, which on a clockwise circle is
//! outwards: the arrows of a two-node cycle (there and back) bend apart instead of lying on
//! top of each other. The drawing's size follows its content (nodes and labels), so a cycle
//! of two is small and one of sixteen stays readable.

use crate::draw::chart::{svg_hex, Rgb, BLUE, GREEN, ORANGE};
use crate::html::esc;
use std::f64::consts::PI;
use std::fmt::Write;

/// Nodes drawn at most; a longer cycle is shown by its table alone.
pub const CYCLE_NODES_DRAWN_MAX: usize = 16;

/// Radius of a node, px.
const NODE_R: f64 = 30.0;
/// Space along the circle per node, px: sets the circle's radius.
const ARC_PER_NODE: f64 = 190.0;
/// Smallest circle radius, px.
const RADIUS_MIN: f64 = 110.0;
/// Average width of a character of the labels (12 px sans-serif), px, to size the drawing.
const CHAR_W: f64 = 6.8;

/// The kind of a dependency edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// Write-write: the next record of a key after the first op's.
    Ww,
    /// Write-read: the second op read the first op's record.
    Wr,
    /// Read-write: the first op's last read of a key came just before the second op's record.
    Rw,
}

impl EdgeKind {
    /// The kind by its name in the checker's examples.
    pub fn parse(name: &str) -> Option<EdgeKind> {
        match name {
            "ww" => Some(EdgeKind::Ww),
            "wr" => Some(EdgeKind::Wr),
            "rw" => Some(EdgeKind::Rw),
            _ => None,
        }
    }

    /// Its name, as in the examples.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
        }
    }

    /// Its colour (Okabe-Ito; vermillion stays for losses).
    pub fn rgb(self) -> Rgb {
        match self {
            EdgeKind::Ww => BLUE,
            EdgeKind::Wr => GREEN,
            EdgeKind::Rw => ORANGE,
        }
    }

    /// Its dash pattern: anti-dependencies (rw) dashed, as Adya draws them.
    pub fn dash(self) -> &'static str {
        match self {
            EdgeKind::Rw => "8 4",
            _ => "",
        }
    }
}

/// A node: one operation of the cycle.
#[derive(Debug, Clone)]
pub struct CycleNode {
    /// First line, bold ("op 23").
    pub label: String,
    /// Second line, small ("txn ok · p3").
    pub sublabel: String,
    /// Outline colour (the op's outcome).
    pub rgb: Rgb,
    /// In-page link (`#op-23`), when the page lists the op.
    pub href: Option<String>,
    /// Tooltip.
    pub title: String,
}

/// An arrow from node `i` to node `i + 1` (the last one back to the first).
#[derive(Debug, Clone)]
pub struct CycleEdge {
    /// Its kind.
    pub kind: EdgeKind,
    /// The key it is about.
    pub key: String,
    /// Values and offsets, short ("1@0 → 3@1").
    pub detail: String,
    /// Tooltip.
    pub title: String,
}

type P = (f64, f64);

fn add(a: P, b: P) -> P {
    (a.0 + b.0, a.1 + b.1)
}

fn scale(a: P, k: f64) -> P {
    (a.0 * k, a.1 * k)
}

fn unit(from: P, to: P) -> P {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let len = dx.hypot(dy).max(1e-9);
    (dx / len, dy / len)
}

/// Bounds of what is drawn: (min x, min y, max x, max y).
struct Bounds(f64, f64, f64, f64);

impl Bounds {
    fn take(&mut self, (x, y): P) {
        self.0 = self.0.min(x);
        self.1 = self.1.min(y);
        self.2 = self.2.max(x);
        self.3 = self.3.max(y);
    }
}

/// Draws the cycle `nodes[0] -> nodes[1] -> ... -> nodes[0]`, `edges[i]` leaving
/// `nodes[i]`, as an SVG element with the id `id`. `None` when there is nothing to draw
/// (fewer than two nodes, a count mismatch, or more than [`CYCLE_NODES_DRAWN_MAX`] nodes).
pub fn draw_cycle(
    id: &str,
    label: &str,
    nodes: &[CycleNode],
    edges: &[CycleEdge],
) -> Option<String> {
    let n = nodes.len();
    if n < 2 || edges.len() != n || n > CYCLE_NODES_DRAWN_MAX {
        return None;
    }
    let radius = (ARC_PER_NODE * n as f64 / (2.0 * PI)).max(RADIUS_MIN);
    // Two nodes side by side; more from the top, clockwise (y grows downwards).
    let start = if n == 2 { PI } else { -PI / 2.0 };
    let centres: Vec<P> = (0..n)
        .map(|i| {
            let a = start + 2.0 * PI * i as f64 / n as f64;
            (radius * a.cos(), radius * a.sin())
        })
        .collect();
    let bulge = if n == 2 { 0.35 } else { 0.18 };
    let mut bounds = Bounds(f64::MAX, f64::MAX, f64::MIN, f64::MIN);
    let mut arrows = String::new();
    let mut labels = String::new();
    for (i, edge) in edges.iter().enumerate() {
        let (a, b) = (centres[i], centres[(i + 1) % n]);
        let chord = (b.0 - a.0).hypot(b.1 - a.1);
        let dir = unit(a, b);
        // Left of the direction of travel: outwards on a clockwise circle.
        let normal = (dir.1, -dir.0);
        let mid = scale(add(a, b), 0.5);
        let control = add(mid, scale(normal, bulge * chord));
        let from = add(a, scale(unit(a, control), NODE_R + 1.0));
        let to = add(b, scale(unit(b, control), NODE_R + 4.0));
        let rgb = svg_hex(edge.kind.rgb());
        let dash = match edge.kind.dash() {
            "" => String::new(),
            d => format!(" stroke-dasharray=\"{d}\""),
        };
        let _ = write!(
            arrows,
            "<path d=\"M{:.1} {:.1}Q{:.1} {:.1} {:.1} {:.1}\" fill=\"none\" stroke=\"{rgb}\" \
             stroke-width=\"2.5\"{dash} marker-end=\"url(#{id}-arrow-{})\"><title>{}</title></path>",
            from.0,
            from.1,
            control.0,
            control.1,
            to.0,
            to.1,
            edge.kind.as_str(),
            esc(&edge.title)
        );
        // The curve's midpoint, then a little further out for the label.
        let apex = add(mid, scale(normal, bulge * chord / 2.0));
        let at = add(apex, scale(normal, 14.0));
        let anchor = if normal.0 > 0.35 {
            "start"
        } else if normal.0 < -0.35 {
            "end"
        } else {
            "middle"
        };
        // Above the apex when the label lies above the curve, below it otherwise.
        let (y1, y2) = if normal.1 < -0.35 {
            (at.1 - 14.0, at.1)
        } else if normal.1 > 0.35 {
            (at.1 + 6.0, at.1 + 20.0)
        } else {
            (at.1 - 4.0, at.1 + 10.0)
        };
        let head = format!("{} {}", edge.kind.as_str(), edge.key);
        let _ = write!(
            labels,
            "<text x=\"{:.1}\" y=\"{y1:.1}\" text-anchor=\"{anchor}\" font-family=\"sans-serif\" \
             font-size=\"13\" font-weight=\"bold\" fill=\"{rgb}\">{}<title>{}</title></text>\
             <text x=\"{:.1}\" y=\"{y2:.1}\" text-anchor=\"{anchor}\" font-family=\"sans-serif\" \
             font-size=\"12\" fill=\"#333\">{}</text>",
            at.0,
            esc(&head),
            esc(&edge.title),
            at.0,
            esc(&edge.detail)
        );
        let width = CHAR_W * head.chars().count().max(edge.detail.chars().count()) as f64;
        let (left, right) = match anchor {
            "start" => (at.0, at.0 + width),
            "end" => (at.0 - width, at.0),
            _ => (at.0 - width / 2.0, at.0 + width / 2.0),
        };
        bounds.take((left, y1 - 14.0));
        bounds.take((right, y2 + 4.0));
        bounds.take(control);
    }
    let mut circles = String::new();
    for (node, &(x, y)) in nodes.iter().zip(&centres) {
        bounds.take((x - NODE_R, y - NODE_R));
        bounds.take((x + NODE_R, y + NODE_R));
        let shape = format!(
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{NODE_R}\" fill=\"#fff\" stroke=\"{}\" \
             stroke-width=\"3\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
             font-family=\"sans-serif\" font-size=\"13\" font-weight=\"bold\" fill=\"#222\">{}</text>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-family=\"sans-serif\" \
             font-size=\"10\" fill=\"#555\">{}</text><title>{}</title>",
            svg_hex(node.rgb),
            y - 1.0,
            esc(&node.label),
            y + 12.0,
            esc(&node.sublabel),
            esc(&node.title)
        );
        match &node.href {
            Some(href) => {
                let _ = write!(circles, "<a href=\"{}\">{shape}</a>", esc(href));
            }
            None => {
                let _ = write!(circles, "<g>{shape}</g>");
            }
        }
    }
    let pad = 10.0;
    let (x0, y0) = (bounds.0 - pad, bounds.1 - pad);
    let (w, h) = (
        bounds.2 - bounds.0 + 2.0 * pad,
        bounds.3 - bounds.1 + 2.0 * pad,
    );
    let mut markers = String::new();
    for kind in [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw] {
        let _ = write!(
            markers,
            "<marker id=\"{id}-arrow-{}\" viewBox=\"0 0 10 10\" refX=\"8\" refY=\"5\" \
             markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
             <path d=\"M0 0L10 5L0 10z\" fill=\"{}\"/></marker>",
            kind.as_str(),
            svg_hex(kind.rgb())
        );
    }
    Some(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" class=\"cycle\" width=\"{w:.0}\" \
         height=\"{h:.0}\" viewBox=\"{x0:.1} {y0:.1} {w:.1} {h:.1}\" role=\"img\" \
         aria-label=\"{}\"><defs>{markers}</defs>{arrows}{circles}{labels}</svg>",
        esc(label)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u64) -> CycleNode {
        CycleNode {
            label: format!("op {i}"),
            sublabel: "txn ok".into(),
            rgb: BLUE,
            href: Some(format!("#op-{i}")),
            title: format!("op {i}"),
        }
    }

    fn edge(kind: EdgeKind, key: &str) -> CycleEdge {
        CycleEdge {
            kind,
            key: key.into(),
            detail: "1@0 → 3@1".into(),
            title: "why".into(),
        }
    }

    #[test]
    fn a_cycle_of_two_has_two_linked_nodes_and_two_arrows_that_bend_apart() {
        let svg = draw_cycle(
            "c",
            "G0",
            &[node(5), node(6)],
            &[edge(EdgeKind::Ww, "t0/0"), edge(EdgeKind::Rw, "t0/1")],
        )
        .unwrap();
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("<a href=\"#op-5\">") && svg.contains("<a href=\"#op-6\">"));
        assert_eq!(svg.matches("marker-end=").count(), 2);
        assert!(svg.contains("url(#c-arrow-ww)") && svg.contains("url(#c-arrow-rw)"));
        assert!(svg.contains("stroke-dasharray=\"8 4\""), "rw is dashed");
        assert!(svg.contains(">ww t0/0<") && svg.contains(">rw t0/1<"));
        // The two arrows' control points lie on opposite sides of the line between the nodes.
        let controls: Vec<f64> = svg
            .split("Q")
            .skip(1)
            .map(|rest| rest.split(' ').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(controls.len(), 2);
        assert!(controls[0] * controls[1] < 0.0, "{controls:?}");
    }

    #[test]
    fn too_short_too_long_or_mismatched_cycles_are_not_drawn() {
        let e = edge(EdgeKind::Wr, "k");
        assert!(draw_cycle("c", "x", &[node(1)], std::slice::from_ref(&e)).is_none());
        assert!(draw_cycle("c", "x", &[node(1), node(2)], std::slice::from_ref(&e)).is_none());
        let nodes: Vec<CycleNode> = (0..=CYCLE_NODES_DRAWN_MAX as u64).map(node).collect();
        let edges = vec![e; nodes.len()];
        assert!(draw_cycle("c", "x", &nodes, &edges).is_none());
        assert!(draw_cycle("c", "x", &nodes[1..], &edges[1..]).is_some());
    }
}

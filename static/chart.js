// @ts-check
/**
 * A small live area chart in SVG: one series of events per second over a fixed window (the
 * broker keeps 5 minutes of 5-second points). The SVG stretches to its box; strokes keep
 * their width, and the figures are HTML beside it so they stay crisp and readable.
 */

import { rate } from "./format.js";
import { h, setText, svg } from "./ui.js";

const W = 300;
const H = 60;

/** @typedef {{ t: number, v: number }} Point */

export class RateChart {
  /**
   * @param {string} label what is counted, e.g. "Published"
   * @param {string} tone a CSS class choosing the colour
   * @param {number} [windowMs]
   */
  constructor(label, tone, windowMs = 300_000) {
    this.label = label;
    this.windowMs = windowMs;
    this.area = svg("path", { class: "area" });
    this.line = svg("path", { class: "line", "vector-effect": "non-scaling-stroke" });
    this.plot = svg("svg", {
      viewBox: `0 0 ${W} ${H}`,
      preserveAspectRatio: "none",
      role: "img",
      class: "plot",
    });
    this.plot.append(
      svg("line", {
        x1: 0,
        x2: W,
        y1: H - 0.5,
        y2: H - 0.5,
        class: "base",
        "vector-effect": "non-scaling-stroke",
      }),
      this.area,
      this.line,
    );
    this.now = h("span", { class: "now" }, "–");
    this.peak = h("span", { class: "peak" }, "");
    this.el = h(
      "figure",
      { class: `chart ${tone}` },
      h("figcaption", {}, h("span", { class: "label" }, `${label} /s`), this.now),
      this.plot,
      h(
        "div",
        { class: "axis" },
        h("span", {}, `${Math.round(windowMs / 60000)} min ago`),
        this.peak,
        h("span", {}, "now"),
      ),
    );
    this.update([]);
  }

  /**
   * Draws the points (oldest first) that fall in the window ending at the newest one.
   * @param {Point[]} points
   */
  update(points) {
    const end = points.length ? points[points.length - 1].t : Date.now();
    const start = end - this.windowMs;
    const shown = points.filter((p) => p.t >= start);
    const max = Math.max(1, ...shown.map((p) => p.v));
    const top = niceCeil(max);
    const x = (/** @type {number} */ t) => ((t - start) / this.windowMs) * W;
    const y = (/** @type {number} */ v) => H - (v / top) * (H - 2);
    if (shown.length >= 2) {
      const line = shown.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`)
        .join("");
      this.line.setAttribute("d", line);
      this.area.setAttribute(
        "d",
        `${line}L${x(end).toFixed(1)},${H}L${x(shown[0].t).toFixed(1)},${H}Z`,
      );
    } else {
      this.line.setAttribute("d", "");
      this.area.setAttribute("d", "");
    }
    const last = shown.length ? shown[shown.length - 1].v : undefined;
    const peak = shown.length ? Math.max(...shown.map((p) => p.v)) : undefined;
    setText(this.now, rate(last));
    setText(this.peak, peak === undefined ? "no data yet" : `peak ${rate(peak)}`);
    this.plot.setAttribute(
      "aria-label",
      shown.length
        ? `${this.label} per second over the last ${
          Math.round(this.windowMs / 60000)
        } minutes: now ${rate(last)}, peak ${rate(peak)}`
        : `${this.label} per second: no data yet (the broker samples every 5 seconds)`,
    );
  }
}

/** The next 1, 2 or 5 × 10ⁿ at or above `v`. @param {number} v */
function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * The points of one field of /api/rates's points, as chart points.
 * @param {Array<Record<string, number | string>>} points
 * @param {string} field
 * @returns {Point[]}
 */
export function series(points, field) {
  return points.map((p) => ({ t: new Date(p.time).getTime(), v: Number(p[field]) || 0 }));
}

// Simulated against real, one point per kernel and config, on log axes with the same range,
// as Accel-Sim's correlation plots draw it: the line y = x, a band for ±10 %, the spread of
// the hardware repetitions as horizontal error bars. Hover or tap a point for its kernel
// and numbers; ←/→ steps through the points.

import { cssVar } from "./palette.js";
import { axis as drawAxis, axisTitles, canvasPlot, legend, logDomain, nearest, scale } from "./plot.js";
import { h } from "./dom.js";

const PAD = { left: 64, right: 14, top: 14, bottom: 40 };
const BAND = 0.1;

/**
 * { id, label, axis(v) -> text, xTitle, yTitle, tip(point) -> [title, pairs] }
 * setData({ series: [{ name, color }], points: [{ series, real, sim, lo?, hi?, ...anything tip reads }] })
 */
export function scatterPlot({ id, label, axis, xTitle, yTitle, tip }) {
  let data = { series: [], points: [] };
  const keyBox = h("div", {});
  const plot = canvasPlot({ id, label, height: (width) => Math.min(width, 460), draw });

  function draw(ctx, width, tall, focus) {
    if (!data.points.length) return null;
    const side = Math.min(width - PAD.left - PAD.right, tall - PAD.top - PAD.bottom);
    // The square in the middle of a wide box rather than against its left edge.
    const left = PAD.left + Math.max(0, (width - PAD.left - PAD.right - side) / 2);
    const dom = logDomain(data.points.flatMap((p) => [p.real, p.sim, p.lo ?? p.real, p.hi ?? p.real]));
    const x = scale("log", dom, [left, left + side]);
    const y = scale("log", dom, [PAD.top + side, PAD.top]);
    const [lo, hi] = dom;
    drawAxis(ctx, x, "x", PAD.top, PAD.top + side, axis);
    drawAxis(ctx, y, "y", left, left + side, axis);
    axisTitles(ctx, { x: xTitle, y: yTitle }, { left, right: left + side, top: PAD.top, bottom: PAD.top + side, yTitleAt: left - PAD.left + 4 });

    ctx.save();
    ctx.beginPath();
    ctx.rect(left, PAD.top, side, side);
    ctx.clip();
    ctx.fillStyle = cssVar("--ok-bg");
    ctx.beginPath();
    ctx.moveTo(x(lo), y(lo * (1 + BAND)));
    ctx.lineTo(x(hi), y(hi * (1 + BAND)));
    ctx.lineTo(x(hi), y(hi * (1 - BAND)));
    ctx.lineTo(x(lo), y(lo * (1 - BAND)));
    ctx.closePath();
    ctx.fill();
    ctx.strokeStyle = cssVar("--muted");
    ctx.setLineDash([5, 4]);
    ctx.beginPath();
    ctx.moveTo(x(lo), y(lo));
    ctx.lineTo(x(hi), y(hi));
    ctx.stroke();
    ctx.setLineDash([]);
    const at = data.points.map((p) => [x(p.real), y(p.sim)]);
    const radius = data.points.length > 500 ? 2.5 : 4;
    data.points.forEach((p, i) => {
      const color = data.series[p.series].color;
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      if (p.lo !== undefined && p.hi !== undefined) {
        ctx.beginPath();
        ctx.moveTo(x(p.lo), at[i][1]);
        ctx.lineTo(x(p.hi), at[i][1]);
        ctx.stroke();
      }
      ctx.beginPath();
      ctx.arc(at[i][0], at[i][1], i === focus ? radius + 2.5 : radius, 0, 2 * Math.PI);
      ctx.globalAlpha = 0.85;
      ctx.fill();
      ctx.globalAlpha = 1;
    });
    if (focus !== null) {
      ctx.strokeStyle = cssVar("--text");
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.arc(at[focus][0], at[focus][1], radius + 3.5, 0, 2 * Math.PI);
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    ctx.restore();
    return {
      count: data.points.length,
      hit: (px, py) => nearest(at, px, py, 12),
      at: (i) => at[i],
      tip: (i) => tip(data.points[i]),
      geometry: { left, top: PAD.top, side, domain: dom },
    };
  }

  return {
    el: h("div", { class: "chart-wrap square" }, plot.el, keyBox),
    canvas: plot.canvas,
    setData(next) {
      data = next;
      keyBox.replaceChildren(legend([...data.series, { name: `y = x, and ±${BAND * 100} %`, color: "var(--ok-bg)" }]));
      plot.redraw();
    },
  };
}

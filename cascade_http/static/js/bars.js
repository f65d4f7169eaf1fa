// Values per kernel as bars (or dots), one per series side by side in each kernel's slot,
// from a baseline, with whiskers from `lo` to `hi` where given: nothing joins one kernel to
// the next. Hover, tap or ←/→ names a kernel with every series' value. However many
// kernels, a slot is at least a pixel column wide in the drawing's arithmetic; bars of
// neighbouring kernels then share columns.

import { cssVar } from "./palette.js";
import { axis as drawAxis, axisTitles, canvasPlot, legend, linearDomain, ratioDomain, scale } from "./plot.js";
import { h } from "./dom.js";

const PAD = { left: 72, right: 12, top: 12, bottom: 40 };
const MAX_BAR = 28;

/**
 * { id, label, height, kind: "log" (as far below the baseline as above) | "linear", baseline,
 *   mark: "bar" | "dot", axis(v) -> text, yTitle: text | () -> text (what the values are),
 *   rowTitle(row) -> text, valueText(value) -> text }
 * setData({ rows: [{ kernel_index, kernel_name }], series: [{ name, color, values: [{ v, lo?, hi? } | null] }] })
 */
export function kernelBars({ id, label, height = 240, kind = "linear", baseline = 0, mark = "bar", axis, yTitle, rowTitle, valueText }) {
  let data = { rows: [], series: [] };
  const keyBox = h("div", {});
  const plot = canvasPlot({ id, label, height, draw });

  function domain() {
    const all = data.series.flatMap((s) => s.values.flatMap((p) => (p ? [p.v, p.lo ?? p.v, p.hi ?? p.v] : [])));
    return kind === "log" ? ratioDomain(all, baseline) : linearDomain([...all, baseline]);
  }

  function geometry(width) {
    const plotW = width - PAD.left - PAD.right;
    const slot = plotW / Math.max(1, data.rows.length);
    const group = Math.min(slot * 0.8, MAX_BAR * data.series.length);
    return { plotW, slot, group, sub: group / Math.max(1, data.series.length) };
  }

  function draw(ctx, width, tall, focus) {
    if (!data.rows.length) return null;
    const g = geometry(width);
    const y = scale(kind, domain(), [tall - PAD.bottom, PAD.top]);
    const left = (i) => PAD.left + i * g.slot;
    if (focus !== null) {
      ctx.fillStyle = cssVar("--grid");
      ctx.fillRect(left(focus), PAD.top, Math.max(1, g.slot), tall - PAD.top - PAD.bottom);
    }
    drawAxis(ctx, y, "y", PAD.left, width - PAD.right, axis);
    axisTitles(ctx, { x: "kernel (index)", y: typeof yTitle === "function" ? yTitle() : yTitle }, { left: PAD.left, right: width - PAD.right, top: PAD.top, bottom: tall - PAD.bottom });
    ctx.strokeStyle = cssVar("--muted");
    ctx.beginPath();
    ctx.moveTo(PAD.left, Math.round(y(baseline)) + 0.5);
    ctx.lineTo(width - PAD.right, Math.round(y(baseline)) + 0.5);
    ctx.stroke();
    ctx.fillStyle = cssVar("--muted");
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const every = Math.max(1, Math.ceil(data.rows.length / Math.max(2, g.plotW / 48)));
    for (let i = 0; i < data.rows.length; i += every) ctx.fillText(String(data.rows[i].kernel_index), left(i) + g.slot / 2, tall - PAD.bottom + 6);
    data.series.forEach((s, si) => {
      ctx.fillStyle = s.color;
      ctx.strokeStyle = s.color;
      s.values.forEach((p, i) => {
        if (!p || !(kind !== "log" || p.v > 0)) return;
        const x0 = left(i) + (g.slot - g.group) / 2 + si * g.sub;
        const w = Math.max(1, g.sub > 3 ? g.sub - 1 : g.sub);
        const mid = x0 + w / 2;
        if (mark === "bar") {
          const top = Math.min(y(p.v), y(baseline));
          ctx.fillRect(x0, top, w, Math.max(1, Math.abs(y(p.v) - y(baseline))));
        } else {
          ctx.beginPath();
          ctx.arc(mid, y(p.v), Math.min(4, Math.max(1.5, w / 2)), 0, 2 * Math.PI);
          ctx.fill();
        }
        if (p.lo !== undefined && p.hi !== undefined && p.lo !== p.hi) {
          ctx.strokeStyle = mark === "bar" ? cssVar("--text") : s.color;
          ctx.beginPath();
          ctx.moveTo(mid, y(p.lo));
          ctx.lineTo(mid, y(p.hi));
          if (w >= 6) {
            for (const v of [p.lo, p.hi]) {
              ctx.moveTo(mid - 3, y(v));
              ctx.lineTo(mid + 3, y(v));
            }
          }
          ctx.stroke();
          ctx.strokeStyle = s.color;
        }
      });
    });
    return {
      count: data.rows.length,
      hit: (px, py) => {
        const i = Math.floor((px - PAD.left) / g.slot);
        return px >= PAD.left && i < data.rows.length && py >= PAD.top && py <= tall - PAD.bottom ? i : null;
      },
      at: (i) => [left(i) + g.slot / 2, PAD.top + 8],
      tip: (i) => [rowTitle(data.rows[i]), data.series.map((s) => [h("span", {}, h("span", { class: "swatch", style: `background:${s.color}` }), s.name), valueText(s.values[i])])],
      geometry: { left: PAD.left, top: PAD.top, bottom: tall - PAD.bottom, slot: g.slot, domain: y.domain },
    };
  }

  return {
    el: h("div", { class: "chart-wrap" }, plot.el, keyBox),
    canvas: plot.canvas,
    setData(next) {
      data = next;
      keyBox.replaceChildren(legend(data.series));
      plot.redraw();
    },
  };
}

// A table of numbers as colours: rows by columns of cells, lighter for more (viridis, which
// reads in grey and to colour-blind eyes too), hatched where there is no number (nan, none,
// a unit the row lacks). Hover, tap or ←/→ for a cell's value.

import { canvasPlot, fitText } from "./plot.js";
import { cssVar } from "./palette.js";
import { h } from "./dom.js";

const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];
const TOP = 18;
const MAX_HEIGHT = 480;

/** The colour of `t` in [0, 1]. */
export function viridis(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]].map((c) => [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16)));
  const mix = a.map((v, k) => Math.round(v + (b[k] - v) * (x - i)));
  return `rgb(${mix.join(",")})`;
}

/**
 * { id, label, valueText(v) -> text, tip(row, col, cell) -> [title, pairs] }
 * setData({ rows: [label], cols: [label], cells: [[cell | null]] by row }) with cell = { v, ... }: a
 * null cell or one whose v is null is drawn hatched.
 */
export function heatmap({ id, label, valueText, tip }) {
  let data = { rows: [], cols: [], cells: [] };
  let range = [0, 1];
  const scaleText = h("div", { class: "heat-scale" });
  const cellHeight = () => (data.rows.length <= 24 ? 20 : Math.max(1, Math.min(20, MAX_HEIGHT / data.rows.length)));
  const plot = canvasPlot({ id, label, height: () => TOP + data.rows.length * cellHeight() + 4, draw });

  function draw(ctx, width, tall, focus) {
    if (!data.rows.length || !data.cols.length) return null;
    const ch = cellHeight();
    const rowEvery = Math.max(1, Math.ceil(14 / ch));
    const labelled = data.rows.filter((_, r) => r % rowEvery === 0);
    const widest = Math.max(...labelled.map((l) => ctx.measureText(String(l)).width));
    const gutter = Math.min(width < 560 ? 120 : 220, Math.max(32, widest + 14));
    const cw = (width - gutter - 4) / data.cols.length;
    const [lo, hi] = range;
    const hatch = cssVar("--grid");
    const text = cssVar("--muted");
    ctx.textBaseline = "middle";
    ctx.fillStyle = text;
    ctx.textAlign = "center";
    const colEvery = Math.max(1, Math.ceil(28 / cw));
    for (let c = 0; c < data.cols.length; c += colEvery) ctx.fillText(String(data.cols[c]), gutter + (c + 0.5) * cw, TOP / 2);
    ctx.textAlign = "right";
    for (let r = 0; r < data.rows.length; r += rowEvery) ctx.fillText(fitText(ctx, String(data.rows[r]), gutter - 8), gutter - 6, TOP + (r + 0.5) * ch);
    data.cells.forEach((row, r) =>
      row.forEach((cell, c) => {
        const x = gutter + c * cw;
        const y = TOP + r * ch;
        const w = cw > 3 ? cw - 1 : cw;
        const hgt = ch > 3 ? ch - 1 : ch;
        if (cell && cell.v !== null && cell.v !== undefined) {
          ctx.fillStyle = viridis(hi > lo ? (cell.v - lo) / (hi - lo) : 0.5);
          ctx.fillRect(x, y, w, hgt);
        } else {
          ctx.fillStyle = hatch;
          ctx.fillRect(x, y, w, hgt);
          if (w > 5 && hgt > 5) {
            ctx.strokeStyle = text;
            ctx.beginPath();
            ctx.moveTo(x + 2, y + hgt - 2);
            ctx.lineTo(x + w - 2, y + 2);
            ctx.stroke();
          }
        }
      }),
    );
    if (focus !== null) {
      const [r, c] = [Math.floor(focus / data.cols.length), focus % data.cols.length];
      ctx.strokeStyle = cssVar("--text");
      ctx.lineWidth = 2;
      ctx.strokeRect(gutter + c * cw - 1, TOP + r * ch - 1, cw + 1, ch + 1);
      ctx.lineWidth = 1;
    }
    return {
      count: data.rows.length * data.cols.length,
      hit: (px, py) => {
        const c = Math.floor((px - gutter) / cw);
        const r = Math.floor((py - TOP) / ch);
        return c >= 0 && c < data.cols.length && r >= 0 && r < data.rows.length ? r * data.cols.length + c : null;
      },
      at: (i) => [gutter + ((i % data.cols.length) + 0.5) * cw, TOP + (Math.floor(i / data.cols.length) + 0.5) * ch],
      tip: (i) => {
        const [r, c] = [Math.floor(i / data.cols.length), i % data.cols.length];
        return tip(r, c, data.cells[r][c]);
      },
      geometry: { left: gutter, top: TOP, cell: [cw, ch], range },
    };
  }

  return {
    el: h("div", { class: "chart-wrap" }, plot.el, scaleText),
    canvas: plot.canvas,
    setData(next, shared) {
      data = next;
      const values = data.cells.flat().filter((cell) => cell && Number.isFinite(cell.v)).map((cell) => cell.v);
      range = shared ?? [Math.min(...values), Math.max(...values)];
      const stops = VIRIDIS.map((c, i) => `${c} ${(i / (VIRIDIS.length - 1)) * 100}%`).join(", ");
      scaleText.replaceChildren(
        values.length ? h("span", {}, valueText(range[0])) : null,
        values.length ? h("span", { class: "heat-ramp", style: `background:linear-gradient(90deg, ${stops})`, "aria-hidden": "true" }) : null,
        values.length ? h("span", {}, valueText(range[1])) : null,
        h("span", { class: "heat-none", "aria-hidden": "true" }),
        h("span", {}, "no number"),
      );
      plot.redraw();
    },
  };
}

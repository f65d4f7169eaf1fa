// A line chart of times per row (kernel or step) on a canvas, log scale on y, one line per
// series; hover (or focus and ←/→) shows a row's values. However many rows, it draws at
// most one point per pixel column per series. What it drew is in `data-series`.

import { duration } from "./format.js";
import { facts, h, hideTip, perFrame, showTip } from "./dom.js";
import { cssVar, fitCanvas } from "./palette.js";
import { axisTitles } from "./plot.js";

const PAD = { left: 72, right: 12, top: 12, bottom: 40 };

/** { id, label, height, rowTitle(i) -> text, xTitle, yTitle: what the rows and values are } */
export function lineChart({ id, label, height = 240, rowTitle, xTitle, yTitle }) {
  let data = { rows: 0, series: [] };
  let focus = null;
  const canvas = h("canvas", { class: "chart", id, tabindex: "0", role: "img", "aria-label": label });
  const box = h("div", {}, canvas);
  const legend = h("ul", { class: "legend" });
  const el = h("div", { class: "chart-wrap" }, box, legend);

  function scales(width) {
    const values = data.series.flatMap((s) => s.values.filter((v) => v > 0));
    const lo = Math.log10(Math.min(...values));
    const hi = Math.log10(Math.max(...values));
    const y0 = Math.floor(lo);
    const y1 = Math.max(y0 + 1, Math.ceil(hi));
    const plotW = width - PAD.left - PAD.right;
    const plotH = height - PAD.top - PAD.bottom;
    return {
      x: (i) => PAD.left + (data.rows > 1 ? (i / (data.rows - 1)) * plotW : plotW / 2),
      y: (v) => PAD.top + plotH - ((Math.log10(v) - y0) / (y1 - y0)) * plotH,
      y0,
      y1,
      plotW,
    };
  }

  const draw = perFrame(() => {
    const width = box.clientWidth;
    if (!width || !data.rows) return;
    const ctx = fitCanvas(canvas, width, height);
    ctx.clearRect(0, 0, width, height);
    const s = scales(width);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = cssVar("--muted");
    ctx.strokeStyle = cssVar("--grid");
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (let p = s.y0; p <= s.y1; p += 1) {
      const y = Math.round(s.y(10 ** p)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(PAD.left, y);
      ctx.lineTo(width - PAD.right, y);
      ctx.stroke();
      ctx.fillText(duration(10 ** p), PAD.left - 6, y);
    }
    ctx.textAlign = "center";
    const step = Math.max(1, Math.ceil(data.rows / Math.max(2, s.plotW / 60)));
    for (let i = 0; i < data.rows; i += step) ctx.fillText(String(i), s.x(i), height - PAD.bottom + 10);
    axisTitles(ctx, { x: xTitle, y: yTitle }, { left: PAD.left, right: width - PAD.right, top: PAD.top, bottom: height - PAD.bottom });
    for (const series of data.series) {
      ctx.strokeStyle = series.color;
      ctx.fillStyle = series.color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(series.dashed ? [5, 4] : []);
      ctx.beginPath();
      let pen = false;
      let lastPx = -1;
      series.values.forEach((v, i) => {
        if (!(v > 0)) {
          pen = false;
          return;
        }
        const x = s.x(i);
        if (Math.floor(x) === lastPx && pen) return;
        lastPx = Math.floor(x);
        if (pen) ctx.lineTo(x, s.y(v));
        else ctx.moveTo(x, s.y(v));
        pen = true;
      });
      ctx.stroke();
      ctx.setLineDash([]);
      if (data.rows <= 200) series.values.forEach((v, i) => v > 0 && ctx.fillRect(s.x(i) - 2, s.y(v) - 2, 4, 4));
    }
    if (focus !== null) {
      ctx.strokeStyle = cssVar("--text");
      ctx.beginPath();
      ctx.moveTo(Math.round(s.x(focus)) + 0.5, PAD.top);
      ctx.lineTo(Math.round(s.x(focus)) + 0.5, height - PAD.bottom);
      ctx.stroke();
    }
  });

  function show(i, clientX, clientY) {
    focus = i;
    draw();
    showTip(clientX, clientY, h("div", { class: "tip-title" }, rowTitle(i)), facts(data.series.map((s) => [h("span", {}, h("span", { class: "swatch", style: `background:${s.color}` }), s.name), duration(s.values[i])])));
  }

  function rowAt(clientX) {
    const rect = canvas.getBoundingClientRect();
    const s = scales(rect.width);
    const i = data.rows > 1 ? Math.round(((clientX - rect.left - PAD.left) / s.plotW) * (data.rows - 1)) : 0;
    return Math.min(data.rows - 1, Math.max(0, i));
  }

  canvas.addEventListener("pointermove", (e) => data.rows && show(rowAt(e.clientX), e.clientX, e.clientY));
  canvas.addEventListener("pointerleave", () => {
    focus = null;
    hideTip();
    draw();
  });
  canvas.addEventListener("blur", () => {
    focus = null;
    hideTip();
    draw();
  });
  canvas.addEventListener("keydown", (e) => {
    if (!data.rows || !["ArrowLeft", "ArrowRight"].includes(e.key)) return;
    e.preventDefault();
    const i = Math.min(data.rows - 1, Math.max(0, (focus ?? -1) + (e.key === "ArrowRight" ? 1 : -1)));
    const rect = canvas.getBoundingClientRect();
    show(i, rect.left + scales(rect.width).x(i), rect.top + PAD.top);
  });
  new ResizeObserver(draw).observe(box);

  return {
    el,
    /** { rows, series: [{ name, color, values: [ns | null], dashed? }] } */
    setData(next) {
      data = next;
      legend.replaceChildren(...data.series.map((s) => h("li", {}, h("span", { class: `swatch${s.dashed ? " dashed" : ""}`, style: `background:${s.color}` }), s.name)));
      canvas.dataset.series = JSON.stringify(data.series.map((s) => ({ name: s.name, values: s.values })));
      draw();
    },
  };
}

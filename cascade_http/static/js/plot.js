// A canvas that draws something and says what is under the pointer: hover with a mouse, tap
// on a phone (a tap elsewhere closes it), or focus and ←/→ through its marks (Esc closes).
// `draw(ctx, width, height, focus)` paints at the canvas's CSS size and returns what it drew:
// { count, hit(x, y) -> mark | null, at(mark) -> [x, y], tip(mark) -> [title, [[term, value]]],
// geometry }, marks numbered 0..count-1 in reading order; `geometry` (where it drew: plot area,
// scales' domains, cell sizes) goes on the canvas as data-geometry, for tests and tools.
// Also: log and linear scales, and their axes.

import { facts, h, hideTip, perFrame, showTip } from "./dom.js";
import { cssVar, fitCanvas } from "./palette.js";
import { ticks } from "./format.js";

// Plots are drawn again when the theme changes: their colours are the theme's. Held weakly,
// so a view's plots go with it.
const plots = new Set(); // WeakRefs to the canvases
const redraws = new WeakMap(); // canvas -> its redraw
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
  for (const ref of plots) {
    const canvas = ref.deref();
    if (!canvas) plots.delete(ref);
    else if (canvas.isConnected) redraws.get(canvas)();
  }
});

// A tap outside every plot closes the tip a tap opened.
document.addEventListener("pointerdown", (e) => {
  if (e.pointerType === "touch" && !e.target.closest?.(".plot")) hideTip();
});

export function canvasPlot({ id, label, height, draw }) {
  let layout = { count: 0 };
  let focus = null;
  const canvas = h("canvas", { class: "plot", id, tabindex: "0", role: "img", "aria-label": label });
  const el = h("div", { class: "plot-box" }, canvas);
  const heightOf = (width) => (typeof height === "function" ? height(width) : height);

  const redraw = perFrame(() => {
    const width = el.clientWidth;
    if (!width) return;
    const tall = heightOf(width);
    const ctx = fitCanvas(canvas, width, tall);
    ctx.clearRect(0, 0, width, tall);
    ctx.font = "11px system-ui, sans-serif";
    layout = draw(ctx, width, tall, focus) ?? { count: 0 };
    if (layout.geometry) canvas.dataset.geometry = JSON.stringify(layout.geometry);
  });

  function show(mark, clientX, clientY) {
    if (mark === null || mark === undefined) {
      hide();
      return;
    }
    if (mark !== focus) {
      focus = mark;
      redraw();
    }
    const [title, pairs] = layout.tip(mark);
    showTip(clientX, clientY, h("div", { class: "tip-title" }, title), facts(pairs));
  }

  function hide() {
    if (focus !== null) {
      focus = null;
      redraw();
    }
    hideTip();
  }

  function markAt(e) {
    const rect = canvas.getBoundingClientRect();
    return layout.count ? layout.hit(e.clientX - rect.left, e.clientY - rect.top) : null;
  }

  canvas.addEventListener("pointermove", (e) => e.pointerType !== "touch" && show(markAt(e), e.clientX, e.clientY));
  canvas.addEventListener("pointerleave", (e) => e.pointerType !== "touch" && hide());
  canvas.addEventListener("click", (e) => show(markAt(e), e.clientX, e.clientY)); // a tap, too
  canvas.addEventListener("blur", hide);
  canvas.addEventListener("keydown", (e) => {
    if (e.key === "Escape") return hide();
    if (!layout.count || !["ArrowLeft", "ArrowRight"].includes(e.key)) return;
    e.preventDefault();
    const next = Math.min(layout.count - 1, Math.max(0, (focus ?? -1) + (e.key === "ArrowRight" ? 1 : -1)));
    const rect = canvas.getBoundingClientRect();
    focus = next;
    redraw();
    const [x, y] = layout.at(next);
    show(next, rect.left + x, rect.top + y);
  });
  new ResizeObserver(redraw).observe(el);
  plots.add(new WeakRef(canvas));
  redraws.set(canvas, redraw);

  return { el, canvas, redraw };
}

/** A scale from `domain` [lo, hi] onto `range` [a, b], logarithmic or linear, with its ticks. */
export function scale(kind, [lo, hi], [a, b]) {
  if (kind === "log") {
    const l0 = Math.log10(lo);
    const l1 = Math.log10(hi);
    const at = (v) => a + ((Math.log10(v) - l0) / (l1 - l0 || 1)) * (b - a);
    at.ticks = () => logTicks(lo, hi);
    at.domain = [lo, hi];
    return at;
  }
  const at = (v) => a + ((v - lo) / (hi - lo || 1)) * (b - a);
  at.ticks = (count = 5) => ticks(lo, hi, count);
  at.domain = [lo, hi];
  return at;
}

/** Round log-scale bounds holding every positive value of `values` (and `also`). */
export function logDomain(values, also = []) {
  const positive = [...values, ...also].filter((v) => v > 0 && Number.isFinite(v));
  if (!positive.length) return [1, 10];
  const lo = 10 ** Math.floor(Math.log10(Math.min(...positive)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...positive)));
  return [lo, hi > lo ? hi : lo * 10];
}

/** Log-scale bounds as far below `centre` as above it (in ratio), holding every value. */
export function ratioDomain(values, centre) {
  const far = Math.max(1.1, ...values.filter((v) => v > 0).map((v) => Math.max(v / centre, centre / v) * 1.15));
  return [centre / far, centre * far];
}

/** Linear bounds holding `values` and 0, a little wider than they are. */
export function linearDomain(values) {
  const finite = values.filter(Number.isFinite);
  let lo = Math.min(0, ...finite);
  let hi = Math.max(0, ...finite);
  if (lo === hi) hi = lo + 1;
  const pad = (hi - lo) * 0.05;
  return [lo < 0 ? lo - pad : lo, hi > 0 ? hi + pad : hi];
}

function logTicks(lo, hi) {
  const decades = Math.log10(hi / lo);
  if (decades < 1) return ticks(lo, hi, 5); // under a decade, round values a linear axis would take
  const out = [];
  const steps = decades <= 2 ? [1, 2, 5] : [1];
  for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p += 1) {
    for (const m of steps) {
      const v = m * 10 ** p;
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
  }
  return out;
}

/** Grid lines and labels of scale `s` on axis `dir`: for "y", lines across from x `from` to
 * `to`, labelled left of `from`; for "x", lines down from y `from` to `to`, labelled below. */
export function axis(ctx, s, dir, from, to, format) {
  ctx.fillStyle = cssVar("--muted");
  ctx.strokeStyle = cssVar("--grid");
  ctx.lineWidth = 1;
  ctx.textAlign = dir === "y" ? "right" : "center";
  ctx.textBaseline = dir === "y" ? "middle" : "top";
  for (const v of s.ticks()) {
    const at = Math.round(s(v)) + 0.5;
    ctx.beginPath();
    if (dir === "y") {
      ctx.moveTo(from, at);
      ctx.lineTo(to, at);
    } else {
      ctx.moveTo(at, from);
      ctx.lineTo(at, to);
    }
    ctx.stroke();
    if (dir === "y") ctx.fillText(format(v), from - 6, at);
    else ctx.fillText(format(v), at, to + 5);
  }
}

/** The nearest of `points` ([x, y] each) to (x, y) within `radius` px: its index, or null. */
export function nearest(points, x, y, radius) {
  let best = null;
  let bestD = radius * radius;
  points.forEach(([px, py], i) => {
    const d = (px - x) ** 2 + (py - y) ** 2;
    if (d <= bestD) {
      best = i;
      bestD = d;
    }
  });
  return best;
}

/** A legend: one swatch and name per series. */
export function legend(series, id) {
  return h("ul", { class: "legend", id }, series.map((s) => h("li", { title: s.name }, h("span", { class: "swatch", style: `background:${s.color}` }), s.name)));
}

/** `text` cut to `width` px with an ellipsis (empty when not even a letter fits). */
/**
 * The titles of a plot's axes: x's centred under the tick labels below `box.bottom`, y's
 * turned up at `box.yTitleAt` (the canvas's left edge unless given); the canvas's
 * `data-axes` holds them, for tests and tools.
 */
export function axisTitles(ctx, { x, y }, box) {
  ctx.save();
  ctx.fillStyle = cssVar("--muted");
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  ctx.fillText(x, (box.left + box.right) / 2, box.bottom + 20);
  ctx.translate(box.yTitleAt ?? 4, (box.top + box.bottom) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText(y, 0, 0);
  ctx.restore();
  ctx.canvas.dataset.axes = JSON.stringify({ x, y });
}

/**
 * `text` in `width` pixels, cut in the middle if it must be ("TITANX_L2…assoc16"): names that
 * differ at their end (a config and its variants) stay apart where a cut end would not.
 */
export function fitMiddle(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  for (let n = text.length - 1; n > 1; n--) {
    const head = Math.ceil(n / 3);
    const cut = `${text.slice(0, head)}…${text.slice(text.length - (n - head))}`;
    if (ctx.measureText(cut).width <= width) return cut;
  }
  return "";
}

export function fitText(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let n = text.length;
  while (n > 1 && ctx.measureText(`${text.slice(0, n)}…`).width > width) n = Math.min(n - 1, Math.ceil(n * 0.8)); // at least one letter less each time
  return n > 1 ? `${text.slice(0, n)}…` : "";
}

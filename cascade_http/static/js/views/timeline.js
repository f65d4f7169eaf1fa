// The Timeline tab: one lane per config and replica, each sim's kernels laid end to end by
// sim_time_ns on a canvas, coloured by kernel name; zoom (wheel, +/−, buttons), pan (drag,
// ←/→), fit (0); hover for a kernel's facts. It grows live as kernel events arrive. Drawing
// is bounded by the canvas's width: per lane, at most one bar per pixel column is drawn.
// The bars drawn are also on the canvas as `data-bars` (JSON) and in the kernel table below.
// A split sim's lane is marked where each of its chunks begins and by a strip under each
// chunk's kernels (the tooltip names the chunk); its chunks, where their kernels lie, are on
// the canvas as `data-chunks`.

import { counted, duration, integer, ipc, ticks, timeUnit } from "../format.js";
import { clear, facts, h, hideTip, perFrame, showTip, state, throttle } from "../dom.js";
import { colorMap, cssVar, fitCanvas, textOn } from "../palette.js";
import { fitMiddle, fitText } from "../plot.js";
import { virtualTable } from "../vtable.js";

const AXIS = 28;
const LANE = 24;
const GAP = 6;

export function mountTimeline(el, model) {
  let lanes = []; // [{ sim, label, bars: [{ start, dur, k }], chunks: [{ c, start, end }] }]
  let end = 0;
  let view = { t0: 0, span: 1 };
  let fitted = true;
  let drag = null;
  let colors = colorMap();
  let shortNames = new Map(); // kernel_name -> its kernel_short_name, for the legend

  const canvas = h("canvas", { class: "tl-canvas", id: "timeline-canvas", tabindex: "0", role: "img" });
  const wrap = h("div", { class: "tl-wrap" }, canvas);
  const summary = h("span", { class: "muted", id: "timeline-summary" });
  const legend = h("ul", { class: "legend", "aria-label": "Kernel colours" });
  const zoomBy = (f) => () => zoom(f, 0.5);
  const toolbar = h(
    "div",
    { class: "toolbar" },
    h(
      "div",
      { class: "button-row", role: "group", "aria-label": "Zoom" },
      h("button", { class: "btn btn-small", type: "button", onclick: zoomBy(0.5), "aria-label": "Zoom in" }, "+"),
      h("button", { class: "btn btn-small", type: "button", onclick: zoomBy(2), "aria-label": "Zoom out" }, "−"),
      h("button", { class: "btn btn-small", type: "button", onclick: () => fit(), id: "timeline-fit" }, "Fit"),
    ),
    summary,
    h("span", { class: "hint hide-narrow" }, "Wheel: zoom · drag or ←/→: pan · +/−: zoom · 0: fit"),
  );
  const table = virtualTable({
    id: "timeline-kernels",
    label: "Kernels on the timeline",
    columns: [
      { title: "Lane", width: "minmax(10rem,1.2fr)", cell: (b) => laneName(b.lane) },
      { title: "#", width: "3.5rem", num: true, cell: (b) => b.k.kernel_index },
      { title: "uid", width: "3.5rem", num: true, cell: (b) => b.k.kernel_launch_uid },
      { title: "Kernel", width: "minmax(10rem,2fr)", cell: (b) => h("span", { class: "mono", title: b.k.kernel_name }, b.k.kernel_short_name) },
      { title: "Start", width: "6rem", num: true, cell: (b) => duration(b.start) },
      { title: "Time", width: "6rem", num: true, cell: (b) => duration(b.dur) },
      { title: "Cycles", width: "7rem", num: true, cell: (b) => integer(b.k.gpu_sim_cycle) },
      { title: "Instructions", width: "9rem", num: true, cell: (b) => integer(b.k.gpu_sim_insn) },
      { title: "IPC", width: "5rem", num: true, cell: (b) => ipc(b.k.gpu_ipc) },
    ],
  });
  const body = h("div", {});
  el.append(h("section", { class: "panel" }, toolbar, body));

  function build() {
    colors = colorMap();
    shortNames = new Map();
    end = 0;
    const sims = model.orderedSims();
    const short = shortConfigs(sims.map((s) => s.gpu_config));
    lanes = sims.map((sim) => {
      const replica = `r${sim.replica}`;
      const lane = { sim, replica, config: sim.gpu_config, short: short.get(sim.gpu_config), label: `${sim.gpu_config} · ${replica}`, bars: [] };
      let t = 0;
      for (const k of model.kernels.get(sim.id) ?? []) {
        if (!k) continue;
        lane.bars.push({ start: t, dur: k.sim_time_ns, k, lane });
        colors.get(k.kernel_name);
        shortNames.set(k.kernel_name, k.kernel_short_name);
        t += k.sim_time_ns;
      }
      end = Math.max(end, t);
      lane.chunks = chunksOf(sim, lane.bars);
      return lane;
    });
  }

  function fit() {
    fitted = true;
    view = { t0: 0, span: end > 0 ? end * 1.02 : 1 };
    draw();
  }

  function plot() {
    const width = wrap.clientWidth;
    const gutter = width < 560 ? 108 : 168;
    return { width, gutter, plotW: Math.max(10, width - gutter - 8) };
  }

  function clamp() {
    const max = Math.max(end * 1.5, 1);
    view.span = Math.min(Math.max(view.span, 5), max);
    view.t0 = Math.min(Math.max(view.t0, -view.span * 0.05), Math.max(0, end - view.span * 0.5));
  }

  /** Zooms by `factor` (<1 in) keeping the time at `at` (0..1 of the plot) in place. */
  function zoom(factor, at) {
    const pivot = view.t0 + view.span * at;
    view.span *= factor;
    view.t0 = pivot - view.span * at;
    fitted = false;
    clamp();
    draw();
  }

  function pan(fraction) {
    view.t0 += view.span * fraction;
    fitted = false;
    clamp();
    draw();
  }

  const draw = perFrame(() => {
    const { width, gutter, plotW } = plot();
    const height = AXIS + lanes.length * (LANE + GAP) + 4;
    const ctx = fitCanvas(canvas, width, height);
    const text = cssVar("--text");
    const muted = cssVar("--muted");
    const grid = cssVar("--grid");
    ctx.clearRect(0, 0, width, height);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const x = (t) => gutter + ((t - view.t0) / view.span) * plotW;

    // axis and grid, in one unit chosen for the visible span
    const unit = timeUnit(view.span);
    ctx.fillStyle = muted;
    ctx.strokeStyle = grid;
    ctx.lineWidth = 1;
    for (const t of ticks(Math.max(0, view.t0), view.t0 + view.span, Math.max(2, Math.floor(plotW / 110)))) {
      const px = Math.round(x(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(px, AXIS - 6);
      ctx.lineTo(px, height);
      ctx.stroke();
      ctx.textAlign = "center";
      ctx.fillText(duration(t, unit), px, AXIS / 2 - 2);
    }

    const labels = [];
    lanes.forEach((lane, i) => {
      const y = AXIS + i * (LANE + GAP);
      ctx.textAlign = "left";
      ctx.fillStyle = text;
      labels.push(laneText(ctx, lane, gutter - 12));
      ctx.fillText(labels[i], 6, y + LANE / 2);
      ctx.save();
      ctx.beginPath();
      ctx.rect(gutter, y, plotW, LANE);
      ctx.clip();
      let lastPx = -1;
      for (let b = firstVisible(lane.bars, view.t0); b < lane.bars.length; b += 1) {
        const bar = lane.bars[b];
        const x0 = x(bar.start);
        if (x0 > gutter + plotW) break;
        const w = Math.max(1, x(bar.start + bar.dur) - x0);
        if (w < 2 && Math.floor(x0) === lastPx) continue; // a pixel column holds one bar
        lastPx = Math.floor(x0);
        const color = colors.get(bar.k.kernel_name);
        ctx.fillStyle = color;
        ctx.fillRect(x0, y, w > 3 ? w - 1 : w, LANE);
        if (w > 48) {
          ctx.fillStyle = textOn(color);
          ctx.fillText(fitText(ctx, bar.k.kernel_short_name, w - 8), Math.max(x0, gutter) + 4, y + LANE / 2);
        }
      }
      // a split sim: a line where each chunk begins, and under its kernels a strip, chunk
      // after chunk in turn dark and light
      for (const chunk of lane.chunks) {
        const x0 = x(chunk.start);
        ctx.fillStyle = text;
        if (chunk.c.index > 0) ctx.fillRect(Math.round(x0) - 1, y, 2, LANE);
        ctx.fillStyle = chunk.c.index % 2 ? muted : text;
        ctx.fillRect(x0, y + LANE - 4, Math.max(1, x(chunk.end) - x0), 4);
      }
      ctx.restore();
    });
    canvas.setAttribute("aria-label", `Timeline of ${lanes.length} lanes and ${model.kernelCount} kernels, ${duration(view.t0)} to ${duration(view.t0 + view.span)} shown. The kernel table below lists them.`);
    canvas.dataset.view = JSON.stringify({ t0_ns: view.t0, span_ns: view.span });
    canvas.dataset.labels = JSON.stringify(labels); // the lane labels as drawn, for tests
  });

  function barAt(px, py) {
    const { gutter, plotW } = plot();
    const i = Math.floor((py - AXIS) / (LANE + GAP));
    if (px < gutter || i < 0 || i >= lanes.length || (py - AXIS) % (LANE + GAP) > LANE) return null;
    const t = view.t0 + ((px - gutter) / plotW) * view.span;
    const bar = lanes[i].bars[firstVisible(lanes[i].bars, t)];
    const onePx = view.span / plotW;
    return bar && t >= bar.start - onePx && t <= bar.start + bar.dur + onePx ? { lane: lanes[i], bar } : null;
  }

  function tip(e) {
    const rect = canvas.getBoundingClientRect();
    const hit = barAt(e.clientX - rect.left, e.clientY - rect.top);
    if (!hit) return hideTip();
    const { k, start, dur } = hit.bar;
    showTip(
      e.clientX,
      e.clientY,
      h("div", { class: "tip-title mono" }, k.kernel_short_name),
      facts([
        ["Lane", hit.lane.label],
        ...chunkFacts(hit.lane, k),
        ["uid", k.kernel_launch_uid],
        ...(k.reused_from ? [["Reused", `not simulated: the result of launch ${k.reused_from}`]] : []),
        ["Name", h("span", { class: "mono wrap" }, k.kernel_name)],
        ["Cycles", integer(k.gpu_sim_cycle)],
        ["Instructions", integer(k.gpu_sim_insn)],
        ["IPC", ipc(k.gpu_ipc)],
        ["Time", duration(dur)],
        ["Starts at", duration(start)],
      ]),
    );
  }

  canvas.addEventListener("pointermove", (e) => {
    if (drag) {
      const { plotW } = plot();
      view.t0 = drag.t0 - ((e.clientX - drag.x) / plotW) * view.span;
      fitted = false;
      clamp();
      draw();
    } else tip(e);
  });
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, t0: view.t0 };
    canvas.setPointerCapture(e.pointerId);
    hideTip();
  });
  canvas.addEventListener("pointerup", () => (drag = null));
  canvas.addEventListener("pointerleave", hideTip);
  canvas.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const { gutter, plotW } = plot();
      const at = Math.min(1, Math.max(0, (e.clientX - canvas.getBoundingClientRect().left - gutter) / plotW));
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.deltaX || e.deltaY) / 500);
      else zoom(Math.exp(e.deltaY * 0.002), at);
    },
    { passive: false },
  );
  canvas.addEventListener("keydown", (e) => {
    const keys = { ArrowLeft: () => pan(-0.1), ArrowRight: () => pan(0.1), "+": () => zoom(0.7, 0.5), "=": () => zoom(0.7, 0.5), "-": () => zoom(1 / 0.7, 0.5), 0: () => fit() };
    const act = keys[e.key];
    if (act) {
      e.preventDefault();
      act();
    }
  });
  const resize = new ResizeObserver(() => draw());
  resize.observe(wrap);

  // The bars as drawn, for tests and tools: each sim's kernels with their start and length.
  const publish = throttle(() => {
    canvas.dataset.bars = JSON.stringify(
      lanes.flatMap((lane, i) => lane.bars.map((b) => ({ lane: i, sim_id: lane.sim.id, gpu_config: lane.sim.gpu_config, replica: lane.sim.replica, kernel_index: b.k.kernel_index, uid: b.k.kernel_launch_uid, name: b.k.kernel_name, start_ns: b.start, dur_ns: b.dur, color: colors.get(b.k.kernel_name) }))),
    );
    canvas.dataset.kernels = String(model.kernelCount);
    canvas.dataset.chunks = JSON.stringify(
      lanes.flatMap((lane, i) => lane.chunks.map(({ c, start, end }) => ({ lane: i, sim_id: lane.sim.id, index: c.index, first: c.first, last: c.last, warmup: c.warmup, state: c.state, start_ns: start, end_ns: end }))),
    );
  }, 300);

  function render() {
    build();
    if (fitted) view = { t0: 0, span: end > 0 ? end * 1.02 : 1 };
    summary.textContent = `${counted(lanes.length, "lane")} · ${counted(model.kernelCount, "kernel")} · longest ${duration(end)}`;
    if (!model.kernelCount) {
      const why = model.kernelsLoaded ? (model.active ? "No kernel has finished yet; bars appear as they do." : "No sim finished a kernel.") : "Loading kernels…";
      clear(body, state(model.kernelsLoaded ? "empty" : "loading", why));
    } else if (!body.contains(wrap)) clear(body, wrap, legend, h("h3", { class: "sub" }, "Kernels"), table.el);
    const shown = colors.entries().slice(0, 24);
    const seen = new Map(); // short name -> how many so far: kernels differing only in template arguments
    clear(
      legend,
      shown.map(([name, color]) => {
        const short = shortNames.get(name);
        const n = (seen.get(short) ?? 0) + 1;
        seen.set(short, n);
        return h("li", { title: name }, h("span", { class: "swatch", style: `background:${color}` }), n > 1 ? `${short} (${n})` : short);
      }),
    );
    table.setRows(lanes.flatMap((l) => l.bars));
    draw();
    publish();
  }

  render();
  return {
    changed(what) {
      if (what.has("kernels") || what.has("sims")) render();
    },
    destroy() {
      resize.disconnect();
      publish.cancel();
      hideTip();
    },
  };
}

/** A split sim's chunks where their kernels lie on its lane (a chunk with none yet: none). */
function chunksOf(sim, bars) {
  return (sim.split?.chunks ?? []).flatMap((c) => {
    const own = bars.filter((b) => b.k.kernel_launch_uid >= c.first && b.k.kernel_launch_uid <= c.last);
    return own.length ? [{ c, start: own[0].start, end: own.at(-1).start + own.at(-1).dur }] : [];
  });
}

/** What a kernel's tooltip says of its chunk, in a split sim. */
function chunkFacts(lane, k) {
  const chunk = lane.chunks.find(({ c }) => k.kernel_launch_uid >= c.first && k.kernel_launch_uid <= c.last);
  if (!chunk) return [];
  const { c } = chunk;
  const warm = c.warmup ? `, after ${c.warmup} warm-up launch${c.warmup === 1 ? "" : "es"}` : "";
  return [["Chunk", `${c.index + 1} of ${lane.sim.split.chunks.length}: launches ${c.first}–${c.last}${warm} (${c.state}, attempt ${c.attempt})`]];
}

/** Index of the last bar starting at or before `t` (0 if none): where drawing starts. */
function firstVisible(bars, t) {
  let lo = 0;
  let hi = bars.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (bars[mid].start <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Configs as short as they can be told apart: "SM61_TITANX" -> "TITANX" (its "SM<n>_" prefix
 * off) unless another of `configs` would read the same.
 */
function shortConfigs(configs) {
  const unique = [...new Set(configs)];
  const bare = (c) => c.replace(/^SM\d+_(?=.)/, "");
  const taken = new Map();
  for (const c of unique) taken.set(bare(c), (taken.get(bare(c)) ?? 0) + 1);
  return new Map(unique.map((c) => [c, taken.get(bare(c)) > 1 ? c : bare(c)]));
}

/**
 * A lane's label in `width` pixels. The replica is always shown whole, so the lanes of one
 * config stay apart on a phone: the full config if it fits, else the short one, else the
 * short one cut in the middle, so that configs that differ at their end stay apart too.
 */
function laneText(ctx, lane, width) {
  for (const config of [lane.config, lane.short]) {
    const text = `${config} · ${lane.replica}`;
    if (ctx.measureText(text).width <= width) return text;
  }
  const tail = ` ${lane.replica}`;
  const head = fitMiddle(ctx, lane.short, width - ctx.measureText(tail).width);
  return head ? `${head}${tail}` : lane.replica;
}

/** A lane in the kernel table: the config cut first, the replica never. */
function laneName(lane) {
  return h("span", { class: "lane-name", title: lane.label }, h("span", { class: "lane-config" }, lane.config), h("span", { class: "lane-replica" }, ` · ${lane.replica}`));
}

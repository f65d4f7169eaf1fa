// Compare's pictures, each kernel on its own: simulated against real time (a scatter on log
// axes, per config), the same for each hardware counter the real timing has (against the
// simulator stats it is paired with), each config's time against the first's per kernel (the
// ratio `cascade compare` prints for totals), and how far each config's replicas spread
// around their median. All but the last draw GET /comparison; the spread, which it does not
// carry, the run's kernels (every replica's sim_time_ns). Each canvas holds what it drew as
// JSON in a data attribute: data-points (and data-measure), data-ratios, data-spread.

import { duration, fixed, integer, NONE, percent, precise } from "../format.js";
import { h } from "../dom.js";
import { kernelBars } from "../bars.js";
import { scatterPlot } from "../scatter.js";
import { errorPct, median } from "../stats.js";

const kernelTitle = (r) => `#${r.kernel_index} ${r.kernel_short_name}`;

function picture(id, title, hint, chart, controls = null) {
  return h("div", { class: "picture", id, hidden: true }, h("div", { class: "picture-head" }, h("h3", { class: "sub" }, title), controls), h("p", { class: "hint pad-x" }, hint), chart.el);
}

// What the time scatter can put against real: durations, and cycles when the timing measured them.
const MEASURES = {
  time: { name: "Time", real: (r) => r.real_ns, sim: (r, cfg) => r.sim_ns[cfg], spread: (r) => r.real_ns_spread, show: precise, axis: duration },
  cycles: { name: "Cycles", real: (r) => r.real_cycles, sim: (r, cfg) => r.sim_cycles?.[cfg], spread: (r) => r.real_cycles_spread, show: integer, axis: compactCount },
};

function compactCount(v) {
  return v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : String(v);
}

/** Each hardware counter of the comparison (Comparison.counters) as a measure of the scatter:
 * its rows line up with the comparison's, by kernel_index. */
function counterMeasures(c) {
  return Object.fromEntries(
    Object.entries(c.counters ?? {}).map(([key, counter]) => {
      const rows = new Map(counter.rows.map((r) => [r.kernel_index, r]));
      const of = (r) => rows.get(r.kernel_index);
      return [key, { name: counter.label, real: (r) => of(r)?.real, sim: (r, cfg) => of(r)?.sim[cfg], spread: (r) => of(r)?.real_spread, show: precise, axis: compactCount }];
    }),
  );
}

/** A scatter of simulated against real per kernel and config, on log axes, with a picker of
 * what to put against real (`measures`, given with each comparison; the picker is shown when
 * there is a choice, or always with `pickAlways`). Hidden while nothing has both values. */
function scatterPicture(colors, { id, box, title, hint, pick, pickAlways = false }) {
  let comparison = null;
  let measures = {};
  let measure = null;
  const select = h("select", { id: `${id}-measure`, "aria-label": pick });
  select.addEventListener("change", () => {
    measure = select.value;
    draw();
  });
  const scatter = scatterPlot({
    id: `${id}-chart`,
    label: `${title}, per kernel and config, on log axes`,
    axis: (v) => measures[measure].axis(v),
    xTitle: "real",
    yTitle: "simulated",
    tip: (p) => {
      const m = measures[measure];
      return [
        kernelTitle(p.row),
        [
          ["Kernel", h("span", { class: "mono wrap" }, p.row.kernel_name)],
          ["Config", p.config],
          ["Real", m.show(p.real)],
          ["Simulated", m.show(p.sim)],
          ["Error", percent(errorPct(p.sim, p.real), { signed: true })],
          ...(p.lo !== undefined ? [["Real range", `${m.show(p.lo)} to ${m.show(p.hi)}`]] : []),
        ],
      ];
    },
  });
  const label = h("label", { class: "inline", hidden: true }, pick, select);
  const el = picture(box, title, hint, scatter, label);

  function draw() {
    const c = comparison;
    const m = measures[measure];
    const series = c.configs.map((cfg) => ({ name: cfg, color: colors.get(cfg) }));
    const points = [];
    c.configs.forEach((cfg, si) => {
      for (const row of c.rows) {
        const real = m.real(row);
        const sim = m.sim(row, cfg);
        if (!(real > 0 && sim > 0)) continue;
        const s = m.spread(row);
        points.push({ series: si, config: cfg, row, real, sim, ...(s ? { lo: s.min, hi: s.max } : {}) });
      }
    });
    scatter.setData({ series, points });
    scatter.canvas.dataset.points = JSON.stringify(points.map((p) => ({ gpu_config: p.config, kernel_index: p.row.kernel_index, real: p.real, sim: p.sim })));
    scatter.canvas.dataset.measure = measure;
    return points.length;
  }

  return {
    el,
    /** Draws `c` with these measures (the user's pick kept while it is one of them); whether
     * it drew a point. */
    render(c, next) {
      comparison = c;
      const keys = Object.keys(next);
      if (keys.join() !== Object.keys(measures).join()) {
        select.replaceChildren(...keys.map((k) => h("option", { value: k }, next[k].name)));
      }
      measures = next;
      if (!keys.includes(measure)) measure = keys[0] ?? null;
      select.value = measure ?? "";
      label.hidden = !(keys.length > 1 || (pickAlways && keys.length));
      el.hidden = !(measure !== null && draw());
      return !el.hidden;
    },
  };
}

export function comparePictures(model, colors) {
  let comparison = null;

  const timeScatter = scatterPicture(colors, {
    id: "scatter",
    box: "pic-scatter",
    title: "Simulated against real",
    hint: "One point per kernel and config; on the dashed line they agree, in the band they are within 10 %. Bars: the range of the hardware repetitions.",
    pick: "Against real",
  });
  const counterScatter = scatterPicture(colors, {
    id: "counters",
    box: "pic-counters",
    title: "Hardware counters against simulator stats",
    hint: "One point per kernel and config: the hardware counter (the mean of its repetitions) against the kernel's own value of the stats Accel-Sim's correl_mappings.py pairs it with. A kernel with 0 on either side is not drawn.",
    pick: "Counter",
    pickAlways: true,
  });

  const ratios = kernelBars({
    id: "ratio-chart",
    label: "Each config's simulated time over the first config's, per kernel",
    kind: "log",
    baseline: 1,
    axis: (v) => `×${v}`,
    yTitle: "simulated time ÷ first config's",
    rowTitle: kernelTitle,
    valueText: (p) => p?.text ?? NONE,
  });
  const ratiosBox = picture("pic-ratios", "Config against config", "", ratios);

  const spread = kernelBars({
    id: "spread-chart",
    label: "How far each config's replicas are from their median, per kernel",
    mark: "dot",
    axis: (v) => percent(v),
    yTitle: "replica ÷ median − 1",
    rowTitle: kernelTitle,
    valueText: (p) => p?.text ?? NONE,
  });
  const spreadBox = picture("pic-spread", "Across replicas", "", spread);

  function drawRatios() {
    const c = comparison;
    const [base, ...others] = c.configs;
    const rows = c.rows.filter((r) => r.sim_ns[base] > 0);
    ratiosBox.querySelector(".hint").textContent = `Per kernel, each config's simulated time over ${base}'s (medians over replicas), as cascade compare gives totals: above ×1 it takes longer, below it is faster.`;
    const series = others.map((cfg) => ({
      name: cfg,
      color: colors.get(cfg),
      values: rows.map((r) => {
        const t = r.sim_ns[cfg];
        return t > 0 ? { v: t / r.sim_ns[base], text: `×${fixed(t / r.sim_ns[base], 3)} (${precise(t)} against ${precise(r.sim_ns[base])})` } : null;
      }),
    }));
    ratios.setData({ rows, series });
    ratios.canvas.dataset.ratios = JSON.stringify(series.flatMap((s) => s.values.map((p, i) => (p ? { gpu_config: s.name, kernel_index: rows[i].kernel_index, ratio: p.v } : null)).filter(Boolean)));
    return rows.length > 0 && others.length > 0;
  }

  /** Per config of the comparison `c` (a config whose replicas ran files of several digests
   * by their labels, which are never pooled) and kernel index, the times of the replicas that finished it. */
  function replicaTimes(c) {
    const times = new Map(); // config -> kernel_index -> [ns]
    for (const sim of model.orderedSims().filter((s) => !s.reference_for)) { // a reference is no replica (as in /comparison)
      const cfg = c.config_labels?.[sim.id] ?? sim.gpu_config;
      if (!times.has(cfg)) times.set(cfg, new Map());
      for (const k of model.kernels.get(sim.id) ?? []) {
        if (!k) continue;
        const byKernel = times.get(cfg);
        if (!byKernel.has(k.kernel_index)) byKernel.set(k.kernel_index, []);
        byKernel.get(k.kernel_index).push(k.sim_time_ns);
      }
    }
    return times;
  }

  function drawSpread() {
    const c = comparison;
    const times = replicaTimes(c);
    const configs = c.configs.filter((cfg) => [...(times.get(cfg)?.values() ?? [])].some((t) => t.length > 1));
    const drawn = [];
    let widest = 0;
    const series = configs.map((cfg) => ({
      name: cfg,
      color: colors.get(cfg),
      values: c.rows.map((r) => {
        const t = times.get(cfg).get(r.kernel_index) ?? [];
        if (t.length < 2) return null;
        const mid = median(t);
        const [lo, hi] = [Math.min(...t), Math.max(...t)];
        drawn.push({ gpu_config: cfg, kernel_index: r.kernel_index, replicas: t.length, min_ns: lo, median_ns: mid, max_ns: hi });
        const off = (x) => (mid > 0 ? (x / mid - 1) * 100 : 0);
        widest = Math.max(widest, off(hi), -off(lo));
        return { v: 0, lo: off(lo), hi: off(hi), text: `${precise(lo)} to ${precise(hi)}, median ${precise(mid)} (${t.length} replicas)` };
      }),
    }));
    const one = c.configs.filter((cfg) => !configs.includes(cfg));
    spreadBox.querySelector(".hint").textContent = [
      "Per kernel, the range of each config's replicas around their median time (the dot).",
      drawn.length ? (widest > 0 ? `The widest: ${percent(widest)} from the median.` : "Every replica took the same time on every kernel.") : "",
      one.length ? `${one.join(", ")}: one replica, no spread.` : "",
    ].filter(Boolean).join(" ");
    spread.setData({ rows: c.rows, series });
    spread.canvas.dataset.spread = JSON.stringify(drawn);
    return drawn.length > 0;
  }

  return {
    el: h("div", { class: "pictures" }, timeScatter.el, counterScatter.el, ratiosBox, spreadBox),
    render(next) {
      comparison = next;
      const cycles = next.rows.some((r) => r.real_cycles !== undefined && r.real_cycles !== null);
      timeScatter.render(next, next.has_real_timing ? (cycles ? MEASURES : { time: MEASURES.time }) : {});
      counterScatter.render(next, counterMeasures(next));
      ratiosBox.hidden = !(next.configs.length > 1 && drawRatios());
      spreadBox.hidden = !drawSpread();
    },
  };
}

// The Compare tab. Per kernel row (GET /comparison: the median over each config's replicas),
// configs side by side as pictures (pictures.js: simulated against real, config against
// config, the spread of replicas) and a table; with real timing, simulated vs real with the
// error per kernel, the spread of the hardware repetitions, and each config's scores as the
// API computes them (Accel-Sim's plot-correlation.py numbers), against real time and against
// real cycles. For traces with a step timeline: per-step wall and GPU time, and TTFT / ITL /
// e2e, real vs simulated per config (the median over its replicas). Fast sims with a reference
// first, against it (reference.js); a reference is no replica of its config here. Refetched as kernels finish.

import { api, enc, saveBlob } from "../api.js";
import { counted, duration, fixed, integer, ms, NONE, percent, precise } from "../format.js";
import { clear, failure, h, loading, state, throttle } from "../dom.js";
import { lineChart } from "../chart.js";
import { errorPct, median } from "../stats.js";
import { colorMap, cssVar } from "../palette.js";
import { virtualTable } from "../vtable.js";
import { comparePictures } from "./pictures.js";
import { referencePanel } from "./reference.js";

// A config's scores against real values (Comparison.correlation), in plot-correlation.py's names.
const SCORES = [
  ["kernels", "Kernels", integer],
  ["correl", "Correl", (x) => fixed(x, 4)],
  ["err_pct", "Err", percent],
  ["agg_err_pct", "Agg_Err", percent],
  ["rpd_pct", "RPD", percent],
  ["nrmse", "NRMSE", (x) => fixed(x, 2)],
  ["err_under_1pct", "< 1 %", integer],
  ["err_under_10pct", "< 10 %", integer],
  ["over", "Over", integer],
  ["under", "Under", integer],
];

const REQUEST_METRICS = [
  ["ttft_ms", "TTFT"],
  ["itl_ms_mean", "ITL mean"],
  ["itl_ms_p50", "ITL p50"],
  ["e2e_ms", "End to end"],
];

// Under this share of kernels simulated, a step timeline is mostly measured time: its errors
// are small by construction and say little about the simulator.
const FEW_SIMULATED = 0.05;

/** The caveat for a config's step-timeline errors when it simulated few kernels, else null. */
function coverageCaveat(cfg, { kernels, gpuTime }) {
  if (!(kernels < FEW_SIMULATED)) return null;
  return h(
    "p",
    { class: "caveat", role: "note", dataset: { config: cfg, kernelFraction: kernels } },
    `Only ${percent(100 * kernels)} of kernels (${percent(100 * gpuTime)} of GPU time) were simulated; the rest keep their measured times, so these errors are small by construction.`,
  );
}

/** Per config, its scores against real values, one row each, under a heading that stays in
 * view while the table scrolls sideways on a narrow screen; with `counter`, the rows are
 * each counter's configs (`scores`: the comparison's `counters`), the counter first. */
function scoresTable(id, title, scores, counter = false) {
  const rows = counter
    ? Object.entries(scores).flatMap(([name, k]) => Object.entries(k.correlation).map(([cfg, s]) => ({ cfg, s, name, label: k.label })))
    : Object.entries(scores).map(([cfg, s]) => ({ cfg, s }));
  const zeros = Math.max(0, ...rows.map((r) => r.s.hw_zero));
  const note = zeros ? ` · ${counted(zeros, "kernel")} with a real value of 0 left out` : "";
  return [
    h("p", { class: "table-title", id: `${id}-title` }, title, h("span", { class: "muted" }, note)),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "table compact", id, "aria-labelledby": `${id}-title` },
        h(
          "thead",
          {},
          h("tr", {}, counter ? h("th", { scope: "col" }, "Counter") : null, h("th", { scope: "col" }, "Config"), SCORES.map(([, name]) => h("th", { scope: "col", class: "num" }, name))),
        ),
        h(
          "tbody",
          {},
          rows.map(({ cfg, s, name, label }) =>
            h(
              "tr",
              { dataset: counter ? { config: cfg, counter: name } : { config: cfg } },
              counter ? h("th", { scope: "row" }, label) : null,
              h(counter ? "td" : "th", counter ? { class: "mono" } : { scope: "row", class: "mono" }, cfg),
              SCORES.map(([key, , show]) => h("td", { class: "num", dataset: { score: key, value: s[key] ?? "" } }, show(s[key]))),
            ),
          ),
        ),
      ),
    ),
  ];
}

/** How far a kernel's hardware repetitions went above and below their mean, as
 * plot-correlation.py labels its error bars: "+3.10 % / −2.90 %". */
function rangeCell(mean, spread) {
  if (!spread || !mean) return NONE;
  const title = `${spread.repeats} repetitions: ${precise(spread.min)} to ${precise(spread.max)}, σ ${precise(spread.stddev)}`;
  return h("span", { class: "muted", title }, `+${percent(((spread.max - mean) / mean) * 100)} / −${percent(((mean - spread.min) / mean) * 100)}`);
}

function errCell(pct) {
  if (pct === null || pct === undefined) return NONE;
  const cls = Math.abs(pct) <= 10 ? "err-ok" : Math.abs(pct) <= 25 ? "err-warn" : "err-bad";
  return h("span", { class: cls }, percent(pct, { signed: true }));
}

export function mountCompare(el, model) {
  let comparison = null;
  let timelines = null;
  let succeeded = -1;
  const kernelsBody = h("div", {}, loading("Loading the comparison…"));
  const stepsBody = h("div", {});
  const colors = colorMap();
  const pictures = comparePictures(model, colors);
  const table = virtualTable({ id: "compare-table", label: "Time per kernel row", columns: [], rowData: (r) => ({ kernelIndex: r.kernel_index }) });
  const references = referencePanel(model);
  const csv = h(
    "button",
    { class: "btn btn-small", type: "button", id: "compare-csv", disabled: true, title: "The table below, every row, as CSV", onclick: () => saveBlob(new Blob([comparisonCsv(comparison)], { type: "text/csv" }), `${model.id}-compare.csv`) },
    "CSV",
  );
  el.append(
    references.el,
    h("section", { class: "panel", "aria-labelledby": "cmp-kernels" }, h("div", { class: "toolbar" }, h("h2", { id: "cmp-kernels" }, "Kernels"), csv), kernelsBody),
    stepsBody,
  );

  // Totals and ratios are over the kernel rows every config has, as cascade compare's are: a
  // config ahead of another is not shown as the slower one.
  function summaries(c) {
    const base = c.configs[0];
    const common = c.rows.filter((r) => c.configs.every((cfg) => r.sim_ns[cfg] !== null && r.sim_ns[cfg] !== undefined));
    const total = (cfg) => common.reduce((a, r) => a + r.sim_ns[cfg], 0);
    return c.configs.map((cfg) => {
      const done = c.rows.filter((r) => r.sim_ns[cfg] !== null && r.sim_ns[cfg] !== undefined);
      const scores = c.correlation?.[cfg] ?? null;
      return { cfg, total: total(cfg), kernels: done.length, vsBase: cfg !== base && total(base) > 0 ? total(cfg) / total(base) : null, scores };
    });
  }

  function summaryCards(c) {
    return h(
      "div",
      { class: "cards", id: "compare-summary" },
      summaries(c).map((s) =>
        h(
          "article",
          { class: "card stat-card", dataset: { config: s.cfg, total: s.total } },
          h("h3", { class: "mono" }, s.cfg),
          h(
            "dl",
            { class: "stats" },
            h("dt", {}, "Simulated total"), h("dd", {}, duration(s.total)),
            h("dt", {}, "Kernel rows"), h("dd", {}, `${integer(s.kernels)} of ${integer(c.rows.length)}`),
            s.vsBase !== null ? [h("dt", {}, `vs ${c.configs[0]}`), h("dd", {}, `×${fixed(s.vsBase, 3)}`)] : null,
            s.scores ? [
              h("dt", {}, "Err (mean abs.)"), h("dd", {}, percent(s.scores.err_pct)),
              h("dt", {}, "Correl"), h("dd", {}, fixed(s.scores.correl, 4)),
              h("dt", {}, "Within 10 %"), h("dd", {}, `${integer(s.scores.err_under_10pct)} of ${integer(s.scores.kernels)}`),
            ] : null,
          ),
        ),
      ),
    );
  }

  /** While the run is active, or a config lacks rows another has (Comparison.partial). */
  function partialNotice(c) {
    if (!c.partial) return null;
    const text = `Partial: ${integer(c.kernels_compared)} of ${integer(c.kernels_total)} kernels finished by every config. The totals and ratios below are over those.`;
    return h("p", { class: "notice notice-warn", id: "compare-partial", role: "status", dataset: { kernels: c.kernels_compared } }, text);
  }

  function columns(c) {
    const real = c.has_real_timing;
    const base = c.configs[0];
    const cols = [
      { title: "#", width: "3.5rem", num: true, cell: (r) => r.kernel_index },
      { title: "Kernel", width: "minmax(10rem,2fr)", cell: (r) => h("span", { class: "mono", title: r.kernel_name }, r.kernel_short_name) },
    ];
    if (real) cols.push({ title: "Real", width: "6.5rem", num: true, cell: (r) => precise(r.real_ns), data: (r) => ({ "data-real-ns": r.real_ns ?? "" }) });
    if (c.rows.some((r) => r.real_ns_spread)) {
      cols.push({
        title: "Real range",
        width: "9.5rem",
        num: true,
        cell: (r) => rangeCell(r.real_ns, r.real_ns_spread),
        data: (r) => ({ "data-real-min": r.real_ns_spread?.min ?? "", "data-real-max": r.real_ns_spread?.max ?? "" }),
      });
    }
    for (const cfg of c.configs) {
      cols.push({ title: cfg, width: "minmax(7rem,1fr)", num: true, cell: (r) => precise(r.sim_ns[cfg]), data: (r) => ({ "data-config": cfg, "data-ns": r.sim_ns[cfg] ?? "" }) });
      if (real) cols.push({ title: "Error", width: "5.5rem", num: true, cell: (r) => errCell(errorPct(r.sim_ns[cfg], r.real_ns)) });
      else if (cfg !== base) cols.push({ title: `vs ${base}`, width: "6rem", num: true, cell: (r) => errCell(errorPct(r.sim_ns[cfg], r.sim_ns[base])) });
    }
    return cols;
  }

  function renderKernels() {
    const c = comparison;
    if (!c.rows.length) {
      return clear(kernelsBody, state("empty", model.active ? "No kernel has finished yet." : "No sim finished a kernel.", "Rows appear as the sims finish kernels."));
    }
    c.configs.forEach((cfg) => colors.get(cfg)); // in the order of the run's entries
    const above = [
      c.has_real_timing ? null : h("p", { class: "hint pad" }, "This trace has no real timing: configs are compared with each other."),
      partialNotice(c),
      summaryCards(c),
      c.correlation ? scoresTable("correlation-table", "Against real time, as Accel-Sim's plot-correlation.py scores it", c.correlation) : null,
      c.cycles_correlation ? scoresTable("cycles-correlation-table", "Against real cycles (simulated gpu_sim_cycle)", c.cycles_correlation) : null,
      c.counters ? scoresTable("counters-correlation-table", "Hardware counters against the simulator stats correl_mappings.py pairs them with", c.counters, true) : null,
    ];
    if (pictures.el.parentNode === kernelsBody) {
      // The pictures and the table stay in place, so a refresh takes no focus from a chart
      // a person moves through with the keys (a detached canvas loses it, and its tip).
      while (kernelsBody.firstChild !== pictures.el) kernelsBody.firstChild.remove();
      pictures.el.before(...above.flat(Infinity).filter(Boolean));
    } else {
      clear(kernelsBody, ...above, pictures.el, table.el);
    }
    pictures.render(c);
    table.setColumns(columns(c));
    table.setRows(c.rows);
    csv.disabled = false;
  }

  async function loadComparison() {
    try {
      comparison = await api(`/api/runs/${enc(model.id)}/comparison`);
      renderKernels();
    } catch (err) {
      if (!comparison) clear(kernelsBody, failure(err, loadComparison));
    }
  }

  // --- step timeline ---

  /** Timelines by config, a config whose replicas ran files of several digests by its
   * label (`NAME@1a4911`, as the comparison lists it): those are never pooled. */
  function byConfig(list) {
    const groups = new Map();
    for (const t of list) {
      const cfg = t.config_label ?? t.gpu_config;
      if (!groups.has(cfg)) groups.set(cfg, []);
      groups.get(cfg).push(t);
    }
    return groups;
  }

  /** The median over a config's replicas of `pick(timeline)`. */
  const med = (group, pick) => median(group.map(pick));

  function renderSteps() {
    if (!model.run.trace?.has_step_timeline) return clear(stepsBody);
    const panel = (...children) =>
      clear(stepsBody, h("section", { class: "panel", "aria-labelledby": "cmp-steps" }, h("div", { class: "toolbar" }, h("h2", { id: "cmp-steps" }, "Serving steps")), ...children));
    if (timelines === null) return panel(loading("Loading step timing…"));
    if (!timelines.length) return panel(state("empty", "No step timing yet.", "A sim sends it once it succeeds."));
    const groups = byConfig(timelines);
    const configs = [...groups.keys()];
    const first = timelines[0];
    const coverage = new Map(
      configs.map((cfg) => {
        const cov = (k) => med(groups.get(cfg), (t) => t.simulated.summary?.simulation?.coverage?.[k]) ?? NaN;
        return [cfg, { kernels: cov("kernel_fraction"), gpuTime: cov("gpu_time_fraction") }];
      }),
    );
    const few = configs.filter((cfg) => coverage.get(cfg).kernels < FEW_SIMULATED);

    const requestRows = first.compare.requests.flatMap((req, ri) =>
      REQUEST_METRICS.map(([key, name]) => ({ repeat: req.repeat, key, name, real: req[key].real, sims: configs.map((cfg) => med(groups.get(cfg), (t) => t.compare.requests[ri]?.[key]?.simulated)) })),
    );
    const requests = h(
      "table",
      { class: "table compact", id: "requests-table" },
      h(
        "caption",
        {},
        "Requests: real vs simulated",
        few.map((cfg) => h("p", { class: "caveat", role: "note", dataset: { config: cfg } }, `${cfg} simulated only ${percent(100 * coverage.get(cfg).kernels)} of kernels: its errors here are mostly measured time.`)),
      ),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Metric"), h("th", { scope: "col", class: "num" }, "Real"), configs.map((c) => [h("th", { scope: "col", class: "num mono" }, c), h("th", { scope: "col", class: "num" }, "Error")]))),
      h(
        "tbody",
        {},
        requestRows.map((r) =>
          h(
            "tr",
            { dataset: { metric: r.key, repeat: r.repeat } },
            h("th", { scope: "row" }, r.name, first.compare.requests.length > 1 ? h("span", { class: "muted" }, ` · repeat ${r.repeat}`) : null),
            h("td", { class: "num" }, ms(r.real)),
            r.sims.map((v, i) => [h("td", { class: "num", dataset: { config: configs[i], ms: v ?? "" } }, ms(v)), h("td", { class: "num" }, errCell(errorPct(v, r.real)))]),
          ),
        ),
      ),
    );

    const steps = first.compare.steps;
    const repeats = new Set(steps.map((s) => s.repeat)).size > 1;
    const stepCols = [
      { title: "Step", width: "5rem", cell: (s) => (repeats ? `${s.repeat}.${s.step}` : s.step) },
      { title: "Kind", width: "5.5rem", cell: (s) => s.kind },
      { title: "Real wall", width: "6.5rem", num: true, cell: (s) => precise(s.wall_ns.real) },
      ...configs.map((cfg) => ({ title: `${cfg} wall`, width: "minmax(8rem,1fr)", num: true, cell: (s, i) => simWithError(med(groups.get(cfg), (t) => t.compare.steps[i]?.wall_ns.simulated), s.wall_ns.real) })),
      { title: "Real GPU", width: "6.5rem", num: true, cell: (s) => precise(s.gpu_busy_ns.real) },
      ...configs.map((cfg) => ({ title: `${cfg} GPU`, width: "minmax(8rem,1fr)", num: true, cell: (s, i) => simWithError(med(groups.get(cfg), (t) => t.compare.steps[i]?.gpu_busy_ns.simulated), s.gpu_busy_ns.real) })),
    ];
    const stepTable = virtualTable({ id: "steps-table", label: "Per-step wall and GPU time", columns: stepCols, maxHeight: 360 });
    stepTable.setRows(steps);
    const stepChart = lineChart({
      id: "steps-chart", label: "Wall time per step, real and simulated", height: 200, rowTitle: (i) => `Step ${steps[i].step} (${steps[i].kind})`,
      xTitle: "step (index)", yTitle: "wall time",
    });
    const colors = colorMap();
    stepChart.setData({
      rows: steps.length,
      series: [
        { name: "Real wall", color: cssVar("--text"), dashed: true, values: steps.map((s) => s.wall_ns.real) },
        ...configs.map((cfg) => ({ name: `${cfg} wall`, color: colors.get(cfg), values: steps.map((_, i) => med(groups.get(cfg), (t) => t.compare.steps[i]?.wall_ns.simulated)) })),
      ],
    });

    const cards = h(
      "div",
      { class: "cards", id: "steps-summary" },
      configs.map((cfg) => {
        const g = groups.get(cfg);
        const { kernels, gpuTime } = coverage.get(cfg);
        return h(
          "article",
          { class: "card stat-card", dataset: { config: cfg } },
          h("h3", { class: "mono" }, cfg, h("span", { class: "muted" }, ` · ${g.length} replica${g.length === 1 ? "" : "s"}`)),
          h(
            "dl",
            { class: "stats" },
            h("dt", {}, "Wall, mean abs. error"), h("dd", {}, percent(med(g, (t) => t.compare.summary?.wall_ns?.mean_abs_error_pct))),
            h("dt", {}, "GPU, mean abs. error"), h("dd", {}, percent(med(g, (t) => t.compare.summary?.gpu_busy_ns?.mean_abs_error_pct))),
            h("dt", {}, "Kernels simulated"), h("dd", {}, percent(100 * kernels)),
            h("dt", {}, "GPU time simulated"), h("dd", {}, percent(100 * gpuTime)),
          ),
          coverageCaveat(cfg, coverage.get(cfg)),
        );
      }),
    );
    panel(
      h("p", { class: "hint pad" }, `${first.simulated.meta?.model ?? "Model"} on ${first.simulated.meta?.gpu_name ?? "the traced GPU"}: the measured serving run with each simulated kernel's time in place of its measured one. Medians over each config's replicas.`),
      cards,
      h("div", { class: "table-wrap" }, requests),
      h("h3", { class: "sub" }, "Steps"),
      stepChart.el,
      stepTable.el,
    );
  }

  function simWithError(sim, real) {
    return h("span", {}, precise(sim), " ", h("small", {}, errCell(errorPct(sim, real))));
  }

  async function loadTimelines() {
    if (!model.run.trace?.has_step_timeline) return;
    try {
      timelines = await api(`/api/runs/${enc(model.id)}/step-timelines`);
      renderSteps();
    } catch (err) {
      clear(stepsBody, failure(err, loadTimelines));
    }
  }

  function countSucceeded() {
    return [...model.sims.values()].filter((s) => s.state === "succeeded").length;
  }

  const refresh = throttle(loadComparison, 1500);
  const refreshReferences = throttle(references.refresh, 1500);
  loadComparison();
  references.refresh();
  renderSteps();
  succeeded = countSucceeded();
  loadTimelines();
  return {
    changed(what) {
      if (what.has("kernels") || what.has("run")) refresh();
      if (what.has("kernels") || what.has("sims")) refreshReferences();
      if (what.has("sims") && countSucceeded() !== succeeded) {
        succeeded = countSucceeded();
        loadTimelines();
      }
    },
    destroy: () => {
      refresh.cancel();
      refreshReferences.cancel();
    },
  };
}

/**
 * The comparison's rows as CSV, every value as the API gives it (nanoseconds, unrounded):
 * kernel_index, kernel_name, real_ns, then each config's simulated ns; a kernel name is
 * quoted, for template arguments hold commas.
 */
export function comparisonCsv(c) {
  const quoted = (text) => `"${String(text).replaceAll('"', '""')}"`;
  const value = (v) => (v === null || v === undefined ? "" : String(v));
  const header = ["kernel_index", "kernel_name", "real_ns", ...c.configs.map((cfg) => `${cfg}_sim_ns`)].map(quoted);
  const rows = c.rows.map((r) => [String(r.kernel_index), quoted(r.kernel_name), value(r.real_ns), ...c.configs.map((cfg) => value(r.sim_ns[cfg]))]);
  return [header, ...rows].map((cells) => cells.join(",")).join("\n") + "\n";
}

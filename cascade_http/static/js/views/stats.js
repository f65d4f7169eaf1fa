// The Stats tab: any stat of the run's kernels, found by searching the names they have (GET
// /stats?q=, the catalogue), then drawn from GET /stats/values?name=: per kernel and config
// as bars (the median over replicas, whiskers to the least and greatest), or, for a per-unit
// table (a name with [*]: L2_cache_bank[*].Miss_rate), as heatmaps: kernels by unit, or for
// tables of two indices (dram[*][*]) the first by the rest for one kernel. The name chosen is
// in the page's address (?name=), so it can be shared. Canvases hold what they drew as JSON:
// data-bars, data-cells. Values are each kernel's own: a stat the log prints as a running
// total since the simulation started is shown less the launch before, its total beside it.
// A unit's number is an index however the log spells it: dram[2], Memory Partition 2, bk2.
// Above them, the derived metrics (statsderived.js).

import { api, enc } from "../api.js";
import { counted, integer, NONE, number } from "../format.js";
import { clear, failure, h, loading, markCurrent, state, throttle } from "../dom.js";
import { colorMap } from "../palette.js";
import { kernelBars } from "../bars.js";
import { heatmap } from "../heatmap.js";
import { virtualTable } from "../vtable.js";
import { derivedPanel } from "./statsderived.js";

const ANY = "[*]";
// As the server reads a unit's number (projections/queries/stats.py): bracketed, or ending a
// part of the name after a space or a letter.
const INDEX = /\[[0-9]+\]|(?<=[A-Za-z ])[0-9]+(?=\.|$)/g;
const escaped = (text) => text.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
const SEARCH_MS = 250;

const kernelTitle = (r) => `#${r.kernel_index} ${r.kernel_short_name}`;
const unitText = (units) => units.map((u) => `[${u}]`).join("");
const range = (r) => (r.min === r.max ? number(r.min) : `${number(r.min)} to ${number(r.max)}`);

export function mountStats(el, model, query) {
  let searching = null; // the AbortController of the catalogue request in flight
  let name = query?.get("name") ?? "";
  let values = null;
  let kernel = null; // the kernel a two-index table shows
  const colors = colorMap();

  const search = h("input", { type: "search", id: "stat-search", placeholder: "gpu_ipc, Miss_rate, dram[*][*] …", autocomplete: "off", spellcheck: "false", "aria-describedby": "stat-count", "aria-controls": "stat-results" });
  const count = h("span", { class: "muted", id: "stat-count", role: "status" });
  const results = h("div", { class: "stat-results", id: "stat-results" }, loading("Loading the stats' names…"));
  const view = h("div", { id: "stat-view" });
  const derived = derivedPanel(model);
  el.append(
    derived.el,
    h(
      "section",
      { class: "panel", "aria-labelledby": "stats-title" },
      h("div", { class: "toolbar" }, h("h2", { id: "stats-title" }, "Stats"), h("label", { class: "inline stat-search" }, "Find", search), count),
      results,
    ),
    h("section", { class: "panel", "aria-label": "The stat chosen" }, view),
  );

  function choose(next) {
    location.hash = `#/runs/${enc(model.id)}/stats?name=${enc(next)}`;
  }

  function nameButton(text, note, data) {
    return h("li", { dataset: data }, h("button", { type: "button", class: "stat-pick", dataset: { stat: text }, onclick: () => choose(text), "aria-current": text === name ? "page" : null }, h("span", { class: "mono" }, text), h("span", { class: "muted small", title: data.name ? "Kernels that have it, per config" : null }, note)));
  }

  function showCatalogue(cat) {
    count.textContent = `${counted(cat.names.length, "name")}${cat.truncated ? " shown: more match, say more of the name" : ""}, ${counted(cat.tables.length, "per-unit table")}`;
    if (!cat.names.length) {
      if (search.value) return clear(results, state("empty", `No stat's name holds “${search.value}”.`, "Names are as the simulator prints them (docs/stats-naming.md); [*] stands for any index."));
      return clear(results, state("empty", model.active && !model.kernelCount ? "No kernel has finished yet." : "The kernels' results carry no stats."));
    }
    clear(
      results,
      cat.tables.length ? h("p", { class: "group-title" }, "Per-unit tables") : null,
      cat.tables.length ? h("ul", { class: "stat-list", id: "stat-tables" }, cat.tables.map((t) => nameButton(t.name, ` ${counted(t.stats, "name")}`, { table: t.name }))) : null,
      h("p", { class: "group-title" }, "Names"),
      h("ul", { class: "stat-list", id: "stat-names" }, cat.names.map((n) => nameButton(n.name, ` ${Object.entries(n.kernels).map(([cfg, k]) => `${cfg} ${integer(k)}`).join(" · ")}`, { name: n.name }))),
    );
  }

  async function loadCatalogue() {
    searching?.abort();
    const mine = (searching = new AbortController());
    try {
      const cat = await api(`/api/runs/${enc(model.id)}/stats?q=${enc(search.value)}`, { signal: mine.signal });
      if (mine === searching) showCatalogue(cat);
    } catch (err) {
      if (err.name !== "AbortError" && mine === searching) clear(results, failure(err, loadCatalogue));
    }
  }

  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(loadCatalogue, SEARCH_MS);
  });

  // --- one stat ---

  const bars = kernelBars({
    id: "stat-bars", label: "The stat per kernel and config", yTitle: () => `${name} (median of replicas)`, rowTitle: kernelTitle, axis: number,
    valueText: (p) => p?.text ?? NONE,
  });
  const valuesTable = virtualTable({ id: "stat-table", label: "The stat's values", columns: [], rowData: (r) => ({ kernelIndex: r.kernel_index, config: r.gpu_config }) });

  function columns(withUnits, withTotals) {
    return [
      { title: "#", width: "3.5rem", num: true, cell: (r) => r.kernel_index },
      { title: "Kernel", width: "minmax(9rem,2fr)", cell: (r) => h("span", { class: "mono", title: r.kernel_name }, r.kernel_short_name) },
      { title: "Config", width: "minmax(8rem,1fr)", cell: (r) => h("span", { class: "mono" }, r.gpu_config) },
      ...(withUnits ? [{ title: "Unit", width: "6rem", cell: (r) => h("span", { class: "mono" }, unitText(r.units)) }] : []),
      { title: "Median", width: "7rem", num: true, cell: (r) => number(r.median), data: (r) => ({ "data-median": r.median ?? "" }) },
      { title: "Range", width: "minmax(9rem,1fr)", num: true, cell: (r) => (r.median === null ? NONE : range(r)) },
      ...(withTotals ? [{ title: "Running total", width: "8rem", num: true, cell: (r) => number(r.running_total), data: (r) => ({ "data-running-total": r.running_total ?? "" }) }] : []),
      { title: "Replicas", width: "5.5rem", num: true, cell: (r) => r.replicas },
    ];
  }

  /** The kernels the answer has, in order, with their names. */
  function kernelsOf(rows) {
    const seen = new Map();
    for (const r of rows) if (!seen.has(r.kernel_index)) seen.set(r.kernel_index, { kernel_index: r.kernel_index, kernel_name: r.kernel_name, kernel_short_name: r.kernel_short_name });
    return [...seen.values()];
  }

  function drawBars(v) {
    const kernels = kernelsOf(v.rows);
    const at = new Map(kernels.map((k, i) => [k.kernel_index, i]));
    const series = v.configs.map((cfg) => {
      const values = kernels.map(() => null);
      for (const r of v.rows) {
        if (r.gpu_config === cfg && r.median !== null) values[at.get(r.kernel_index)] = { v: r.median, lo: r.min, hi: r.max, text: `${number(r.median)}${r.replicas > 1 ? ` (${range(r)}, ${r.replicas} replicas)` : ""}` };
      }
      return { name: cfg, color: colors.get(cfg), values };
    });
    bars.setData({ rows: kernels, series: series.filter((s) => s.values.some(Boolean)) });
    bars.canvas.dataset.bars = JSON.stringify(v.rows.filter((r) => r.median !== null).map((r) => ({ kernel_index: r.kernel_index, gpu_config: r.gpu_config, median: r.median, min: r.min, max: r.max })));
    return bars.el;
  }

  function cellTip(cfg, r, cell) {
    if (!cell) return [`${cfg} · ${r}`, [["Value", "not in this kernel's stats"]]];
    return [
      `${cfg} · ${kernelTitle(cell)}`,
      [
        ["Name", h("span", { class: "mono wrap" }, cell.stat)],
        ["Median", cell.median === null ? "no number (nan, inf or none)" : number(cell.median)],
        ...(cell.replicas > 1 && cell.median !== null ? [["Range", range(cell)]] : []),
        ["Replicas", cell.replicas],
      ],
    ];
  }

  /** Per config, a heatmap of `cells(rows of that config)` -> { rows, cols, cells }, one colour range for all. */
  function heatmaps(v, layout) {
    const finite = v.rows.map((r) => r.median).filter((m) => m !== null);
    const shared = finite.length ? [Math.min(...finite), Math.max(...finite)] : undefined;
    return v.configs.map((cfg, i) => {
      const mine = v.rows.filter((r) => r.gpu_config === cfg);
      if (!mine.length) return null;
      const grid = layout(mine);
      const map = heatmap({ id: `stat-heat-${i}`, label: `${v.name} on ${cfg}`, valueText: number, tip: (r, c, cell) => cellTip(cfg, grid.rows[r], cell) });
      map.setData({ rows: grid.rows, cols: grid.cols, cells: grid.cells.map((row) => row.map((cell) => cell && { ...cell, v: cell.median })) }, shared);
      map.canvas.dataset.config = cfg;
      map.canvas.dataset.cells = JSON.stringify(grid.cells.flat().filter(Boolean).map((c) => ({ kernel_index: c.kernel_index, gpu_config: cfg, units: c.units, median: c.median })));
      return h("div", { class: "heat", dataset: { config: cfg } }, h("h3", { class: "sub mono" }, cfg), map.el);
    });
  }

  /** Rows keyed by `rowKey` against columns keyed by `colKey` (keys: indices joined by
   * commas), each in the order of their indices; a row is named by `rowLabel(its first row)`. */
  function grid(rows, rowKey, colKey, rowLabel) {
    const cmp = (a, b) => a.split(",").map(Number).reduce((d, x, i) => d || x - Number(b.split(",")[i]), 0);
    const first = new Map();
    const at = new Map();
    for (const r of rows) {
      if (!first.has(rowKey(r))) first.set(rowKey(r), r);
      at.set(`${rowKey(r)}|${colKey(r)}`, r);
    }
    const rk = [...first.keys()].sort(cmp);
    const ck = [...new Set(rows.map(colKey))].sort(cmp);
    return { rows: rk.map((k) => rowLabel(first.get(k))), cols: ck, cells: rk.map((r) => ck.map((c) => at.get(`${r}|${c}`) ?? null)) };
  }

  function stars(n) {
    return (n.match(/\[\*\]/g) ?? []).length;
  }

  function renderValues() {
    const v = values;
    const withStats = v.rows.map((r) => ({ ...r, stat: statName(v, r) }));
    const parts = [];
    const units = name.replace(INDEX, ANY);
    parts.push(
      h(
        "div",
        { class: "stat-head" },
        h("h2", { class: "mono", id: "stat-title" }, v.name),
        h("p", { class: "muted" }, `${counted(kernelsOf(v.rows).length, "kernel")} · ${v.configs.join(", ")}${stars(v.name) ? ` · ${counted(v.stats.length, "name")}` : ""}${v.truncated ? " · the first rows only" : ""}`),
        !stars(name) && units !== name ? h("p", {}, h("button", { type: "button", class: "btn btn-small", id: "stat-all-units", onclick: () => choose(units) }, "Every unit: ", h("span", { class: "mono" }, units))) : null,
      ),
    );
    if (!v.rows.length) {
      parts.push(state("empty", `No kernel of this run has ${v.name}.`, "Pick another name above."));
      return clear(view, parts);
    }
    const totals = v.rows.some((r) => r.running_total !== null && r.running_total !== undefined);
    if (totals) parts.push(h("p", { class: "hint pad-x", id: "stat-own" }, "Each kernel's own value: the simulator prints this as a total since the simulation started, so each is shown less the launch before. Its total over the sim's launches is the Running total column."));
    const n = stars(v.name);
    let shown = v.rows; // what the table lists: what the pictures show
    if (n === 0) parts.push(v.rows.some((r) => r.median !== null) ? drawBars(v) : state("empty", "No value of it is a number.", "nan, inf, none or text in every kernel: the table lists them."));
    else if (n === 1) {
      parts.push(h("p", { class: "hint pad-x" }, "Kernels down, units across; lighter is more."));
      parts.push(...heatmaps({ ...v, rows: withStats }, (rows) => grid(rows, (r) => String(r.kernel_index), (r) => String(r.units[0]), kernelTitle)).filter(Boolean));
    } else {
      const kernels = kernelsOf(v.rows);
      if (kernel === null || !kernels.some((k) => k.kernel_index === kernel)) kernel = kernels[0].kernel_index;
      const pick = h("select", { id: "stat-kernel", "aria-label": "Kernel" }, kernels.map((k) => h("option", { value: k.kernel_index, selected: k.kernel_index === kernel }, kernelTitle(k))));
      pick.addEventListener("change", () => {
        kernel = Number(pick.value);
        renderValues();
      });
      parts.push(h("div", { class: "pad-x stat-kernel" }, h("label", { class: "inline" }, "Kernel", pick), h("span", { class: "hint" }, `Rows: the first index; columns: the ${n > 2 ? "others" : "second"}. Lighter is more.`)));
      shown = withStats.filter((r) => r.kernel_index === kernel);
      parts.push(...heatmaps({ ...v, rows: shown }, (rows) => grid(rows, (r) => String(r.units[0]), (r) => r.units.slice(1).join(","), (r) => `[${r.units[0]}]`)).filter(Boolean));
    }
    valuesTable.setColumns(columns(n > 0, totals));
    valuesTable.setRows(shown);
    parts.push(h("h3", { class: "sub" }, "Values"), valuesTable.el);
    clear(view, parts);
  }

  /** A row's full name: the one of the answer's names whose indices are the row's units. */
  function statName(v, r) {
    const pattern = new RegExp(`^${v.name.split(ANY).map(escaped).join("(?:\\[([0-9]+)\\]|([0-9]+))")}$`);
    const units = (stat) => {
      const m = pattern.exec(stat) ?? [];
      return m.slice(1).filter((x) => x !== undefined).join(",");
    };
    v.byUnits ??= new Map(v.stats.map((stat) => [units(stat), stat]));
    return v.byUnits.get(r.units.join(",")) ?? v.name;
  }

  async function loadValues() {
    if (!name) {
      values = null;
      return clear(view, state("empty", "Pick a stat above.", "Any number the simulator printed for a kernel: search its name, or a table of units such as L2_cache_bank[*].Miss_rate."));
    }
    if (!values || values.name !== name) clear(view, loading(`Loading ${name}…`));
    try {
      const answer = await api(`/api/runs/${enc(model.id)}/stats/values?name=${enc(name)}`);
      if (answer.name !== name) return; // another was chosen meanwhile
      values = answer;
      answer.configs.forEach((cfg) => colors.get(cfg));
      renderValues();
    } catch (err) {
      clear(view, failure(err, loadValues));
    }
  }

  const refresh = throttle(() => {
    loadValues();
    loadCatalogue();
    derived.refresh();
  }, 3000);
  loadCatalogue();
  loadValues();
  return {
    query(next) {
      const chosen = next?.get("name") ?? "";
      if (chosen === name) return;
      name = chosen;
      kernel = null;
      markCurrent(results.querySelectorAll(".stat-pick"), (b) => b.dataset.stat === name);
      loadValues();
    },
    changed(what) {
      if (what.has("kernels") && model.active) refresh();
    },
    destroy() {
      refresh.cancel();
      clearTimeout(typing);
      searching?.abort();
    },
  };
}

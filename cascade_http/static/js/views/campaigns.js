// Campaigns: the list, and one campaign's page: a chosen stat per trace and config (the mean
// of the sims that succeeded having simulated every launch, normalised to a baseline config
// when one is chosen), its curve per trace (against a grid option's value when its configs
// are variants, else over the configs in their order), what differs between each config and
// the reference one (the baseline, else the first), and every sim as Accel-Sim's
// job_status.py lists jobs, each linked to its run. Refreshed every 2 s while the campaign is
// active, every 10 s otherwise.

import { api, enc } from "../api.js";
import { age, compact, counted, dateTime, fixed, integer, NONE, rate } from "../format.js";
import { clear, failure, h, loading, simCounts, state, stateBadge, syncRows } from "../dom.js";
import { colorMap } from "../palette.js";
import { poller } from "../poll.js";
import { cachedMarker } from "./sims.js";

const STATS = ["gpu_tot_sim_cycle", "gpu_tot_ipc", "gpu_tot_sim_insn"]; // offered; any stat's name can be typed
const every = (active) => (active ? 2000 : 10_000);

export function mountCampaigns(el) {
  document.title = "Campaigns · Cascade";
  let campaigns = null;
  const body = h("div", { class: "panel-body" }, loading("Loading campaigns…"));
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "table responsive", id: "campaigns-table" },
    h("caption", { class: "sr-only" }, "Campaigns, newest first"),
    h("thead", {}, h("tr", {}, ["Campaign", "State", "Sims", "Traces", "Configs", "Tags", "Created"].map((t) => h("th", { scope: "col" }, t)))),
    tbody,
  );
  el.append(
    h(
      "div",
      { class: "page" },
      h("div", { class: "page-head" }, h("h1", {}, "Campaigns")),
      h("section", { class: "panel" }, body),
    ),
  );

  function row(c) {
    return h(
      "tr",
      { dataset: { campaign: c.name, state: c.state } },
      h("td", { "data-label": "Campaign" }, h("a", { href: `#/campaigns/${enc(c.name)}`, class: "strong" }, c.name)),
      h("td", { "data-label": "State" }, stateBadge(c.state)),
      h("td", { "data-label": "Sims" }, simCounts(c.sim_counts)),
      h("td", { "data-label": "Traces", class: "mono" }, c.traces.join(", ")),
      h("td", { "data-label": "Configs", class: "mono" }, `${c.configs.join(", ")} ×${c.replicas}`),
      h("td", { "data-label": "Tags" }, tagChips(c.tags)),
      h("td", { "data-label": "Created", title: dateTime(c.created_at) }, age(c.created_at)),
    );
  }

  async function refresh() {
    try {
      campaigns = await api("/api/campaigns");
    } catch (err) {
      if (!campaigns) clear(body, failure(err, () => list.now()));
      throw err;
    }
    if (!campaigns.length) return clear(body, state("empty", "No campaigns yet.", "Create one with cascade sweep --name NAME --trace T --config C, or POST /api/campaigns."));
    if (!body.contains(table)) clear(body, h("div", { class: "table-wrap" }, table));
    syncRows(tbody, campaigns, { key: (c) => c.id, signature: (c) => JSON.stringify(c) + age(c.created_at), render: row });
  }

  const list = poller(refresh, () => every(campaigns?.some((c) => c.state === "active")));
  return { destroy: () => list.stop() };
}

export function tagChips(tags) {
  return (tags ?? []).map((t) => h("span", { class: "tag", dataset: { tag: t } }, t));
}

export function mountCampaign(el, params, query) {
  const key = params.name;
  document.title = `${key} · Campaigns · Cascade`;
  let campaign = null;
  let choice = { stat: query.get("stat") || STATS[0], baseline: query.get("baseline") ?? null, option: query.get("option") ?? null };

  const title = h("h1", {}, key);
  const summary = h("div", { class: "muted", id: "campaign-summary" });
  const statInput = h("input", { id: "campaign-stat", list: "campaign-stats", value: choice.stat, spellcheck: false, autocomplete: "off" });
  const baselineSelect = h("select", { id: "campaign-baseline", onchange: () => choose({ baseline: baselineSelect.value }) });
  const statForm = h(
    "form",
    { class: "toolbar", role: "group", "aria-label": "Stat and baseline", onsubmit: (e) => (e.preventDefault(), choose({ stat: statInput.value.trim() || STATS[0] })) },
    h("label", { class: "inline" }, "Stat", statInput, h("datalist", { id: "campaign-stats" }, STATS.map((s) => h("option", { value: s })))),
    h("button", { class: "btn btn-small", type: "submit" }, "Show"),
    h("label", { class: "inline" }, "Baseline", baselineSelect),
  );
  const tableBody = h("div", { class: "panel-body" }, loading("Loading the campaign…"));
  const optionSelect = h("select", { id: "campaign-option", onchange: () => choose({ option: optionSelect.value }) });
  const optionLabel = h("label", { class: "inline", hidden: true }, "Against", optionSelect);
  const curve = h("div", { class: "panel-body", id: "campaign-curve" });
  const differs = h("div", { class: "panel-body", id: "campaign-differs" });
  const configOptions = new Map(); // config name -> its options ({} for a config that is no variant)
  const diffs = new Map(); // "a\nb" -> the options a and b set differently
  const simsBody = h("tbody");
  const simsTable = h(
    "table",
    { class: "table responsive", id: "campaign-sims" },
    h("caption", { class: "sr-only" }, "Every sim of the campaign, by trace, config and replica"),
    h("thead", {}, h("tr", {}, ["Trace", "Config", "Replica", "State", "Kernels", "Cycles", "Rate", "Run"].map((t) => h("th", { scope: "col" }, t)))),
    simsBody,
  );
  const simsPanel = h("div", { class: "panel-body" }, h("div", { class: "table-wrap" }, simsTable));

  el.append(
    h(
      "div",
      { class: "page" },
      h("p", {}, h("a", { href: "#/campaigns" }, "← Campaigns")),
      h("div", { class: "page-head" }, title),
      summary,
      h("section", { class: "panel", "aria-labelledby": "campaign-table-title" }, h("div", { class: "toolbar" }, h("h2", { id: "campaign-table-title" }, "By trace and config")), statForm, tableBody),
      h("section", { class: "panel", "aria-labelledby": "campaign-curve-title" }, h("div", { class: "toolbar" }, h("h2", { id: "campaign-curve-title" }, "Per trace"), optionLabel), curve),
      h("section", { class: "panel", "aria-labelledby": "campaign-differs-title" }, h("div", { class: "toolbar" }, h("h2", { id: "campaign-differs-title" }, "What differs")), differs),
      h("section", { class: "panel", "aria-labelledby": "campaign-sims-title" }, h("div", { class: "toolbar" }, h("h2", { id: "campaign-sims-title" }, "Sims")), simsPanel),
    ),
  );

  function choose(change) {
    choice = { ...choice, ...change };
    const qs = new URLSearchParams(Object.entries(choice).filter(([, v]) => v)).toString();
    history.replaceState(null, "", `#/campaigns/${enc(key)}${qs ? `?${qs}` : ""}`);
    view.now();
  }

  function showSummary(c) {
    title.textContent = c.name;
    clear(summary, stateBadge(c.state), " ", simCounts(c.sim_counts), " ", tagChips(c.tags), ` ${counted(c.traces.length, "trace")} × ${counted(c.configs.length, "config")} × ${c.replicas}`);
    const baseline = choice.baseline ?? c.baseline ?? "";
    clear(baselineSelect, h("option", { value: "" }, "None"), c.configs.map((name) => h("option", { value: name }, name)));
    baselineSelect.value = baseline;
  }

  function showTable(t) {
    const configs = [...new Set(t.rows.map((r) => r.config))];
    const traces = [...new Map(t.rows.map((r) => [r.trace_id, r.trace_name])).entries()];
    const cells = new Map(t.rows.map((r) => [`${r.trace_id}\n${r.config}`, r]));
    const cell = (trace, config) => {
      const r = cells.get(`${trace}\n${config}`);
      return h(
        "td",
        { class: "num label-above", "data-label": config, dataset: { config, value: r.value ?? "" }, title: `${r.sims} succeeded sim${r.sims === 1 ? "" : "s"}` },
        r.value == null ? NONE : compact(r.value),
        r.normalised == null ? null : h("div", { class: "muted", dataset: { normalised: r.normalised } }, `×${fixed(r.normalised, 3)}`),
      );
    };
    clear(
      tableBody,
      h("p", { class: "muted", id: "campaign-table-said" }, `${t.stat}: the mean of the sims that succeeded${t.baseline ? `, and its ratio to ${t.baseline}` : ""}.`),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table responsive", id: "campaign-table" },
          h("caption", { class: "sr-only" }, `${t.stat} per trace and config`),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Trace"), configs.map((c) => h("th", { scope: "col", class: "num mono" }, c)))),
          h("tbody", {}, traces.map(([id, name]) => h("tr", { dataset: { trace: id } }, h("td", { "data-label": "Trace", class: "mono strong" }, name === id ? id : `${name} (${id})`), configs.map((c) => cell(id, c))))),
        ),
      ),
    );
    showCurve(t, configs, traces.map(([id]) => id), cells);
  }

  function showCurve(t, configs, traces, cells) {
    const colors = colorMap();
    const y = (trace, config) => cells.get(`${trace}\n${config}`)?.[t.baseline ? "normalised" : "value"] ?? null;
    const label = t.baseline ? `${t.stat} ÷ ${t.baseline}` : t.stat;
    const options = [...new Set(configs.flatMap((c) => Object.keys(configOptions.get(c) ?? {})))].sort();
    optionLabel.hidden = !options.length;
    if (!options.length) {
      const series = traces.map((trace) => ({ name: trace, color: colors.get(trace), values: configs.map((c) => y(trace, c)) }));
      return clear(curve, svgCurve(configs, series, label));
    }
    const option = options.includes(choice.option) ? choice.option : options[0];
    clear(optionSelect, options.map((o) => h("option", { value: o }, o)));
    optionSelect.value = option;
    // A line per trace and values of the other options; a point per value of the option chosen.
    const variants = configs.filter((c) => option in (configOptions.get(c) ?? {}));
    const xs = [...new Set(variants.map((c) => configOptions.get(c)[option]))];
    const lines = new Map();
    for (const trace of traces) {
      for (const c of variants) {
        const rest = Object.entries(configOptions.get(c)).filter(([o]) => o !== option).map(([o, v]) => `${o}=${v}`).join(" ");
        const name = rest ? `${trace} ${rest}` : trace;
        if (!lines.has(name)) lines.set(name, { name, color: colors.get(name), values: xs.map(() => null) });
        lines.get(name).values[xs.indexOf(configOptions.get(c)[option])] = y(trace, c);
      }
    }
    clear(curve, svgCurve(xs, [...lines.values()], `${label} against ${option}`));
  }

  async function showDiffers(c, reference) {
    const others = c.configs.filter((name) => name !== reference);
    const found = await Promise.all(
      others.map(async (name) => {
        const key = `${reference}\n${name}`;
        if (!diffs.has(key)) diffs.set(key, await api(`/api/gpu-configs/${enc(reference)}/diff/${enc(name)}`).catch(() => null));
        return [name, diffs.get(key)];
      }),
    );
    const rows = found.flatMap(([name, d]) =>
      d === null
        ? [h("tr", { dataset: { config: name } }, h("td", { "data-label": "Config", class: "mono" }, name), h("td", { "data-label": "Option", class: "muted" }, "not comparable"), h("td", { "data-label": reference }), h("td", { "data-label": "Its value" }))]
        : d.map((x) =>
            h(
              "tr",
              { dataset: { config: name, option: x.option } },
              h("td", { "data-label": "Config", class: "mono" }, name),
              h("td", { "data-label": "Option", class: "mono" }, x.option),
              h("td", { "data-label": reference, class: "mono" }, x.a ?? NONE),
              h("td", { "data-label": "Its value", class: "mono" }, x.b ?? NONE),
            ),
          ),
    );
    if (!others.length) return clear(differs, h("p", { class: "muted" }, "One config: nothing to compare."));
    clear(
      differs,
      h("p", { class: "muted" }, `The options each config sets otherwise than ${reference}; only what differs.`),
      rows.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "table responsive", id: "campaign-differs-table" },
              h("thead", {}, h("tr", {}, ["Config", "Option", reference, "Its value"].map((x) => h("th", { scope: "col", class: "mono" }, x)))),
              h("tbody", {}, rows),
            ),
          )
        : h("p", {}, "The configs set every option alike."),
    );
  }

  function simRow(s) {
    return h(
      "tr",
      { dataset: { sim: s.sim_id, state: s.state } },
      h("td", { "data-label": "Trace", class: "mono" }, s.trace_id),
      h("td", { "data-label": "Config", class: "mono" }, s.gpu_config),
      h("td", { "data-label": "Replica", class: "num" }, s.replica),
      h("td", { "data-label": "State" }, stateBadge(s.state), s.cut_short ? h("span", { class: "badge cut-short" }, "cut short") : null, s.cached_from ? cachedMarker(s.cached_from) : null, s.error ? h("div", { class: "muted" }, s.error) : null),
      h("td", { "data-label": "Kernels", class: "num" }, `${s.kernels_done}/${s.kernels_total}`),
      h("td", { "data-label": "Cycles", class: "num" }, integer(s.gpu_tot_sim_cycle)),
      h("td", { "data-label": "Rate", class: "num" }, rate(s.sim_rate_ips)),
      h("td", { "data-label": "Run" }, h("a", { href: `#/runs/${enc(s.run_id)}`, class: "mono" }, s.run_id)),
    );
  }

  async function refresh() {
    let t;
    try {
      campaign = await api(`/api/campaigns/${enc(key)}`);
      const baseline = choice.baseline ?? campaign.baseline ?? "";
      t = await api(`/api/campaigns/${enc(key)}/table?${new URLSearchParams({ stat: choice.stat, baseline })}`);
      for (const name of campaign.configs.filter((c) => !configOptions.has(c))) {
        const config = await api(`/api/gpu-configs/${enc(name)}`).catch(() => null);
        configOptions.set(name, config?.options ?? {});
      }
    } catch (err) {
      clear(tableBody, failure(err, () => view.now()));
      throw err;
    }
    showSummary(campaign);
    showTable(t);
    syncRows(simsBody, campaign.sims, { key: (s) => s.sim_id, signature: (s) => JSON.stringify(s), render: simRow });
    await showDiffers(campaign, t.baseline ?? campaign.configs[0]);
  }

  const view = poller(refresh, () => every(campaign?.state === "active"));
  return { destroy: () => view.stop() };
}

// The curve: one line per trace, a point per config in the campaign's order, y linear from 0.
// An SVG, so that it scales with the page; what it drew is in `data-series`.
function svgCurve(configs, series, label) {
  const W = 640;
  const H = 240;
  const PAD = { left: 56, right: 16, top: 12, bottom: 40 };
  const values = series.flatMap((s) => s.values.filter((v) => v != null));
  const svg = (tag, attrs, ...children) => {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    el.append(...children);
    return el;
  };
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "campaign-curve", role: "img", "aria-label": `${label} per trace, over the configs` });
  chart.dataset.series = JSON.stringify(series.map((s) => ({ name: s.name, values: s.values })));
  if (!values.length) return [h("p", { class: "muted" }, "Nothing to draw until a sim succeeds."), chart];
  const hi = Math.max(...values) * 1.1 || 1;
  const x = (i) => PAD.left + (configs.length > 1 ? (i / (configs.length - 1)) * (W - PAD.left - PAD.right) : (W - PAD.left - PAD.right) / 2);
  const y = (v) => PAD.top + (1 - v / hi) * (H - PAD.top - PAD.bottom);
  for (const v of [0, hi / 2, hi]) {
    chart.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid-line" }));
    chart.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "axis-text" }, compact(v)));
  }
  // The first and last names run inwards from their points, so that none reaches past the chart.
  const anchor = (i) => (configs.length === 1 ? "middle" : i === 0 ? "start" : i === configs.length - 1 ? "end" : "middle");
  configs.forEach((c, i) => chart.append(svg("text", { x: x(i), y: H - PAD.bottom + 16, "text-anchor": anchor(i), class: "axis-text" }, c)));
  for (const s of series) {
    const points = s.values.map((v, i) => (v == null ? null : [x(i), y(v)])).filter(Boolean);
    chart.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: s.color, "stroke-width": 2 }));
    for (const [px, py] of points) chart.append(svg("circle", { cx: px, cy: py, r: 3.5, fill: s.color }, svg("title", {}, s.name)));
  }
  const legend = h("ul", { class: "legend" }, series.map((s) => h("li", {}, h("span", { class: "swatch", style: `background:${s.color}` }), s.name)));
  return [chart, legend];
}

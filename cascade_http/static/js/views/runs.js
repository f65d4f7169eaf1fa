// The runs list: newest first, filtered by state, trace and tag (kept in the URL), refreshed
// every 2 s while a run is active and every 10 s otherwise (the API has no stream of all
// runs; each run's page is live over its own event stream).

import { api } from "../api.js";
import { age, dateTime, integer } from "../format.js";
import { announce, clear, entriesText, failure, h, loading, sampleBadge, simCounts, state, stateBadge, syncRows } from "../dom.js";
import { poller } from "../poll.js";
import { tagChips } from "./campaigns.js";

const RUN_STATES = ["active", "succeeded", "failed", "cancelled"];

export function mountRuns(el, _params, query) {
  document.title = "Runs · Cascade";
  let runs = null;
  let filters = { state: query.get("state") ?? "", trace: query.get("trace") ?? "", tag: query.get("tag") ?? "", name: query.get("name") ?? "" };
  const seen = new Map(); // run id -> state, to announce changes

  const stateSelect = h(
    "select",
    { id: "filter-state", onchange: () => setFilters({ state: stateSelect.value }) },
    h("option", { value: "" }, "All states"),
    RUN_STATES.map((s) => h("option", { value: s }, s)),
  );
  const traceSelect = h("select", { id: "filter-trace", onchange: () => setFilters({ trace: traceSelect.value }) });
  const tagSelect = h("select", { id: "filter-tag", onchange: () => setFilters({ tag: tagSelect.value }) });
  const nameSelect = h("select", { id: "filter-name", onchange: () => setFilters({ name: nameSelect.value }) });
  const count = h("span", { class: "muted", "aria-live": "polite" });
  const body = h("div", { class: "panel-body" }, loading("Loading runs…"));
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "table responsive", id: "runs-table" },
    h("caption", { class: "sr-only" }, "Runs, newest first"),
    h("thead", {}, h("tr", {}, ["Run", "State", "Sims", "Trace", "Configs", "Cycles", "Created"].map((t) => h("th", { scope: "col" }, t)))),
    tbody,
  );

  el.append(
    h(
      "div",
      { class: "page" },
      h(
        "div",
        { class: "page-head" },
        h("h1", {}, "Runs"),
        h("a", { class: "btn btn-primary", href: "#/runs/new" }, "New run"),
      ),
      h(
        "section",
        { class: "panel" },
        h(
          "div",
          { class: "toolbar", role: "group", "aria-label": "Filter runs" },
          h("label", { class: "inline" }, "State", stateSelect),
          h("label", { class: "inline" }, "Trace", traceSelect),
          h("label", { class: "inline" }, "Name", nameSelect),
          h("label", { class: "inline" }, "Tag", tagSelect),
          count,
        ),
        body,
      ),
    ),
  );

  function setFilters(change) {
    filters = { ...filters, ...change };
    const qs = new URLSearchParams(Object.entries(filters).filter(([, v]) => v)).toString();
    history.replaceState(null, "", `#/runs${qs ? `?${qs}` : ""}`);
    render();
  }

  function row(run) {
    const link = h("a", { href: `#/runs/${encodeURIComponent(run.id)}`, class: "mono" }, run.id);
    return h(
      "tr",
      { dataset: { run: run.id, state: run.state } },
      h(
        "td",
        { "data-label": "Run" },
        run.name ? h("div", { class: "run-name", dataset: { field: "name" } }, run.name) : null,
        link,
        run.sample ? [" ", sampleBadge()] : null,
        run.tags?.length ? h("div", { class: "chips" }, tagChips(run.tags)) : null,
      ),
      h("td", { "data-label": "State" }, stateBadge(run.state)),
      h("td", { "data-label": "Sims" }, simCounts(run.sim_counts), run.cut_short ? h("span", { class: "badge cut-short", title: "Succeeded without simulating every launch" }, `${run.cut_short} cut short`) : null),
      h("td", { "data-label": "Trace", class: "mono" }, run.trace_id),
      h("td", { "data-label": "Configs" }, entriesText(run.entries)),
      h("td", { "data-label": "Cycles", class: "run-cycles" }, cyclesText(run)),
      h("td", { "data-label": "Created", title: dateTime(run.created_at) }, age(run.created_at)),
    );
  }

  // Each config's total cycles (the median of its whole replicas, with their range when they
  // differ): the one number an architect compares first, without opening the run.
  function cyclesText(run) {
    const shown = run.entries.length > 1 || run.cycles?.length > 1;
    return (run.cycles ?? []).map((c) =>
      h(
        "div",
        { class: "num", dataset: { config: c.gpu_config }, title: `gpu_tot_sim_cycle, median of ${c.sims} succeeded replica${c.sims === 1 ? "" : "s"} that simulated every launch` },
        shown ? h("span", { class: "muted" }, `${c.gpu_config} `) : null,
        integer(c.median),
        c.min !== c.max ? h("span", { class: "muted" }, ` (${integer(c.min)}–${integer(c.max)})`) : null,
      ),
    );
  }

  function options(select, values, all, chosen) {
    const known = [...new Set(values)].sort();
    if (chosen && !known.includes(chosen)) known.unshift(chosen);
    clear(select, h("option", { value: "" }, all), known.map((v) => h("option", { value: v }, v)));
    select.value = chosen;
  }

  function filterOptions() {
    options(traceSelect, runs.map((r) => r.trace_id), "All traces", filters.trace);
    options(nameSelect, runs.flatMap((r) => (r.name ? [r.name] : [])), "Any name", filters.name);
    options(tagSelect, runs.flatMap((r) => r.tags ?? []), "Any tag", filters.tag);
    stateSelect.value = filters.state;
  }

  const matches = (r) =>
    (!filters.state || r.state === filters.state) &&
    (!filters.trace || r.trace_id === filters.trace) &&
    (!filters.name || r.name === filters.name) &&
    (!filters.tag || (r.tags ?? []).includes(filters.tag));

  function render() {
    if (!runs) return;
    filterOptions();
    const shown = runs.filter(matches);
    count.textContent = `${shown.length} of ${runs.length} run${runs.length === 1 ? "" : "s"}`;
    if (!runs.length) {
      return clear(
        body,
        state("empty", "No runs yet.", "Upload a trace, then create a run to simulate it on GPU configs.", h("a", { class: "btn", href: "#/traces" }, "Go to traces")),
      );
    }
    if (!shown.length) {
      return clear(body, state("empty", "No runs match these filters.", null, h("button", { class: "btn", type: "button", onclick: () => setFilters({ state: "", trace: "", tag: "", name: "" }) }, "Clear filters")));
    }
    if (!body.contains(table)) clear(body, h("div", { class: "table-wrap" }, table));
    syncRows(tbody, shown, { key: (r) => r.id, signature: (r) => JSON.stringify(r) + age(r.created_at), render: row });
  }

  async function refresh() {
    try {
      runs = await api("/api/runs?cycles=true");
    } catch (err) {
      if (!runs) clear(body, failure(err, () => list.now()));
      throw err;
    }
    for (const run of runs) {
      const before = seen.get(run.id);
      if (before && before !== run.state) announce(`Run ${run.id} is ${run.state}`);
      seen.set(run.id, run.state);
    }
    render();
  }

  const list = poller(refresh, () => (runs?.some((r) => r.state === "active") ? 2000 : 10_000));
  return {
    destroy: () => list.stop(),
  };
}

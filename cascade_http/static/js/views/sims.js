// The Sims tab: one row per sim, updated in place from the run's live model: state, progress
// (kernels_done / kernels_total), current kernel, latest IPC and simulation rate, elapsed
// time (ticking while it runs); which attempt it is on, and how the ones before it ended; on
// demand its last log lines, its files and its downloads. A split or reusing sim has a
// "Reference" button: it asks for the sim's reference (POST /api/sims/{id}/reference) and
// opens Compare, where the two are compared; a reference says whose it is, and a sim that took
// a result simulated before says "cached", linking the sim it took it from.

import { api, enc } from "../api.js";
import { bytes, dateTime, elapsed, integer, ipc, NONE, rate } from "../format.js";
import { downloadButton, h, progressBar, state, stateBadge, syncRows } from "../dom.js";
import { FINISHED, UNDER_WAY } from "../simstates.js";
import { isFast } from "./reference.js";

const COLUMNS = ["Sim", "State", "Progress", "Current kernel", "Cycles", "IPC", "Sim rate", "Elapsed", ""];

/** A sim that took the result of `source` (its `cached_from`), simulating nothing: a link to the source. */
export function cachedMarker(source) {
  const title = `The result of ${source}, simulated before with the same trace, config files, simulator build and settings: this sim cost no simulator time`;
  return h("a", { class: "badge cached", href: `#/sims/${enc(source)}`, title }, "cached");
}

function elapsedMs(sim, now) {
  if (!sim.started_at) return null;
  const end = sim.finished_at ? Date.parse(sim.finished_at) : FINISHED.has(sim.state) ? Date.parse(sim.last_heartbeat_at ?? sim.started_at) : now;
  return end - Date.parse(sim.started_at);
}

/** How each attempt before the current one ended, and why. */
function earlier(attempts) {
  return h(
    "details",
    { class: "sim-attempts small" },
    h("summary", {}, attempts.length === 1 ? "1 earlier attempt" : `${attempts.length} earlier attempts`),
    h("ul", {}, attempts.map((a) => h("li", {}, `attempt ${a.attempt} ${a.state}${a.error ? `: ${a.error}` : ""}`))),
  );
}

/** Each attempt of the sim, or of one of its chunks, that took over from a lost runner where it stopped. */
function resumes(sim) {
  const said = (r, chunk) => `${chunk}attempt ${r.attempt} resumed at launch ${r.first}${r.warmup ? ` after ${r.warmup} warm-up launches` : ""}`;
  return [
    ...(sim.resumed ?? []).map((r) => said(r, "")),
    ...(sim.split?.chunks ?? []).flatMap((c) => (c.resumed ?? []).map((r) => said(r, `chunk ${c.index + 1} `))),
  ];
}

export function mountSims(el, model) {
  const open = new Map(); // sim id -> "log" | "files"
  const table = h(
    "table",
    { class: "table responsive sims", id: "sims-table" },
    h("caption", { class: "sr-only" }, "Sims of this run, by config and replica"),
    h("thead", {}, h("tr", {}, COLUMNS.map((t) => h("th", { scope: "col" }, t || h("span", { class: "sr-only" }, "Details"))))),
  );
  el.append(h("section", { class: "panel" }, h("div", { class: "table-wrap" }, table)));

  function toggle(sim, what) {
    open.set(sim.id, open.get(sim.id) === what ? null : what);
    render();
    table.querySelector(`[data-sim="${CSS.escape(sim.id)}"] [data-toggle="${what}"]`)?.focus();
  }

  /** Ask for the sim's reference (once: asked again, it is the one there is), then compare. */
  async function askReference(sim, button) {
    button.disabled = true;
    try {
      await api(`/api/sims/${enc(sim.id)}/reference`, { method: "POST" });
      // The run is active again with the reference: follow it again (its stream ended with it).
      model.resume(await api(`/api/runs/${enc(model.id)}`));
      location.hash = `#/runs/${enc(model.id)}/compare`;
    } catch (err) {
      button.disabled = false;
      button.title = err.message;
      button.textContent = "Reference failed";
    }
  }

  function referenceButton(sim) {
    if (!isFast(sim)) return null;
    const has = [...model.sims.values()].some((s) => s.reference_for === sim.id);
    const button = h("button", { class: "btn btn-small", type: "button", dataset: { reference: sim.id }, title: has ? "Compare it with its reference" : "Run the trace whole and in sequence on the same config, and compare" }, has ? "vs reference" : "Reference");
    button.addEventListener("click", () => (has ? (location.hash = `#/runs/${enc(model.id)}/compare`) : askReference(sim, button)));
    return button;
  }

  function details(sim, what) {
    if (what === "log") {
      return h(
        "div",
        { class: "sim-details" },
        h("div", { class: "details-head" }, h("strong", {}, `Last ${sim.log_tail.length} log lines`), downloadButton("Full log", `/api/sims/${enc(sim.id)}/log`, `${sim.id}.log`)),
        sim.log_tail.length ? h("pre", { class: "log", tabindex: "0", "aria-label": `Last log lines of ${sim.id}` }, sim.log_tail.join("\n")) : h("p", { class: "muted" }, "No log lines yet."),
      );
    }
    const files = model.filesOf(sim.id);
    return h(
      "div",
      { class: "sim-details" },
      h("div", { class: "details-head" }, h("strong", {}, `Files of ${sim.gpu_config} replica ${sim.replica}`), downloadButton("Results JSON", `/api/sims/${enc(sim.id)}/results`, `${sim.id}-results.json`), downloadButton("Full log", `/api/sims/${enc(sim.id)}/log`, `${sim.id}.log`)),
      files.length
        ? h(
            "ul",
            { class: "files" },
            files.map((f) =>
              h("li", {}, downloadButton(f.name, `/api/sims/${enc(sim.id)}/files/${enc(f.name)}`, f.name, { title: `${f.content_type}, stored ${dateTime(f.created_at)}` }), h("span", { class: "muted" }, ` ${bytes(f.size)}`)),
            ),
          )
        : h("p", { class: "muted" }, FINISHED.has(sim.state) ? "This sim stored no files." : "Files appear when the sim finishes."),
    );
  }

  function row(sim) {
    const what = open.get(sim.id);
    const kernel = sim.current_kernel;
    const files = model.filesOf(sim.id).length;
    const main = h(
      "tr",
      { dataset: { sim: sim.id, state: sim.state } },
      h(
        "td",
        { "data-label": "Sim" },
        h("span", { class: "mono strong" }, sim.gpu_config),
        h("span", { class: "muted" }, ` · r${sim.replica}`),
        h("div", { class: "mono muted small" }, sim.id),
        sim.reference_for ? h("div", { class: "badge reference", title: "The trace run whole and in sequence, to measure the fast sim against" }, `reference of r${model.sims.get(sim.reference_for)?.replica ?? "?"}`) : null,
        sim.cached_from ? cachedMarker(sim.cached_from) : null,
      ),
      h(
        "td",
        { "data-label": "State" },
        stateBadge(sim.state),
        sim.attempt ? h("span", { class: "muted small sim-attempt" }, ` attempt ${sim.attempt}`) : null,
        sim.error ? h("p", { class: "row-error" }, sim.error) : null,
        sim.cut_short ? h("p", { class: "caveat row-cut-short" }, h("span", { class: "badge cut-short" }, "cut short"), ` ${sim.cut_short.said}`) : null,
        sim.attempts?.length ? earlier(sim.attempts) : null,
        resumes(sim).length ? h("p", { class: "muted small sim-resumed" }, resumes(sim).join("; ")) : null,
        model.attention.has(sim.id) ? h("p", { class: "caveat row-attention" }, model.attention.get(sim.id)) : null,
        sim.exit_code !== null && sim.exit_code !== 0 ? h("div", { class: "muted small" }, `exit ${sim.exit_code}`) : null,
      ),
      h(
        "td",
        { "data-label": "Progress", class: "progress-cell" },
        progressBar(sim.kernels_done, sim.kernels_total, `Kernels of ${sim.id}`),
        h("span", { class: "progress-text", dataset: { done: sim.kernels_done, total: sim.kernels_total } }, `${integer(sim.kernels_done)} / ${integer(sim.kernels_total)}`),
      ),
      h("td", { "data-label": "Current kernel", class: "kernel-cell" }, kernel ? h("span", { class: "mono", title: kernel }, sim.current_kernel_short_name) : NONE),
      h("td", { "data-label": "Cycles", class: "num sim-cycles", title: "gpu_tot_sim_cycle: the simulated cycles of every kernel so far" }, integer(sim.latest.gpu_tot_sim_cycle)),
      h("td", { "data-label": "IPC", class: "num" }, ipc(sim.latest.gpu_tot_ipc)),
      h("td", { "data-label": "Sim rate", class: "num" }, rate(sim.latest.sim_rate_ips)),
      h("td", { "data-label": "Elapsed", class: "num" }, h("span", { class: "elapsed", title: sim.started_at ? `started ${dateTime(sim.started_at)}` : "not started" }, elapsed(elapsedMs(sim, Date.now())))),
      h(
        "td",
        { class: "actions" },
        h("button", { class: "btn btn-small", type: "button", dataset: { toggle: "log" }, "aria-expanded": String(what === "log"), onclick: () => toggle(sim, "log") }, "Log"),
        h("button", { class: "btn btn-small", type: "button", dataset: { toggle: "files" }, "aria-expanded": String(what === "files"), onclick: () => toggle(sim, "files") }, `Files${files ? ` (${files})` : ""}`),
        referenceButton(sim),
      ),
    );
    const group = h("tbody", { dataset: { sim: sim.id } }, main);
    if (what) group.append(h("tr", { class: "details-row" }, h("td", { colspan: String(COLUMNS.length) }, details(sim, what))));
    return group;
  }

  function render() {
    const sims = model.orderedSims();
    if (!sims.length) {
      table.querySelectorAll("tbody").forEach((b) => b.remove());
      if (!el.querySelector(".state")) el.append(state("empty", "This run has no sims."));
      return;
    }
    const filesSig = (id) => model.filesOf(id).map((f) => f.name).join();
    const referenceOf = (id) => [...model.sims.values()].find((r) => r.reference_for === id)?.id ?? "";
    const signature = (s) => JSON.stringify(s) + open.get(s.id) + filesSig(s.id) + (model.attention.get(s.id) ?? "") + referenceOf(s.id);
    syncRows(table, sims, { key: (s) => s.id, signature, render: row, skip: 2 });
  }

  // Elapsed times tick while sims run, without rebuilding rows.
  const ticker = setInterval(() => {
    const now = Date.now();
    for (const sim of model.sims.values()) {
      if (!UNDER_WAY.has(sim.state)) continue;
      const cell = table.querySelector(`tbody[data-sim="${CSS.escape(sim.id)}"] .elapsed`);
      if (cell) cell.textContent = elapsed(elapsedMs(sim, now));
    }
  }, 1000);

  render();
  return {
    changed(what) {
      if (what.has("sims") || what.has("files") || what.has("run") || what.has("attention")) render();
    },
    destroy: () => clearInterval(ticker),
  };
}

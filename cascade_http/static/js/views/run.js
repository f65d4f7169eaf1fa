// A run's page: its header (state, sim counts, progress, downloads, cancel, retry, add sims, delete)
// and four tabs,
// Sims, Timeline, Compare and Stats, that share one live RunModel fed by the run's event
// stream. Switching tabs keeps the stream; leaving the run closes it. A tab may read the
// page's query (Stats: ?name=), and is told when it changes.

import { api, enc } from "../api.js";
import { age, counted, dateTime, integer } from "../format.js";
import { announce, clear, confirmDialog, downloadButton, entriesText, failure, h, loading, markCurrent, progressBar, sampleBadge, setProgress, simCounts, state, stateBadge } from "../dom.js";
import { RunModel } from "../runmodel.js";
import { FINISHED, RETRIABLE } from "../simstates.js";
import { mountSims } from "./sims.js";
import { mountTimeline } from "./timeline.js";
import { mountCompare } from "./compare.js";
import { mountStats } from "./stats.js";
import { addSimsDialog } from "./topup.js";

// Past this many kernels the Results button downloads the zip of a file per sim (`cascade results` takes the zip always).
const RESULTS_ZIP_KERNELS = 1000;

const TABS = [
  { id: "sims", title: "Sims", mount: mountSims, path: "" },
  { id: "timeline", title: "Timeline", mount: mountTimeline, path: "/timeline" },
  { id: "compare", title: "Compare", mount: mountCompare, path: "/compare" },
  { id: "stats", title: "Stats", mount: mountStats, path: "/stats" },
];

const LINK_TEXT = {
  connecting: "Connecting…",
  open: "Live",
  reconnecting: "Reconnecting…",
  ended: "Final",
  failed: "Not live",
};

export function mountRun(el, params, query) {
  const model = new RunModel(params.id).start();
  let tab = params.tab;
  let tabQuery = query;
  let sub = null;
  let lastState = null;

  const title = h("h1", { class: "run-title" }, h("span", { class: "mono" }, params.id));
  const badges = h("span", { class: "title-badges" });
  const link = h("span", { class: "link-status", id: "link-status", role: "status" });
  const meta = h("p", { class: "run-meta" });
  const attention = h("p", { class: "notice notice-warn run-attention", id: "run-attention", role: "status", hidden: true });
  const cutShort = h("p", { class: "notice notice-warn run-cut-short", id: "run-cut-short", hidden: true });
  const counts = h("div", { class: "run-counts", id: "run-counts" });
  const overall = progressBar(0, 0, "Kernels finished over all sims");
  const overallText = h("span", { class: "progress-text" });
  const cancel = h("button", { class: "btn btn-danger", type: "button", id: "cancel-run", hidden: true }, "Cancel run");
  const retry = h("button", { class: "btn", type: "button", id: "retry-run", hidden: true, title: "A new attempt of every failed or cancelled sim" }, "Retry failed");
  const addSims = h("button", { class: "btn", type: "button", id: "add-sims", hidden: true, title: "More replicas, or another config" }, "Add sims");
  const remove = h("button", { class: "btn btn-danger", type: "button", id: "delete-run", hidden: true, title: "Remove the run from every list; its events stay in the log" }, "Delete run");
  const results = downloadButton("Results JSON", `/api/runs/${enc(params.id)}/results`, `${params.id}-results.json`, { small: false });
  const actions = h(
    "div",
    { class: "run-actions" },
    results,
    downloadButton("Perfetto", `/api/runs/${enc(params.id)}/perfetto`, `${params.id}-perfetto.json`, { small: false, title: "A Chrome trace JSON for ui.perfetto.dev" }),
    downloadButton("Parquet", `/api/runs/${enc(params.id)}/export`, `${params.id}-parquet.zip`, {
      small: false, title: "A zip of Parquet files (runs, sims, kernels, kernel_stats, timing) that pandas, polars and DuckDB read",
    }),
    downloadButton("Zip of everything", `/api/runs/${enc(params.id)}/archive`, `${params.id}.zip`, {
      small: false, title: "One zip: the results, and per sim (<config>/r<replica>/) its log and output files",
    }),
    retry,
    addSims,
    cancel,
    remove,
  );
  const summary = h("div", { class: "run-summary" }, counts, h("div", { class: "run-progress" }, overall, overallText), actions);
  const tabLinks = TABS.map((t) => h("a", { href: `#/runs/${enc(params.id)}${t.path}`, class: "tab", dataset: { tab: t.id } }, t.title));
  const content = h("div", { class: "tab-panel", id: "tab-panel" });
  const head = h(
    "header",
    { class: "run-head" },
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/runs" }, "Runs"), " / ", h("span", { "aria-current": "page", class: "mono" }, params.id)),
    h("div", { class: "run-title-row" }, title, badges, link),
    meta,
    attention,
    cutShort,
    summary,
    h("nav", { class: "tabs", "aria-label": "Run views" }, tabLinks),
  );
  const body = h("div", { class: "page" }, loading("Connecting to the run…"));
  el.append(body);

  function showTab() {
    sub?.destroy?.();
    clear(content);
    const t = TABS.find((x) => x.id === tab) ?? TABS[0];
    markCurrent(tabLinks, (a) => a.dataset.tab === t.id);
    document.title = `${t.title} · ${params.id} · Cascade`;
    sub = t.mount(content, model, tabQuery);
  }

  function renderHead() {
    const run = model.run;
    clear(badges, stateBadge(run.state), run.sample ? sampleBadge() : null);
    const trace = run.trace;
    clear(
      meta,
      run.name ? [h("a", { href: `#/runs?name=${enc(run.name)}`, class: "run-name", dataset: { field: "name" }, title: "Runs of this name" }, run.name), " · "] : "",
      (run.tags ?? []).map((t) => [h("a", { href: `#/runs?tag=${enc(t)}`, class: "tag", dataset: { tag: t }, title: "Runs with this tag" }, t), " "]),
      "Trace ",
      h("a", { href: `#/runs?trace=${enc(run.trace_id)}`, class: "mono", title: "Runs of this trace" }, run.trace_id),
      trace?.trace_gpu_arch ? ` · ${trace.trace_gpu_arch}` : "",
      ` · ${entriesText(run.entries)} · created `,
      h("time", { datetime: run.created_at, title: dateTime(run.created_at) }, age(run.created_at)),
    );
    clear(counts, simCounts(model.simCounts()));
    renderCutShort();
    let done = 0;
    let total = 0;
    for (const s of model.sims.values()) {
      done += s.kernels_done;
      total += s.kernels_total;
    }
    setProgress(overall, done, total);
    overallText.textContent = `${integer(done)} / ${integer(total)} kernels`;
    showResults(done > RESULTS_ZIP_KERNELS);
    cancel.hidden = run.state !== "active";
    remove.hidden = run.state === "active"; // refused while a sim is unfinished: cancel first
    retry.hidden = run.sample || !model.orderedSims().some((s) => RETRIABLE.has(s.state) && !s.split);
    addSims.hidden = run.sample;
    summary.dataset.state = run.state; // colours the progress bar
    if (lastState && lastState !== run.state) announce(`Run ${run.id} is ${run.state}`);
    lastState = run.state;
  }

  /** The Results button: one JSON document, or past RESULTS_ZIP_KERNELS a zip of a file per sim (a JSON document of every kernel's full stats would be gigabytes). */
  function showResults(zipped) {
    const path = `/api/runs/${enc(params.id)}/results`;
    results.textContent = zipped ? "Results zip" : "Results JSON";
    results.dataset.download = zipped ? `${path}?format=zip` : path;
    results.dataset.filename = `${params.id}-results.${zipped ? "zip" : "json"}`;
    results.title = zipped
      ? "Everything about the run: run.json (sims, comparison) and a file per sim of its kernels with full stats"
      : "Everything about the run: sims, kernels with full stats, comparison";
  }

  function renderAttention() {
    const texts = [...model.attention.values()];
    attention.hidden = !texts.length || !model.active;
    if (attention.hidden) return;
    const others = texts.length > 1 ? ` (and ${counted(texts.length - 1, "other sim")}; see Sims)` : "";
    attention.textContent = `${counted(texts.length, "sim")} may never finish unless someone acts: ${texts[0]}${others}`;
  }

  function renderCutShort() {
    const cut = [...model.sims.values()].filter((s) => s.cut_short);
    cutShort.hidden = !cut.length;
    if (cutShort.hidden) return;
    const others = cut.length > 1 ? ` (and ${counted(cut.length - 1, "other sim")}; see Sims)` : "";
    cutShort.textContent = `${counted(cut.length, "sim")} cut short, its totals over the launches it simulated: ${cut[0].gpu_config} r${cut[0].replica} ${cut[0].cut_short.said}${others}`;
  }

  function renderLink() {
    const status = model.run && !model.active ? "ended" : model.status;
    link.className = `link-status link-${status}`;
    link.textContent = LINK_TEXT[status] ?? status;
  }

  model.addEventListener("change", (e) => {
    if (model.status === "failed" && !model.run) {
      const err = model.error;
      if (err?.status === 404) return clear(body, state("error", "No such run.", err.message, h("a", { class: "btn", href: "#/runs" }, "Back to the runs")));
      return clear(body, failure(err, () => location.reload()));
    }
    if (!model.run) return;
    if (!body.contains(head)) {
      clear(body, head, content);
      showTab();
    }
    if (e.detail.has("run") || e.detail.has("sims")) renderHead();
    if (e.detail.has("run") || e.detail.has("attention")) renderAttention();
    renderLink();
    sub?.changed?.(e.detail);
  });

  cancel.addEventListener("click", async () => {
    const unfinished = [...model.sims.values()].filter((s) => !FINISHED.has(s.state)).length;
    const ok = await confirmDialog({
      title: `Cancel run ${params.id}?`,
      message: `${counted(unfinished, "unfinished sim")} will be cancelled and stopped. Finished sims keep their state and results.`,
      confirm: "Cancel run",
      cancel: "Keep running",
    });
    if (!ok) return;
    cancel.disabled = true;
    try {
      model.replace(await api(`/api/runs/${enc(params.id)}/cancel`, { method: "POST" }));
    } catch (err) {
      announce(`Cancel failed: ${err.message}`);
    } finally {
      cancel.disabled = false;
    }
  });

  remove.addEventListener("click", async () => {
    const ok = await confirmDialog({
      title: `Delete run ${params.id}?`,
      message: `The run and its ${counted(model.sims.size, "sim")}' results, logs and files leave every list and query. Its events stay in the log for audits.`,
      confirm: "Delete run",
    });
    if (!ok) return;
    remove.disabled = true;
    try {
      await api(`/api/runs/${enc(params.id)}`, { method: "DELETE" });
      model.stop();
      announce(`Run ${params.id} deleted`);
      location.hash = "#/runs";
    } catch (err) {
      announce(`Delete failed: ${err.message}`);
      remove.disabled = false;
    }
  });

  retry.addEventListener("click", async () => {
    retry.disabled = true;
    try {
      model.resume(await api(`/api/runs/${enc(params.id)}/retry`, { method: "POST" }));
      announce(`Run ${params.id}: failed and cancelled sims start again`);
    } catch (err) {
      announce(`Retry failed: ${err.message}`);
    } finally {
      retry.disabled = false;
    }
  });

  addSims.addEventListener("click", async () => {
    const detail = await addSimsDialog({ ...model.run, sims: [] });
    if (detail) model.resume(detail);
  });

  return {
    update(next, nextQuery) {
      tabQuery = nextQuery;
      if (next.tab === tab) return sub?.query?.(nextQuery);
      tab = next.tab;
      if (model.run) showTab();
    },
    destroy() {
      model.stop();
      sub?.destroy?.();
    },
  };
}

// The create-run form: a trace the API can run (ready, not a sample), the GPU configs of its
// arch (the suggested one first), a sim count per config, whether the sims reuse repeated
// kernels' results (an entry's `reuse`, for every config), whether they are split (`split`:
// auto, or chunks of K launches after W warm-up ones), and whether each also gets a
// reference run whole and in sequence to measure it against (`reference`). What the API refuses is shown next
// to the field it concerns, in the API's own words (so the form does no validation of its own).

import { api, runnable } from "../api.js";
import { bytes, counted } from "../format.js";
import { clear, failure, h, loading, state } from "../dom.js";

export function mountNewRun(el, _params, query) {
  document.title = "New run · Cascade";
  const body = h("div", {}, loading("Loading traces and GPU configs…"));
  el.append(
    h(
      "div",
      { class: "page page-narrow" },
      h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("a", { href: "#/runs" }, "Runs"), " / ", h("span", { "aria-current": "page" }, "New run")),
      h("h1", {}, "New run"),
      body,
    ),
  );
  const load = () =>
    Promise.all([api("/api/traces"), api("/api/gpu-configs")])
      .then(([traces, configs]) => form(body, traces, oneByName(configs), query.get("trace")))
      .catch((err) => clear(body, failure(err, load)));
  load();
  return {};
}

/** One config of each name: an entry names a config by name, so two of one name that differ
 * (by digest: the server's and a runner's, say) are one choice. */
function oneByName(configs) {
  const byName = new Map();
  for (const c of configs) if (!byName.has(c.name)) byName.set(c.name, c);
  return [...byName.values()];
}

/** Why `trace` (asked for by id) is not offered, or null when it is. */
function notOffered(trace, id) {
  if (!trace) return `There is no trace ${id}.`;
  if (trace.sample) return `Trace ${id} is a sample: it holds no instruction traces, so it cannot be simulated again. Its runs show what it did.`;
  return `Trace ${id} is ${trace.state}: only a ready trace can be run.`;
}

function form(body, traces, configs, wanted) {
  const ready = traces.filter(runnable);
  const unwanted = wanted && !ready.some((t) => t.id === wanted) ? notOffered(traces.find((t) => t.id === wanted), wanted) : null;
  if (!ready.length) {
    const samples = traces.some((t) => t.sample) ? " Sample traces cannot be run: they hold no instruction traces." : "";
    return clear(body, state("empty", "No trace is ready to run.", `${unwanted ?? ""} Upload a trace first; it can be run once it is ready.${samples}`.trim(), h("a", { class: "btn", href: "#/traces" }, "Go to traces")));
  }
  const traceSelect = h("select", { id: "run-trace", name: "trace_id", "aria-describedby": "run-trace-info run-trace-error" }, ready.map((t) => h("option", { value: t.id }, t.id)));
  if (wanted && !unwanted) traceSelect.value = wanted;
  const traceInfo = h("p", { id: "run-trace-info", class: "hint" });
  const traceError = h("p", { id: "run-trace-error", class: "field-error", role: "alert" });
  const traceNote = h("p", { id: "run-trace-note", class: "notice notice-warn", role: "status", hidden: !unwanted }, unwanted);
  const configList = h("div", { class: "cfg-list", id: "run-configs" });
  const configsError = h("p", { id: "run-configs-error", class: "field-error", role: "alert" });
  const formError = h("p", { class: "field-error", role: "alert" });
  const splitError = h("p", { id: "run-split-error", class: "field-error", role: "alert" });
  const reuse = h("input", { type: "checkbox", id: "run-reuse", name: "reuse", "aria-describedby": "run-reuse-info" });
  const reference = h("input", { type: "checkbox", id: "run-reference", name: "reference", "aria-describedby": "run-reference-info" });
  // Split: whole (in sequence), auto (chunks chosen from the launches and the free slots), or
  // chunks of K launches, each after W warm-up launches (the API's default 2).
  const split = h(
    "select",
    { id: "run-split", name: "split", "aria-describedby": "run-split-info" },
    h("option", { value: "" }, "Whole, in sequence"),
    h("option", { value: "auto" }, "Split: chosen from the launches and free slots"),
    h("option", { value: "chunks" }, "Split: chunks of K launches"),
  );
  const chunk = h("input", { type: "number", id: "run-split-k", min: "1", step: "1", value: "10", inputmode: "numeric", disabled: true });
  const warmup = h("input", { type: "number", id: "run-split-warmup", min: "0", max: "64", step: "1", value: "2", inputmode: "numeric", disabled: true });
  split.addEventListener("change", () => {
    chunk.disabled = warmup.disabled = split.value !== "chunks";
  });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, "Create run");
  let rows = []; // { config, check, count, error }

  function showTrace() {
    const trace = ready.find((t) => t.id === traceSelect.value);
    clear(
      traceInfo,
      `${trace.trace_gpu_arch ?? "arch unknown"} · ${counted(trace.kernel_count, "kernel")} · ${bytes(trace.bytes)}`,
      trace.model ? ` · ${trace.model}` : "",
    );
    const matching = configs
      .filter((c) => c.arch === trace.trace_gpu_arch)
      .sort((a, b) => (b.name === trace.suggested_sim_config) - (a.name === trace.suggested_sim_config) || a.name.localeCompare(b.name));
    rows = matching.map((config, i) => configRow(config, config.name === trace.suggested_sim_config || (i === 0 && !trace.suggested_sim_config)));
    if (!rows.length) {
      const known = configs.length ? `The server has ${configs.map((c) => `${c.name} (${c.arch})`).join(", ")}.` : "No GPU config is offered: start the server with --accelsim-dir, or a cascade worker.";
      clear(configList, state("empty", `No GPU config matches ${trace.trace_gpu_arch ?? "this trace's arch"}.`, known));
    } else clear(configList, rows.map((r) => r.el));
    for (const p of [traceError, configsError, formError]) p.textContent = "";
  }

  function configRow(config, suggested) {
    const id = `cfg-${config.name}`;
    const check = h("input", { type: "checkbox", id, checked: suggested, dataset: { config: config.name } });
    const count = h("input", {
      type: "number", id: `${id}-count`, min: "1", max: "64", step: "1", value: "1", inputmode: "numeric",
      class: "count", "aria-describedby": `${id}-error`, dataset: { config: config.name },
    });
    const error = h("p", { id: `${id}-error`, class: "field-error", role: "alert" });
    const el = h(
      "div",
      { class: "cfg-row" },
      check,
      h("label", { for: id, class: "cfg-name" }, h("span", { class: "mono" }, config.name), " ", h("span", { class: "muted" }, `${config.arch} · ${config.core_clock_mhz} MHz`), suggested ? h("span", { class: "badge suggested" }, "suggested") : null),
      h("label", { for: `${id}-count`, class: "cfg-count" }, h("span", { class: "muted" }, "sims"), count),
      error,
    );
    return { config, check, count, error, el };
  }

  function countValue(input) {
    const n = Number(input.value);
    return input.value.trim() !== "" && Number.isInteger(n) ? n : input.value;
  }

  function showError(err, chosen) {
    if (err.status === 404 || err.status === 409) {
      traceError.textContent = err.message;
      return traceSelect.focus();
    }
    if (err.status === 422 && err.issues.length) {
      for (const issue of err.issues) {
        const [, field, index, leaf] = issue.loc ?? [];
        const target =
          field === "entries" && leaf === "count" ? chosen[index]?.error : field === "entries" && leaf === "split" ? splitError : field === "trace_id" ? traceError : configsError;
        target.textContent = target.textContent ? `${target.textContent}; ${issue.msg}` : issue.msg;
      }
      if (splitError.textContent) return (chunk.disabled ? split : chunk).focus();
      return (chosen.find((r) => r.error.textContent)?.count ?? configList.querySelector("input"))?.focus();
    }
    if (err.status === 422) {
      configsError.textContent = err.message;
      return configList.querySelector("input")?.focus();
    }
    formError.textContent = err.message;
  }

  function splitAsked() {
    if (split.value === "auto") return { split: "auto" };
    if (split.value !== "chunks") return {};
    return { split: { kernels_per_chunk: countValue(chunk), warmup: countValue(warmup) } };
  }

  async function create(e) {
    e.preventDefault();
    for (const p of [traceError, configsError, splitError, formError, ...rows.map((r) => r.error)]) p.textContent = "";
    const chosen = rows.filter((r) => r.check.checked);
    const entry = (r) => ({
      gpu_config: r.config.name,
      count: countValue(r.count),
      ...(reuse.checked ? { reuse: true } : {}),
      ...(reference.checked ? { reference: true } : {}),
      ...splitAsked(),
    });
    const body = { trace_id: traceSelect.value, entries: chosen.map(entry) };
    submit.disabled = true;
    submit.textContent = "Creating…";
    try {
      const run = await api("/api/runs", { method: "POST", json: body });
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    } catch (err) {
      showError(err, chosen);
      submit.disabled = false;
      submit.textContent = "Create run";
    }
  }

  traceSelect.addEventListener("change", showTrace);
  clear(
    body,
    h(
      "form",
      { class: "card form", onsubmit: create, novalidate: true, id: "new-run" },
      traceNote,
      h("div", { class: "field" }, h("label", { for: "run-trace" }, "Trace"), traceSelect, traceInfo, traceError),
      h(
        "fieldset",
        { class: "field", "aria-describedby": "run-configs-error" },
        h("legend", {}, "GPU configs ", h("span", { class: "muted" }, "(those of the trace's arch; 1 to 64 sims each)")),
        configList,
        configsError,
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "run-reuse", class: "check" }, reuse, " Reuse repeated kernels"),
        h("p", { id: "run-reuse-info", class: "hint" }, "Simulate each kernel only the first two times the trace launches it, cold then warm; every later launch takes the warm one's result, marked as reused."),
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "run-split" }, "Split"),
        split,
        h(
          "div",
          { class: "split-sizes" },
          h("label", { for: "run-split-k" }, h("span", { class: "muted" }, "launches a chunk (K)"), chunk),
          h("label", { for: "run-split-warmup" }, h("span", { class: "muted" }, "warm-up launches (W)"), warmup),
        ),
        h("p", { id: "run-split-info", class: "hint" }, "Cut each sim into chunks of kernel launches, simulated at once on any runners and stitched into one sim; each chunk first simulates the W launches before it and discards them, to warm its caches."),
        splitError,
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "run-reference", class: "check" }, reference, " Measure against a reference"),
        h("p", { id: "run-reference-info", class: "hint" }, "With reuse or a split: each sim also gets a reference, the trace run whole and in sequence on the same config; Compare then shows the fast sim's error per kernel, the wall times and the speed-up."),
      ),
      h("div", { class: "form-actions" }, submit, h("a", { class: "btn btn-ghost", href: "#/runs" }, "Cancel"), formError),
    ),
  );
  showTrace();
}

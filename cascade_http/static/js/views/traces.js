// Traces: the list (state, arch, kernels, size, model; a failed trace's error), and upload
// of a trace folder (sent as a tar stream built in the browser) or an archive, with a
// progress bar and then the processing state. The list refreshes every 2 s while a trace is
// being uploaded or processed, every 15 s otherwise.

import { errorOf, api, enc, runnable } from "../api.js";
import { age, bytes, counted, dateTime, integer, NONE } from "../format.js";
import { announce, clear, confirmDialog, failure, h, loading, progressBar, sampleBadge, setProgress, state, stateBadge, syncRows } from "../dom.js";
import { poller } from "../poll.js";
import { tarBlob } from "../tar.js";

const ARCHIVES = [
  [/\.tar$/i, "application/x-tar"],
  [/\.(tar\.gz|tgz)$/i, "application/gzip"],
  [/\.(tar\.xz|txz)$/i, "application/x-xz"],
];
const BUSY = new Set(["uploading", "processing"]);

/** A trace id from a folder or archive name: the characters the API accepts. */
function idFrom(name) {
  const base = name.replace(/\.(tar\.gz|tgz|tar\.xz|txz|tar)$/i, "");
  return base.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 64);
}

export function mountTraces(el) {
  document.title = "Traces · Cascade";
  let traces = null;
  let uploading = false;
  const body = h("div", { class: "panel-body" }, loading("Loading traces…"));
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "table responsive", id: "traces-table" },
    h("caption", { class: "sr-only" }, "Traces, newest first"),
    h("thead", {}, h("tr", {}, ["Trace", "State", "Arch", "Kernels", "Size", "Model", "Created", ""].map((t) => h("th", { scope: "col" }, t || h("span", { class: "sr-only" }, "Actions"))))),
    tbody,
  );
  const uploader = uploadPanel({ onStart: () => ((uploading = true), list.now()), onDone: () => ((uploading = false), list.now()) });

  el.append(
    h(
      "div",
      { class: "page" },
      h("div", { class: "page-head" }, h("h1", {}, "Traces")),
      uploader,
      h("section", { class: "panel", "aria-labelledby": "traces-title" }, h("div", { class: "toolbar" }, h("h2", { id: "traces-title" }, "All traces")), body),
    ),
  );

  async function remove(trace) {
    const message = trace.sample
      ? "A sample that ships with Cascade: it and its sample runs are removed, and not loaded again."
      : "Its stored files are removed; runs made from it keep their results.";
    const ok = await confirmDialog({ title: `Delete trace ${trace.id}?`, message, confirm: "Delete trace" });
    if (!ok) return;
    try {
      await api(`/api/traces/${enc(trace.id)}`, { method: "DELETE" });
      announce(`Trace ${trace.id} deleted`);
    } catch (err) {
      announce(err.message);
      await confirmDialog({ title: "The trace was not deleted", message: err.message, confirm: "OK", cancel: "Close", danger: false });
    }
    list.now();
  }

  function row(t) {
    const flags = [t.has_step_timeline && "step timeline", t.has_real_timing && "real timing"].filter(Boolean);
    return h(
      "tr",
      { dataset: { trace: t.id, state: t.state } },
      h("td", { "data-label": "Trace" }, h("span", { class: "mono strong" }, t.id), t.sample ? [" ", sampleBadge()] : null, flags.length ? h("div", { class: "tags" }, flags.map((f) => h("span", { class: "tag" }, f))) : null),
      h("td", { "data-label": "State" }, stateBadge(t.state), t.error ? h("p", { class: "row-error" }, t.error) : null),
      h("td", { "data-label": "Arch", class: "mono" }, t.trace_gpu_arch ?? NONE),
      h("td", { "data-label": "Kernels", class: "num" }, integer(t.kernel_count)),
      h("td", { "data-label": "Size", class: "num" }, bytes(t.bytes)),
      h("td", { "data-label": "Model" }, t.model ?? NONE, t.source_gpu ? h("div", { class: "muted" }, t.source_gpu) : null),
      h("td", { "data-label": "Created", title: dateTime(t.created_at) }, age(t.created_at)),
      h(
        "td",
        { class: "actions" },
        runnable(t) ? h("a", { class: "btn btn-small", href: `#/runs/new?trace=${enc(t.id)}` }, "New run") : null,
        h("button", { class: "btn btn-small btn-ghost", type: "button", onclick: () => remove(t), "aria-label": `Delete trace ${t.id}` }, "Delete"),
      ),
    );
  }

  async function refresh() {
    try {
      traces = await api("/api/traces");
    } catch (err) {
      if (!traces) clear(body, failure(err, () => list.now()));
      throw err;
    }
    if (!traces.length) return clear(body, state("empty", "No traces yet.", "Upload an NVBit trace folder (with kernelslist.g) or a .tar, .tar.gz or .tar.xz of one."));
    if (!body.contains(table)) clear(body, h("div", { class: "table-wrap" }, table));
    syncRows(tbody, traces, { key: (t) => t.id, signature: (t) => JSON.stringify(t) + age(t.created_at), render: row });
  }

  const list = poller(refresh, () => (uploading || traces?.some((t) => BUSY.has(t.state)) ? 2000 : 15_000));
  return { destroy: () => list.stop() };
}

function uploadPanel({ onStart, onDone }) {
  let picked = null; // { label, blob, type }
  const folderInput = h("input", { type: "file", id: "pick-folder", webkitdirectory: true, multiple: true, hidden: true });
  const archiveInput = h("input", { type: "file", id: "pick-archive", accept: ".tar,.tar.gz,.tgz,.tar.xz,.txz", hidden: true });
  const chosen = h("p", { class: "hint", id: "upload-chosen" }, "Nothing chosen yet.");
  const idInput = h("input", { id: "upload-id", name: "id", autocomplete: "off", spellcheck: "false", "aria-describedby": "upload-id-help upload-id-error" });
  const idError = h("p", { class: "field-error", id: "upload-id-error", role: "alert" });
  const fileError = h("p", { class: "field-error", id: "upload-file-error", role: "alert" });
  const start = h("button", { class: "btn btn-primary", type: "submit", disabled: true }, "Upload");
  const abort = h("button", { class: "btn btn-ghost", type: "button", hidden: true }, "Stop upload");
  const bar = progressBar(0, 1, "Upload progress");
  const progressText = h("span", { class: "progress-text", "aria-live": "polite" });
  const progress = h("div", { class: "upload-progress", id: "upload-progress", hidden: true }, bar, progressText);
  const result = h("div", { id: "upload-result", "aria-live": "polite" });
  let xhr = null;

  function choose(p) {
    picked = p;
    clear(chosen, h("span", { class: "mono" }, p.label), ` · ${p.detail}`);
    idInput.value = idFrom(p.name);
    start.disabled = false;
    for (const e of [idError, fileError]) e.textContent = "";
    clear(result);
  }

  folderInput.addEventListener("change", () => {
    const files = [...folderInput.files];
    if (!files.length) return;
    const top = files[0].webkitRelativePath.split("/")[0];
    const total = files.reduce((a, f) => a + f.size, 0);
    const entries = files.map((file) => ({ path: file.webkitRelativePath || file.name, file })).sort((a, b) => a.path.localeCompare(b.path));
    choose({ name: top, label: `${top}/`, detail: `${files.length} files, ${bytes(total)}`, blob: tarBlob(entries), type: "application/x-tar" });
    folderInput.value = "";
  });
  archiveInput.addEventListener("change", () => {
    const file = archiveInput.files[0];
    if (!file) return;
    const type = ARCHIVES.find(([re]) => re.test(file.name))?.[1] ?? (file.type || "application/octet-stream");
    choose({ name: file.name, label: file.name, detail: bytes(file.size), blob: file, type });
    archiveInput.value = "";
  });

  function finish(trace) {
    const failed = trace.state === "failed";
    clear(
      result,
      h(
        "div",
        { class: `notice ${failed ? "notice-error" : "notice-ok"}`, role: failed ? "alert" : "status", dataset: { state: trace.state } },
        h("strong", { class: "mono" }, trace.id), " ", stateBadge(trace.state),
        failed
          ? h("p", {}, trace.error)
          : h("p", {}, `${trace.trace_gpu_arch ?? "arch unknown"} · ${counted(trace.kernel_count, "kernel")} · ${bytes(trace.bytes)} `, runnable(trace) ? h("a", { href: `#/runs/new?trace=${enc(trace.id)}` }, "Create a run") : null),
      ),
    );
    announce(`Trace ${trace.id} is ${trace.state}`);
  }

  function send(e) {
    e.preventDefault();
    if (!picked) return;
    for (const p of [idError, fileError]) p.textContent = "";
    clear(result);
    const id = idInput.value.trim();
    const total = picked.blob.size;
    xhr = new XMLHttpRequest();
    xhr.open("POST", `/api/traces${id ? `?id=${enc(id)}` : ""}`);
    xhr.setRequestHeader("Content-Type", picked.type);
    const began = performance.now();
    xhr.upload.onprogress = (ev) => {
      setProgress(bar, ev.loaded, total);
      const secs = (performance.now() - began) / 1000;
      progressText.textContent = `${bytes(ev.loaded)} of ${bytes(total)}${secs > 0.5 ? ` · ${bytes(ev.loaded / secs)}/s` : ""}`;
    };
    xhr.upload.onload = () => {
      bar.classList.add("indeterminate");
      progressText.textContent = `Sent ${bytes(total)}. Processing: checking the trace's files…`;
    };
    xhr.onloadend = async () => {
      const status = xhr.status;
      const text = xhr.responseText;
      xhr = null;
      progress.hidden = true;
      bar.classList.remove("indeterminate");
      abort.hidden = true;
      start.disabled = false;
      onDone();
      if (status === 0) return (fileError.textContent = "The upload stopped before the server answered.");
      if (status === 202 || status === 200) return finish(JSON.parse(text));
      const err = await errorOf(new Response(text, { status, headers: { "Content-Type": "application/json" } }));
      (status === 409 || status === 422 ? idError : fileError).textContent = err.message;
      if (status === 409 || status === 422) idInput.focus();
    };
    setProgress(bar, 0, total);
    progressText.textContent = `0 B of ${bytes(total)}`;
    progress.hidden = false;
    abort.hidden = false;
    start.disabled = true;
    onStart();
    xhr.send(picked.blob);
  }

  abort.addEventListener("click", () => xhr?.abort());
  return h(
    "section",
    { class: "panel", "aria-labelledby": "upload-title" },
    h("div", { class: "toolbar" }, h("h2", { id: "upload-title" }, "Upload a trace")),
    h(
      "form",
      { class: "panel-body upload", onsubmit: send, novalidate: true },
      h(
        "div",
        { class: "field" },
        h("span", { class: "label", id: "upload-source" }, "Trace"),
        h(
          "div",
          { class: "button-row", role: "group", "aria-labelledby": "upload-source" },
          h("button", { class: "btn", type: "button", onclick: () => folderInput.click() }, "Choose folder…"),
          h("button", { class: "btn", type: "button", onclick: () => archiveInput.click() }, "Choose archive…"),
          folderInput,
          archiveInput,
        ),
        chosen,
        fileError,
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "upload-id" }, "Trace id"),
        idInput,
        h("p", { class: "hint", id: "upload-id-help" }, "Letters, digits, . _ -; up to 64. Empty: the server picks one."),
        idError,
      ),
      h("div", { class: "form-actions" }, start, abort),
      progress,
      result,
    ),
  );
}

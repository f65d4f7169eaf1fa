// The Add sims dialog of a run's page (a top-up): a GPU config of the trace's arch and how
// many sims to add on it. The request carries one idempotency key for as long as the dialog
// is open, so sending it again after an error the answer never reached adds the sims once.
// What the API refuses is shown in its own words.

import { api, enc } from "../api.js";
import { h } from "../dom.js";

function requestKey() {
  return globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

/** Resolves to the RunDetail the top-up answered, or null when the dialog was closed. */
export function addSimsDialog(run) {
  return new Promise((resolve) => {
    const key = requestKey();
    const config = h("select", { id: "add-config", name: "gpu_config", required: true });
    const count = h("input", { id: "add-count", name: "count", type: "number", min: "1", max: "64", step: "1", value: "1", inputmode: "numeric" });
    const error = h("p", { id: "add-error", class: "field-error", role: "alert" });
    const add = h("button", { class: "btn btn-primary", type: "submit", id: "add-submit" }, "Add sims");
    const close = h("button", { class: "btn", type: "button", value: "no" }, "Close");
    let answered = null;
    const form = h(
      "form",
      { method: "dialog", novalidate: true }, // the API's words say what is wrong
      h("h2", { id: "add-title" }, `Add sims to ${run.id}`),
      h("p", { class: "hint" }, "More replicas of a config, or another config of the trace's arch. A run that ended runs again while they do."),
      h("div", { class: "dialog-field" }, h("label", { for: "add-config" }, "GPU config"), config),
      h("div", { class: "dialog-field" }, h("label", { for: "add-count" }, "Sims"), count),
      error,
      h("div", { class: "form-actions" }, close, add),
    );
    const dialog = h("dialog", { class: "dialog", id: "add-sims-dialog", "aria-labelledby": "add-title" }, form);
    close.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      resolve(answered);
      dialog.remove();
    });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      add.disabled = true;
      error.textContent = "";
      try {
        const body = { entries: [{ gpu_config: config.value, count: Number(count.value) }] };
        answered = await api(`/api/runs/${enc(run.id)}/entries`, { method: "POST", json: body, headers: { "Idempotency-Key": key } });
        dialog.close();
      } catch (err) {
        error.textContent = err.message;
      } finally {
        add.disabled = false;
      }
    });
    document.body.append(dialog);
    dialog.showModal();
    api("/api/gpu-configs").then(
      (configs) => {
        const arch = run.trace?.trace_gpu_arch;
        for (const c of configs.filter((c) => c.arch === arch)) config.append(h("option", { value: c.name }, c.name));
        const used = run.entries[0]?.gpu_config;
        if (used) config.value = used;
      },
      (err) => {
        error.textContent = err.message;
      },
    );
  });
}

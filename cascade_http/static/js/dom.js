// A few DOM helpers: build elements, show loading / empty / error states, announce changes.

import { download } from "./api.js";
import { SIM_STATES } from "./simstates.js";

/** h("a", {href, class: "x", onclick}, "text", child, [more]) */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    // Through the style object: the server's Content-Security-Policy refuses style attributes.
    else if (key === "style") el.style.cssText = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key in el && !key.includes("-") && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A loading, empty or error state, with an optional action. */
export function state(kind, title, detail, action) {
  return h(
    "div",
    { class: `state state-${kind}`, role: kind === "error" ? "alert" : "status" },
    kind === "loading" ? h("span", { class: "spinner", "aria-hidden": "true" }) : null,
    h("p", { class: "state-title" }, title),
    detail ? h("p", { class: "state-detail" }, detail) : null,
    action ?? null,
  );
}

export function loading(what = "Loading…") {
  return state("loading", what);
}

export function failure(err, retry) {
  return state(
    "error",
    "Could not load this.",
    err?.message ?? String(err),
    retry ? h("button", { class: "btn", type: "button", onclick: retry }, "Try again") : null,
  );
}

/** Says `text` to screen readers once, politely. */
export function announce(text) {
  const live = document.getElementById("announcer");
  if (!live) return;
  live.textContent = "";
  requestAnimationFrame(() => {
    live.textContent = text;
  });
}

/** A badge for a trace, run or sim state. */
export function stateBadge(value) {
  return h("span", { class: `badge st-${value}`, dataset: { state: value } }, value);
}

export function sampleBadge() {
  return h("span", { class: "badge sample", title: "A sample shipped with Cascade" }, "sample");
}

/** A progress bar of `done` out of `total`, named `label` for screen readers. */
export function progressBar(done, total, label) {
  const bar = h("div", { class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-label": label }, h("div", { class: "bar-fill" }));
  setProgress(bar, done, total);
  return bar;
}

export function setProgress(bar, done, total) {
  const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
  bar.firstChild.style.width = `${pct}%`;
  bar.setAttribute("aria-valuenow", String(done || 0));
  bar.setAttribute("aria-valuemax", String(total || 0));
}

/** Runs `fn` at most once per animation frame, however often it is asked. */
export function perFrame(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}

/** Runs `fn` at most every `ms` milliseconds, the last call always honoured. */
export function throttle(fn, ms) {
  let timer = null;
  let last = 0;
  const run = () => {
    timer = null;
    last = Date.now();
    fn();
  };
  const call = () => {
    if (timer) return;
    timer = setTimeout(run, Math.max(0, last + ms - Date.now()));
  };
  call.cancel = () => {
    clearTimeout(timer);
    timer = null;
  };
  return call;
}

/** Per-state sim counts as chips: "2 running", "1 succeeded". */
export function simCounts(counts) {
  const chips = SIM_STATES.filter((s) => counts?.[s]).map((s) => h("span", { class: `chip st-${s}`, dataset: { state: s } }, `${counts[s]} ${s}`));
  return h("span", { class: "chips" }, chips.length ? chips : h("span", { class: "muted" }, "no sims"));
}

/** A run's entries: "SM61_TITANX ×3, SM7_QV100 ×1". */
export function entriesText(entries) {
  return (entries ?? []).map((e) => `${e.gpu_config} ×${e.count}`).join(", ");
}

/**
 * Makes `tbody` show one row per item, in order, rebuilding only the rows whose
 * `signature(item)` changed, so focus and hover survive a refresh.
 */
export function syncRows(tbody, items, { key, signature, render, skip = 0 }) {
  const old = tbody._rows ?? new Map();
  const rows = new Map();
  items.forEach((item, i) => {
    const id = key(item);
    const sig = signature(item);
    let row = old.get(id);
    if (!row || row.sig !== sig) {
      const tr = render(item);
      if (row) row.tr.replaceWith(tr);
      row = { tr, sig };
    }
    rows.set(id, row);
    const here = tbody.children[skip + i] ?? null;
    if (here !== row.tr) tbody.insertBefore(row.tr, here);
  });
  for (const [id, row] of old) if (!rows.has(id)) row.tr.remove();
  tbody._rows = rows;
}

/** A modal confirmation; resolves true when the person confirms. */
export function confirmDialog({ title, message, confirm, cancel = "Keep", danger = true }) {
  return new Promise((resolve) => {
    const yes = h("button", { class: `btn ${danger ? "btn-danger" : "btn-primary"}`, value: "yes" }, confirm);
    const dialog = h(
      "dialog",
      { class: "dialog", "aria-labelledby": "dialog-title", "aria-describedby": "dialog-message" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "dialog-title" }, title),
        h("p", { id: "dialog-message" }, message),
        h("div", { class: "form-actions" }, h("button", { class: "btn", value: "no", autofocus: true }, cancel), yes),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "yes");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** A button that downloads `path` with the session, showing that it is busy meanwhile. */
export function downloadButton(label, path, fallbackName, { small = true, title } = {}) {
  const button = h("button", { class: `btn${small ? " btn-small" : ""}`, type: "button", title, dataset: { download: path } }, label);
  button.addEventListener("click", () => download(button.dataset.download, button.dataset.filename ?? fallbackName)); // a view may change them
  return button;
}

/** Marks the links for which `isCurrent(link)` holds as the current page, and only them. */
export function markCurrent(links, isCurrent) {
  for (const link of links) {
    if (isCurrent(link)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

/** Shows the page's tooltip near (clientX, clientY), kept inside the window. */
export function showTip(clientX, clientY, ...content) {
  const tip = document.getElementById("tooltip");
  clear(tip, ...content);
  tip.hidden = false;
  const { width, height } = tip.getBoundingClientRect();
  const x = clientX + 14 + width > window.innerWidth ? clientX - 14 - width : clientX + 14;
  const y = clientY + 14 + height > window.innerHeight ? clientY - 14 - height : clientY + 14;
  tip.style.left = `${Math.max(4, x)}px`;
  tip.style.top = `${Math.max(4, y)}px`;
}

export function hideTip() {
  document.getElementById("tooltip").hidden = true;
}

/** A definition list of [term, value] pairs, for tooltips. */
export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

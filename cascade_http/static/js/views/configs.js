// GPU configs: every config a run may name (this server's, the live runners' and the variants
// derived from them), a variant with its base and options; the options two configs set
// differently; and a config's options on demand.

import { api } from "../api.js";
import { clear, failure, h, loading, state } from "../dom.js";

const DIGEST_SHOWN = 12; // hex digits of a digest: enough to tell configs apart at a glance

const path = (name) => `/api/gpu-configs/${encodeURIComponent(name)}`;

export function mountConfigs(el) {
  document.title = "GPU configs · Cascade";
  const body = h("div", { class: "panel-body" }, loading("Loading GPU configs…"));
  const optionsPanel = h("div", { class: "panel-body", id: "config-options", "aria-live": "polite" }, h("p", { class: "muted" }, "Choose a config's Options to see every option it sets."));
  const a = h("select", { id: "diff-a", "aria-label": "First config" });
  const b = h("select", { id: "diff-b", "aria-label": "Second config" });
  const diffOut = h("div", { id: "config-diff", "aria-live": "polite" });
  const compare = h("button", { class: "btn btn-primary", type: "submit" }, "Show differences");
  const form = h("form", { class: "toolbar", id: "diff-form" }, h("label", { class: "inline" }, "A ", a), h("label", { class: "inline" }, "B ", b), compare);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    showDiff(a.value, b.value, diffOut);
  });
  el.append(
    h(
      "div",
      { class: "page" },
      h("div", { class: "page-head" }, h("h1", {}, "GPU configs")),
      h("section", { class: "panel", "aria-labelledby": "configs-title" }, h("div", { class: "toolbar" }, h("h2", { id: "configs-title" }, "Configs a run may name")), body),
      h("section", { class: "panel", "aria-labelledby": "diff-title" }, h("div", { class: "toolbar" }, h("h2", { id: "diff-title" }, "Compare two configs")), h("div", { class: "panel-body" }, form, diffOut)),
      h("section", { class: "panel", "aria-labelledby": "options-title" }, h("div", { class: "toolbar" }, h("h2", { id: "options-title" }, "Options")), optionsPanel),
    ),
  );

  async function load() {
    let configs;
    try {
      configs = await api("/api/gpu-configs");
    } catch (err) {
      return clear(body, failure(err, load));
    }
    if (!configs.length) return clear(body, state("empty", "No GPU config is offered.", "Start a runner with cascade worker --accelsim-dir DIR, or cascade serve --accelsim-dir DIR."));
    const names = [...new Set(configs.map((c) => c.name))];
    for (const select of [a, b]) clear(select, ...names.map((n) => h("option", { value: n }, n)));
    b.value = names.find((n) => configs.some((c) => c.name === n && c.base)) ?? names[Math.min(1, names.length - 1)];
    a.value = configs.find((c) => c.name === b.value)?.base ?? names[0];
    const table = h(
      "table",
      { class: "table responsive", id: "configs-table" },
      h("caption", { class: "sr-only" }, "GPU configs, by name"),
      h("thead", {}, h("tr", {}, ["Config", "Arch", "Core clock", "Derived from", "Where", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, configs.map((c) => row(c, optionsPanel))),
    );
    clear(body, h("div", { class: "table-wrap" }, table));
  }

  load();
  return {};
}

function row(c, optionsPanel) {
  const options = Object.entries(c.options ?? {});
  const where = [c.local ? "this server" : null, ...(c.runners ?? [])].filter(Boolean).join(", ");
  const show = h("button", { class: "btn btn-ghost btn-small", type: "button", "aria-controls": "config-options" }, "Options");
  show.addEventListener("click", () => showOptions(c.name, optionsPanel));
  return h(
    "tr",
    { dataset: { config: c.name, digest: c.digest ?? "" } },
    h("td", { "data-label": "Config" }, h("span", { class: "mono strong" }, c.name), c.digest ? h("div", { class: "muted mono", title: `sha256 ${c.digest}` }, c.digest.slice(0, DIGEST_SHOWN)) : null),
    h("td", { "data-label": "Arch", class: "mono" }, c.arch),
    h("td", { "data-label": "Core clock", class: "num" }, `${c.core_clock_mhz} MHz`),
    h(
      "td",
      { "data-label": "Derived from", dataset: { field: "base" } },
      c.base ? [h("span", { class: "mono" }, c.base), h("ul", { class: "plain-list" }, options.map(([k, v]) => h("li", { class: "mono wrap" }, `${k} ${v}`)))] : h("span", { class: "muted" }, "its own files"),
    ),
    h("td", { "data-label": "Where" }, where || h("span", { class: "muted" }, "nowhere live")),
    h("td", {}, show),
  );
}

async function showOptions(name, panel) {
  clear(panel, loading(`Loading ${name}'s options…`));
  try {
    const options = Object.entries(await api(`${path(name)}/options`));
    clear(
      panel,
      h("p", {}, `${name} sets ${options.length} options.`),
      h(
        "div",
        { class: "table-wrap" },
        h("table", { class: "table", id: "options-table", dataset: { config: name } }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Option"), h("th", { scope: "col" }, "Value"))), h("tbody", {}, options.map(([k, v]) => h("tr", {}, h("td", { class: "mono" }, k), h("td", { class: "mono wrap" }, v))))),
      ),
    );
  } catch (err) {
    clear(panel, failure(err, () => showOptions(name, panel)));
  }
}

async function showDiff(a, b, out) {
  clear(out, loading("Comparing…"));
  try {
    const differences = await api(`${path(a)}/diff/${encodeURIComponent(b)}`);
    if (!differences.length) return clear(out, h("p", { id: "diff-same" }, `${a} and ${b} set the same options.`));
    clear(
      out,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table responsive", id: "diff-table" },
          h("caption", { class: "sr-only" }, `Options ${a} and ${b} set differently`),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Option"), h("th", { scope: "col" }, a), h("th", { scope: "col" }, b))),
          h(
            "tbody",
            {},
            differences.map((d) => h("tr", { dataset: { option: d.option } }, h("td", { "data-label": "Option", class: "mono" }, d.option), h("td", { "data-label": a, class: "mono wrap" }, d.a ?? "(not set)"), h("td", { "data-label": b, class: "mono wrap" }, d.b ?? "(not set)"))),
          ),
        ),
      ),
    );
  } catch (err) {
    clear(out, failure(err, () => showDiff(a, b, out)));
  }
}

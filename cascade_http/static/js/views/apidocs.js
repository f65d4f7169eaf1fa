// API: the service's own OpenAPI document (/api/openapi.json) rendered for reading and
// trying: each operation by tag, with its parameters, body, answers and their schemas, and a
// form that sends it with this browser's session and shows the answer. Served from the package,
// like the rest of the app (no CDN); `/docs` leads here.

import { api } from "../api.js";
import { clear, failure, h, loading } from "../dom.js";

const SHOWN_BYTES = 64 * 1024; // of an answer tried here: the rest is for a download
const SCHEMA = "#/components/schemas/";

export function mountApiDocs(el) {
  document.title = "API · Cascade";
  const body = h("div", {}, loading("Loading the API's description…"));
  el.append(
    h(
      "div",
      { class: "page api-docs" },
      h("div", { class: "page-head" }, h("h1", {}, "API")),
      h(
        "p",
        { class: "muted" },
        "Every route of this server, from its OpenAPI document (",
        h("a", { href: "/api/openapi.json" }, "/api/openapi.json"),
        "). Requests need ",
        h("code", {}, "Authorization: Bearer <token>"),
        " (or the session cookie this browser signed in with, which Try it sends).",
      ),
      body,
    ),
  );
  const load = async () => {
    try {
      clear(body, render(await api("/api/openapi.json")));
    } catch (err) {
      clear(body, failure(err, load));
    }
  };
  load();
  return {};
}

function render(doc) {
  const schemas = doc.components?.schemas ?? {};
  const byTag = new Map();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = op.tags?.[0] ?? "other";
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op });
    }
  }
  const sections = [...byTag].map(([tag, ops]) =>
    h(
      "section",
      { class: "panel", dataset: { tag } },
      h("div", { class: "toolbar" }, h("h2", {}, tag)),
      h("div", { class: "panel-body" }, ...ops.map((o) => operation(o, schemas))),
    ),
  );
  const names = Object.keys(schemas).sort();
  const models = h(
    "section",
    { class: "panel", id: "api-schemas" },
    h("div", { class: "toolbar" }, h("h2", {}, `Schemas (${names.length})`)),
    h("div", { class: "panel-body" }, ...names.map((name) => h("details", { id: `schema-${name}`, class: "api-schema" }, h("summary", { class: "mono" }, name), schemaView(schemas[name], schemas)))),
  );
  return h("div", {}, ...sections, models);
}

function operation({ path, method, op }, schemas) {
  const params = op.parameters ?? [];
  const content = op.requestBody?.content ?? {};
  return h(
    "details",
    { class: "api-op", dataset: { operation: op.operationId ?? `${method} ${path}` } },
    h("summary", {}, h("span", { class: `badge api-method ${method}` }, method.toUpperCase()), " ", h("span", { class: "mono" }, path), " ", h("span", { class: "muted" }, op.summary ?? "")),
    op.description ? h("p", {}, op.description) : null,
    params.length ? parameters(params) : null,
    Object.keys(content).length ? h("div", {}, h("h3", {}, "Body"), ...Object.entries(content).map(([type, c]) => h("div", {}, h("div", { class: "mono muted small" }, type), schemaView(c.schema, schemas)))) : null,
    h("h3", {}, "Answers"),
    wrapped(
      "table",
      { class: "table api-answers" },
      h("thead", {}, h("tr", {}, ["Status", "When", "Body"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...Object.entries(op.responses ?? {}).map(([status, r]) => h("tr", {}, h("td", { class: "mono" }, status), h("td", {}, r.description ?? ""), h("td", {}, answerSchema(r))))),
    ),
    tryIt(path, method, params, content),
  );
}

/** A table in a box that scrolls sideways, on a screen narrower than its columns. */
function wrapped(...table) {
  return h("div", { class: "table-wrap" }, h(...table));
}

function parameters(params) {
  return h(
    "div",
    {},
    h("h3", {}, "Parameters"),
    wrapped(
      "table",
      { class: "table api-params" },
      h("thead", {}, h("tr", {}, ["Name", "In", "Type", "Description"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, ...params.map((p) => h("tr", {}, h("td", { class: "mono" }, p.name, p.required ? h("span", { class: "muted", title: "required" }, " *") : null), h("td", {}, p.in), h("td", { class: "mono" }, typeName(p.schema ?? {})), h("td", {}, p.description ?? "")))),
    ),
  );
}

function answerSchema(response) {
  const [type, c] = Object.entries(response.content ?? {})[0] ?? [];
  if (!type) return h("span", { class: "muted" }, "none");
  return h("div", {}, h("div", { class: "mono muted small" }, type), c.schema ? typeLink(c.schema) : null);
}

/** A schema's type in one line, a named schema as a link to it. */
function typeName(s) {
  if (s.$ref) return s.$ref.slice(SCHEMA.length);
  if (s.type === "array") return `list of ${typeName(s.items ?? {})}`;
  if (s.anyOf || s.oneOf) return (s.anyOf ?? s.oneOf).map(typeName).join(" | ");
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.type === "object" && s.additionalProperties) return `map of ${typeName(s.additionalProperties)}`;
  return s.format ? `${s.type} (${s.format})` : s.type ?? "any";
}

function typeLink(s) {
  const refs = [];
  const walk = (x) => {
    if (!x || typeof x !== "object") return;
    if (x.$ref) refs.push(x.$ref.slice(SCHEMA.length));
    [x.items, x.additionalProperties, ...(x.anyOf ?? []), ...(x.oneOf ?? [])].forEach(walk);
  };
  walk(s);
  return h("span", { class: "mono" }, typeName(s), ...refs.map((name) => h("a", { class: "api-ref", href: `#schema-${name}`, onclick: (e) => openSchema(e, name) }, ` → ${name}`)));
}

function openSchema(event, name) {
  event.preventDefault(); // the app's routes live in the hash: scroll instead of navigating
  const target = document.getElementById(`schema-${name}`);
  if (!target) return;
  target.open = true;
  target.scrollIntoView({ block: "start" });
}

/** A schema's fields (an object's), or its type. */
function schemaView(s, schemas) {
  if (!s) return h("span", { class: "muted" }, "any");
  const named = s.$ref ? schemas[s.$ref.slice(SCHEMA.length)] : null;
  const shown = named ?? s;
  if (shown.type !== "object" || !shown.properties) return typeLink(s);
  const required = new Set(shown.required ?? []);
  return h(
    "div",
    {},
    named ? h("div", { class: "muted small" }, typeLink(s)) : null,
    shown.description ? h("p", { class: "muted small" }, shown.description) : null,
    wrapped(
      "table",
      { class: "table api-fields" },
      h("thead", {}, h("tr", {}, ["Field", "Type", "Description"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        ...Object.entries(shown.properties).map(([name, p]) =>
          h("tr", {}, h("td", { class: "mono" }, name, required.has(name) ? h("span", { class: "muted", title: "required" }, " *") : null), h("td", {}, typeLink(p)), h("td", {}, p.description ?? "")),
        ),
      ),
    ),
  );
}

function tryIt(path, method, params, content) {
  const inputs = params.filter((p) => p.in === "path" || p.in === "query").map((p) => ({ p, input: h("input", { type: "text", name: p.name, placeholder: typeName(p.schema ?? {}), "aria-label": `${p.name} (${p.in})` }) }));
  const json = "application/json" in content;
  const bodyInput = json ? h("textarea", { rows: "5", class: "mono", "aria-label": "Body (JSON)", placeholder: "{ }" }) : null;
  const out = h("pre", { class: "api-answer", hidden: true, tabindex: "0", "aria-live": "polite" });
  const send = async (event) => {
    event.preventDefault();
    let url = path;
    const query = new URLSearchParams();
    for (const { p, input } of inputs) {
      if (p.in === "path") url = url.replace(`{${p.name}}`, encodeURIComponent(input.value));
      else if (input.value !== "") query.set(p.name, input.value);
    }
    if ([...query].length) url += `?${query}`;
    const init = { method: method.toUpperCase(), headers: {} };
    if (bodyInput && bodyInput.value.trim()) {
      init.body = bodyInput.value;
      init.headers["Content-Type"] = "application/json";
    }
    out.hidden = false;
    out.textContent = `${init.method} ${url} …`;
    try {
      const response = await fetch(url, init);
      const text = await response.text();
      const shown = text.length > SHOWN_BYTES ? `${text.slice(0, SHOWN_BYTES)}\n… (${text.length.toLocaleString()} characters in all)` : text;
      out.textContent = `${response.status} ${response.statusText}\n\n${pretty(shown, response.headers.get("Content-Type"))}`;
      out.dataset.status = String(response.status);
    } catch (err) {
      out.textContent = `failed: ${err.message}`;
    }
  };
  return h(
    "form",
    { class: "api-try", onsubmit: send },
    h("h3", {}, "Try it"),
    ...inputs.map(({ p, input }) => h("label", { class: "field" }, h("span", { class: "mono" }, `${p.name} (${p.in})`), input)),
    bodyInput ? h("label", { class: "field" }, h("span", {}, "Body (JSON)"), bodyInput) : null,
    h("button", { class: "btn btn-small", type: "submit" }, `Send ${method.toUpperCase()}`),
    out,
  );
}

function pretty(text, type) {
  if (!type?.startsWith("application/json")) return text;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// Runners: every runner that announced itself in the last seconds (`cascade serve`'s own and
// `cascade worker`s), with its host, slots in use, load, GPU configs (each with the start of
// its digest, which tells two configs of one name apart), simulator build and running sims.
// Refreshed every 3 s, as often as runners announce themselves.

import { api } from "../api.js";
import { age, dateTime, fixed, NONE } from "../format.js";
import { clear, failure, h, loading, state, syncRows } from "../dom.js";
import { poller } from "../poll.js";

const ANNOUNCED_EVERY_MS = 3000;
const DIGEST_SHOWN = 12; // hex digits of a digest: enough to tell configs apart at a glance

export function mountRunners(el) {
  document.title = "Runners · Cascade";
  let runners = null;
  const body = h("div", { class: "panel-body" }, loading("Loading runners…"));
  const tbody = h("tbody");
  const table = h(
    "table",
    { class: "table responsive", id: "runners-table" },
    h("caption", { class: "sr-only" }, "Live runners, by id"),
    h("thead", {}, h("tr", {}, ["Runner", "Slots", "Load", "GPU configs", "Simulator", "Running", "Last seen"].map((t) => h("th", { scope: "col" }, t)))),
    tbody,
  );
  el.append(
    h(
      "div",
      { class: "page" },
      h("div", { class: "page-head" }, h("h1", {}, "Runners")),
      h("section", { class: "panel", "aria-labelledby": "runners-title" }, h("div", { class: "toolbar" }, h("h2", { id: "runners-title" }, "Live runners")), body),
    ),
  );

  async function refresh() {
    try {
      runners = await api("/api/runners");
    } catch (err) {
      if (!runners) clear(body, failure(err, () => list.now()));
      throw err;
    }
    if (!runners.length) return clear(body, state("empty", "No runner is up.", "Start one with cascade worker --accelsim-dir DIR, or cascade serve --accelsim-dir DIR."));
    if (!body.contains(table)) clear(body, h("div", { class: "table-wrap" }, table));
    syncRows(tbody, runners, { key: (r) => r.id, signature: (r) => JSON.stringify({ ...r, last_seen_at: null }) + age(r.last_seen_at), render: row });
  }

  const list = poller(refresh, () => ANNOUNCED_EVERY_MS);
  return { destroy: () => list.stop() };
}

function row(r) {
  const configs = r.gpu_configs?.length ? r.gpu_configs : r.configs.map((name) => ({ name, digest: null }));
  const sim = r.simulator;
  return h(
    "tr",
    { dataset: { runner: r.id } },
    h("td", { "data-label": "Runner" }, h("span", { class: "mono strong" }, r.id), h("div", { class: "muted", dataset: { field: "host" } }, r.host)),
    h("td", { "data-label": "Slots", class: "num", dataset: { field: "slots" } }, `${r.running.length} of ${r.slots}`),
    h("td", { "data-label": "Load", class: "num", dataset: { field: "load" } }, r.load == null ? NONE : fixed(r.load, 2)),
    h(
      "td",
      { "data-label": "GPU configs" },
      h(
        "ul",
        { class: "plain-list", dataset: { field: "configs" } },
        configs.map((c) =>
          h("li", { dataset: { config: c.name, digest: c.digest ?? "" } }, h("span", { class: "mono" }, c.name), c.digest ? h("span", { class: "muted mono", title: `sha256 ${c.digest}` }, ` ${c.digest.slice(0, DIGEST_SHOWN)}`) : null),
        ),
      ),
    ),
    h("td", { "data-label": "Simulator", dataset: { field: "simulator" } }, simulatorCell(sim)),
    h("td", { "data-label": "Running", dataset: { field: "running" } }, r.running.length ? h("ul", { class: "plain-list" }, r.running.map((s) => h("li", { class: "mono" }, s))) : h("span", { class: "muted" }, "idle")),
    h("td", { "data-label": "Last seen", title: `Started ${dateTime(r.started_at)}; last seen ${dateTime(r.last_seen_at)}` }, age(r.last_seen_at)),
  );
}

function simulatorCell(sim) {
  if (!sim) return NONE;
  const builds = [sim.accel_sim_build && `Accel-Sim ${sim.accel_sim_build}`, sim.gpgpu_sim_build && `GPGPU-Sim ${sim.gpgpu_sim_build}`].filter(Boolean);
  return [
    builds.length ? builds.map((b) => h("div", { class: "mono" }, b)) : h("div", { class: "muted" }, "build not known until a sim runs"),
    sim.binary_digest ? h("div", { class: "muted mono", title: `sha256 of the binary ${sim.binary_digest}` }, `binary ${sim.binary_digest.slice(0, DIGEST_SHOWN)}`) : null,
  ];
}

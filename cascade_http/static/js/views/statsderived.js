// The Stats tab's derived metrics (GET /stats/derived): per config over all its kernels, a
// row per metric with its formula under its name (and in its tooltip), then one metric per
// kernel and config, the metric picked from a list. Cells hold their raw value in
// data-value (empty when none), rows their metric in data-metric.

import { api, enc } from "../api.js";
import { bytes, integer, ipc, NONE, number, percent } from "../format.js";
import { clear, failure, h, loading, state } from "../dom.js";

// Where a config's options were read, as each column's tooltip says.
const OPTIONS_FROM = {
  log: "options as a sim's log shows them (what it ran with)",
  config: "options from the config's gpgpusim.config as this server has it",
};

const shown = {
  ratio: (x) => percent(x * 100),
  bytes: (x) => bytes(x),
  "GB/s": (x) => `${number(x)} GB/s`,
  "inst/cycle": (x) => ipc(x),
};

function value(metric, x) {
  return x === null || x === undefined ? NONE : shown[metric.unit](x);
}

function cell(metric, x) {
  return h("td", { class: "num", dataset: { value: x ?? "" } }, value(metric, x));
}

function formulaOf(metric) {
  return `${metric.formula}. Over kernels: ${metric.over_kernels}. Options read: ${metric.options.length ? metric.options.join(", ") : "none"}.`;
}

export function derivedPanel(model) {
  let answer = null;
  let picked = "dram_read_gbps";
  const body = h("div", { id: "derived-body" }, loading("Working out the derived metrics…"));
  const el = h(
    "section",
    { class: "panel", "aria-labelledby": "derived-title" },
    h("div", { class: "toolbar" }, h("h2", { id: "derived-title" }, "Derived metrics")),
    body,
  );

  function configTable(a) {
    return h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "table", id: "derived-configs" },
        h("caption", { class: "sr-only" }, "Derived metrics per config, over all its kernels"),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Metric"), a.configs.map((c) => h("th", { scope: "col", class: "num mono", title: c.error ?? `${integer(c.kernels)} kernels, ${integer(c.replicas)} replicas; peak DRAM ${c.dram_peak_gbps === null ? NONE : number(c.dram_peak_gbps) + " GB/s"}; ${OPTIONS_FROM[c.options_from]}` }, c.gpu_config)))),
        h(
          "tbody",
          {},
          a.metrics.map((m) =>
            h(
              "tr",
              { dataset: { metric: m.name } },
              h("th", { scope: "row", title: formulaOf(m) }, m.label, h("div", { class: "muted small derived-formula" }, m.formula)),
              a.configs.map((c) => cell(m, c.values[m.name])),
            ),
          ),
        ),
      ),
    );
  }

  function kernelTable(a) {
    const metric = a.metrics.find((m) => m.name === picked) ?? a.metrics[0];
    const indices = [...new Set(a.kernels.map((k) => k.kernel_index))];
    const at = new Map(a.kernels.map((k) => [`${k.kernel_index}|${k.gpu_config}`, k]));
    const configs = a.configs.map((c) => c.gpu_config);
    const pick = h("select", { id: "derived-metric", "aria-label": "Metric per kernel" }, a.metrics.map((m) => h("option", { value: m.name, selected: m === metric }, m.label)));
    pick.addEventListener("change", () => {
      picked = pick.value;
      render();
    });
    return [
      h("div", { class: "pad-x stat-kernel" }, h("label", { class: "inline" }, "Per kernel", pick)),
      h("p", { class: "hint pad-x", id: "derived-formula" }, `${metric.label} = ${metric.formula}`),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table", id: "derived-kernels", dataset: { metric: metric.name } },
          h("caption", { class: "sr-only" }, `${metric.label} per kernel and config`),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Kernel"), configs.map((c) => h("th", { scope: "col", class: "num mono" }, c)))),
          h(
            "tbody",
            {},
            indices.map((i) => {
              const any = configs.map((c) => at.get(`${i}|${c}`)).find(Boolean);
              return h(
                "tr",
                { dataset: { kernelIndex: i } },
                h("th", { scope: "row", class: "mono", title: any.kernel_name }, `#${i} ${any.kernel_short_name}`),
                configs.map((c) => cell(metric, at.get(`${i}|${c}`)?.values[metric.name] ?? null)),
              );
            }),
          ),
        ),
      ),
    ];
  }

  function render() {
    const a = answer;
    if (!a.configs.length) return clear(body, state("empty", model.active ? "No kernel has finished yet." : "The kernels' results carry no stats."));
    const errors = a.configs.filter((c) => c.error).map((c) => h("p", { class: "hint pad-x" }, `${c.gpu_config}: ${c.error}`));
    clear(body, configTable(a), ...errors, ...kernelTable(a), a.truncated ? h("p", { class: "hint pad-x" }, "The first kernels only.") : null);
  }

  async function load() {
    try {
      answer = await api(`/api/runs/${enc(model.id)}/stats/derived`);
      render();
    } catch (err) {
      clear(body, failure(err, load));
    }
  }

  load();
  return { el, refresh: load };
}

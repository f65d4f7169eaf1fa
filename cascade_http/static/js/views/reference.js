// Fast sims against their references, in the Compare tab: for every split or reusing sim of
// the run that has a reference (a sim whose `reference_for` names it), GET
// /api/sims/{id}/reference as it stands — the wall time of each, the speed-up, the total
// cycle and instruction errors, the worst kernel's, and a table of every launch's error.
// Refetched as kernels finish. The Sims tab's "Reference" button asks for one.

import { api, enc } from "../api.js";
import { fixed, integer, NONE, percent } from "../format.js";
import { clear, failure, h, loading } from "../dom.js";
import { virtualTable } from "../vtable.js";

/** The run's fast sims that have a reference, in the run's order. */
export function referenced(model) {
  const fast = new Set([...model.sims.values()].map((s) => s.reference_for).filter(Boolean));
  return model.orderedSims().filter((s) => fast.has(s.id));
}

/** A split or reusing sim, which can have a reference. */
export const isFast = (sim) => !sim.reference_for && (Boolean(sim.split) || Boolean(sim.reuse));

export function howFast(c) {
  const how = [];
  if (c.split) how.push(`split ${c.split.kernels_per_chunk} a chunk, warm-up ${c.split.warmup}`);
  if (c.reuse) how.push("reusing repeated kernels");
  return how.join(", ");
}

function signed(pct) {
  if (pct === null || pct === undefined) return NONE;
  const cls = Math.abs(pct) < 0.5 ? "err-ok" : Math.abs(pct) <= 2 ? "err-warn" : "err-bad";
  return h("span", { class: cls }, percent(pct, { signed: true }));
}

function wall(side) {
  return side.wall_s !== null ? `${fixed(side.wall_s, 1)} s` : `${side.state}, ${integer(side.kernels_done)} kernels so far`;
}

const COLUMNS = [
  { title: "Launch", width: "4.5rem", num: true, cell: (k) => k.kernel_launch_uid },
  { title: "Kernel", width: "minmax(9rem,2fr)", cell: (k) => h("span", { class: "mono", title: k.kernel_name }, k.kernel_short_name) },
  { title: "Cycles", width: "minmax(6rem,1fr)", num: true, cell: (k) => integer(k.gpu_sim_cycle) },
  { title: "Reference", width: "minmax(6rem,1fr)", num: true, cell: (k) => integer(k.reference_gpu_sim_cycle) },
  { title: "Error", width: "6rem", num: true, cell: (k) => signed(k.cycle_error_pct), data: (k) => ({ "data-error": k.cycle_error_pct ?? "" }) },
  { title: "Insn error", width: "6.5rem", num: true, cell: (k) => signed(k.insn_error_pct) },
  { title: "Reused from", width: "6.5rem", num: true, cell: (k) => (k.reused_from ? k.reused_from : NONE) },
];

function card(c) {
  const t = c.totals;
  const worst = t.worst_kernel_launch_uid ? [signed(t.worst_cycle_error_pct), h("span", { class: "muted" }, ` (launch ${t.worst_kernel_launch_uid})`)] : NONE;
  const config = c.same_config === false ? h("p", { class: "caveat", role: "note" }, "The two ran config files of different digests: the errors are not the fast sim's alone.") : null;
  return h(
    "article",
    { class: "card stat-card", dataset: { sim: c.sim_id, reference: c.reference.sim_id } },
    h("h3", {}, h("span", { class: "mono" }, c.gpu_config), h("span", { class: "muted" }, ` · ${howFast(c)}`)),
    h(
      "dl",
      { class: "stats" },
      h("dt", {}, "Wall time"), h("dd", {}, `${wall(c.fast)} against ${wall(c.reference)}`),
      h("dt", {}, "Speed-up"), h("dd", { dataset: { speedup: c.speedup ?? "" } }, c.speedup !== null ? `×${fixed(c.speedup, 2)}` : NONE),
      h("dt", {}, "Total cycles"), h("dd", {}, `${integer(t.gpu_sim_cycle)} against ${integer(t.reference_gpu_sim_cycle)} `, signed(t.cycle_error_pct)),
      h("dt", {}, "Instructions"), h("dd", {}, signed(t.insn_error_pct)),
      h("dt", {}, "Exact kernels"), h("dd", {}, `${integer(t.exact)} of ${integer(t.kernels)}`),
      h("dt", {}, "Worst kernel"), h("dd", {}, worst),
    ),
    h("p", { class: "muted small mono" }, `${c.sim_id} against ${c.reference.sim_id}`),
    config,
  );
}

export function referencePanel(model) {
  const body = h("div", {});
  const el = h("section", { class: "panel", "aria-labelledby": "cmp-reference", id: "reference-panel", hidden: true }, h("div", { class: "toolbar" }, h("h2", { id: "cmp-reference" }, "Against the reference")), body);
  const tables = new Map(); // fast sim id -> virtual table

  async function refresh() {
    const fast = referenced(model);
    el.hidden = !fast.length;
    if (!fast.length) return;
    if (!tables.size) clear(body, loading("Loading the comparison with the reference…"));
    try {
      const compared = await Promise.all(fast.map((s) => api(`/api/sims/${enc(s.id)}/reference`)));
      clear(
        body,
        h("p", { class: "hint pad" }, "Each fast sim against the same trace and config run whole and in sequence: the error is (fast − reference) / reference."),
        compared.map((c) => {
          if (!tables.has(c.sim_id)) tables.set(c.sim_id, virtualTable({ id: `reference-table-${c.sim_id}`, label: `Cycles per launch of ${c.sim_id} against its reference`, columns: COLUMNS, maxHeight: 320, rowData: (k) => ({ launch: k.kernel_launch_uid }) }));
          const table = tables.get(c.sim_id);
          table.setRows(c.kernels);
          return h("div", { class: "reference", dataset: { sim: c.sim_id } }, h("div", { class: "cards reference-cards" }, card(c)), table.el);
        }),
      );
    } catch (err) {
      if (!tables.size) clear(body, failure(err, refresh));
    }
  }

  return { el, refresh };
}

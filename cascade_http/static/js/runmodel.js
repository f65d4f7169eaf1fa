// One run as it is now, kept live from its event stream: the run, its sims, the kernels they
// finished and the files they stored. The sims, timeline and compare tabs all read it.
//
// The run's `sim_counts` are the server's: the snapshot's, then those a `sim` event that moves
// its sim to another state carries (`run_sim_counts`), and a `run` event's.
//
// The stream's snapshot carries the run and its sims; kernels and files come from their list
// routes right after the snapshot, and from `kernel` / `file` events from then on. Both are
// keyed (sim + kernel index, sim + file name), so what arrives twice is kept once. A dropped
// connection resumes from the last event id (see sse.js): no rows are lost.
//
// What needs attention (a sim no runner has taken, or whose runner was lost) is judged when
// the run is read, not sent as events: the run is read for it after the snapshot and every
// ATTENTION_MS while it is active; a sim that changes since says it is alive.

import { api, enc } from "./api.js";
import { poller } from "./poll.js";
import { eventStream } from "./sse.js";

const ATTENTION_MS = 10_000;

/** A RunSummary or RunDetail without its sims (kept in RunModel.sims instead). */
function runPart({ sims: _sims, ...run }) {
  return run;
}

export class RunModel extends EventTarget {
  constructor(id) {
    super();
    this.id = id;
    this.run = null; // RunDetail without its sims
    this.sims = new Map(); // sim id -> Sim
    this.kernels = new Map(); // sim id -> KernelStat[] by kernel_index
    this.kernelCount = 0;
    this.kernelVersion = 0;
    this.files = new Map(); // "sim/name" -> RunFile
    this.attention = new Map(); // sim id -> why it may never finish unless someone acts
    this.status = "connecting";
    this.error = null;
    this.pending = null;
  }

  start() {
    this.stream = eventStream(`/api/runs/${enc(this.id)}/events`, {
      onEvent: (type, data) => this.apply(type, data),
      onStatus: (status, info) => {
        this.status = status;
        if (status === "failed") this.error = info;
        this.changed("status");
      },
    });
    this.attentionPoll = poller(() => this.loadAttention(), () => ATTENTION_MS);
    return this;
  }

  stop() {
    this.stream?.close();
    this.attentionPoll?.stop();
    this.stopped = true;
  }

  /** Takes what a retry or a top-up answered, and follows the run again from a fresh
   * snapshot unless the stream is open (its next events, or its reconnection after the end
   * it was sending, come after the answer). A stream that ended with the run, or one whose
   * request is under way, may have been answered before the run was active again: the
   * answer would be the end (204), and nothing would follow the run any more. */
  resume(detail) {
    this.replace(detail);
    if (this.status === "open") return;
    this.stream?.close();
    this.attentionPoll?.stop();
    this.start();
  }

  get active() {
    return this.run?.state === "active";
  }

  apply(type, data) {
    switch (type) {
      case "snapshot":
        this.replace(data);
        this.loadLists();
        this.attentionPoll.now();
        break;
      case "sim": {
        const { run_sim_counts: counts, ...sim } = data;
        this.setSim(sim);
        if (counts) this.run = { ...this.run, sim_counts: counts };
        if (this.attention.delete(sim.id)) this.changed("attention");
        this.changed("sims");
        break;
      }
      case "kernel":
        this.addKernels([data]);
        break;
      case "file":
        this.addFiles([data]);
        break;
      case "run": {
        const wasActive = this.active;
        this.run = { ...this.run, ...runPart(data) };
        this.changed("run");
        if (wasActive && !this.active) this.loadFiles(); // files stored after the end are only listed
        break;
      }
    }
  }

  async loadAttention() {
    if (!this.active) return; // not there yet (the snapshot brings it), or over: nothing to act on
    this.setAttention((await api(`/api/runs/${enc(this.id)}`)).sims);
  }

  setAttention(sims) {
    const next = new Map(sims.filter((s) => s.attention).map((s) => [s.id, s.attention]));
    const same = next.size === this.attention.size && [...next].every(([id, text]) => this.attention.get(id) === text);
    if (same) return;
    this.attention = next;
    this.changed("attention");
  }

  async loadLists() {
    await Promise.all([this.loadKernels(), this.loadFiles()]);
  }

  async loadKernels() {
    try {
      this.addKernels(await api(`/api/runs/${enc(this.id)}/kernels`));
      this.kernelsLoaded = true;
      this.changed("kernels");
    } catch (err) {
      this.listError = err;
      this.changed("status");
    }
  }

  async loadFiles() {
    try {
      this.addFiles(await api(`/api/runs/${enc(this.id)}/files`));
    } catch (err) {
      this.listError = err;
      this.changed("status");
    }
  }

  addKernels(list) {
    for (const k of list) {
      let rows = this.kernels.get(k.sim_id);
      if (!rows) this.kernels.set(k.sim_id, (rows = []));
      if (rows[k.kernel_index] === undefined) this.kernelCount += 1;
      rows[k.kernel_index] = k;
    }
    if (list.length) {
      this.kernelVersion += 1;
      this.changed("kernels");
    }
  }

  addFiles(list) {
    for (const f of list) this.files.set(`${f.sim_id}/${f.name}`, f);
    if (list.length) this.changed("files");
  }

  /** The run's sims in the order of its entries, then replica. */
  orderedSims() {
    const order = new Map((this.run?.entries ?? []).map((e, i) => [e.gpu_config, i]));
    return [...this.sims.values()].sort(
      (a, b) => (order.get(a.gpu_config) ?? 99) - (order.get(b.gpu_config) ?? 99) || a.gpu_config.localeCompare(b.gpu_config) || a.replica - b.replica,
    );
  }

  /** Sims per state, the run's `sim_counts`: { running: 2, succeeded: 1 }. */
  simCounts() {
    return this.run?.sim_counts ?? {};
  }

  filesOf(simId) {
    return [...this.files.values()].filter((f) => f.sim_id === simId).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Takes the run and sims of a RunDetail: the snapshot's, or what a cancel answered. */
  replace(detail) {
    this.run = runPart(detail);
    for (const sim of detail.sims) this.setSim(sim);
    this.changed("run", "sims");
  }

  /** A sim as it is now. A new attempt starts over: the kernels and files of the one before go. */
  setSim(sim) {
    const known = this.sims.get(sim.id);
    this.sims.set(sim.id, sim);
    if (!known || (known.attempt ?? 1) === (sim.attempt ?? 1)) return;
    const rows = this.kernels.get(sim.id) ?? [];
    this.kernelCount -= rows.filter((k) => k !== undefined).length;
    this.kernels.delete(sim.id);
    for (const key of [...this.files.keys()]) if (key.startsWith(`${sim.id}/`)) this.files.delete(key);
    this.kernelVersion += 1;
    this.changed("kernels", "files");
  }

  /** Listeners get one "change" event per frame with the set of what changed. */
  changed(...kinds) {
    if (!this.pending) {
      this.pending = new Set();
      const flush = () => {
        const detail = this.pending;
        this.pending = null;
        if (!this.stopped) this.dispatchEvent(new CustomEvent("change", { detail }));
      };
      if (document.hidden) setTimeout(flush, 250);
      else requestAnimationFrame(flush);
    }
    for (const kind of kinds) this.pending.add(kind);
  }
}

// A sim by its id alone (#/sims/{id}), as a cached sim's marker links its source, which may
// be of another run: the sim's run is read off the start of its results (GET
// /api/sims/{id}/results, whose `sim` comes first), the rest left unread, and its run opens.

import { enc, request } from "../api.js";
import { clear, failure, h, loading } from "../dom.js";

const RUN_ID = /"run_id":"([^"]+)"/;

async function runOf(simId, signal) {
  const response = await request(`/api/sims/${enc(simId)}/results`, { signal });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      text += decoder.decode(value ?? new Uint8Array(), { stream: !done });
      const found = RUN_ID.exec(text);
      if (found) return found[1];
      if (done) throw new Error(`sim ${simId}'s results name no run`);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

export function mountSimLink(root, { id }) {
  const aborter = new AbortController();
  const go = () => {
    clear(root, h("div", { class: "page" }, loading(`Finding sim ${id}…`)));
    runOf(id, aborter.signal)
      .then((run) => location.replace(`#/runs/${enc(run)}`))
      .catch((err) => err.name !== "AbortError" && clear(root, h("div", { class: "page" }, failure(err, go))));
  };
  go();
  return { destroy: () => aborter.abort() };
}
